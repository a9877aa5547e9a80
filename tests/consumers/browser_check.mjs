// SPDX-License-Identifier: MIT
// Drive the system Chromium headless through playwright-core (no browser download):
//   speedscope URL EXPECT  - open speedscope on our export; fail on an alert, an error screen
//                            or a page error; print the title and the sandwich table's rows
//   svg FILE               - open the SVG flamegraph, click a frame, print the DOM before and
//                            after the zoom and after Reset Zoom (compared by run_consumers.py)
// Prints one JSON object on stdout.
import { chromium } from 'playwright-core';

const CHROMIUM = process.env.HVPROF_CHROMIUM || '/usr/bin/chromium';
const [mode, target] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run',
    '--disable-dev-shm-usage'],
});
const out = { errors: [], dialogs: [] };
try {
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await ctx.newPage();
  page.on('pageerror', (e) => out.errors.push(String(e)));
  page.on('dialog', async (d) => { out.dialogs.push(d.message()); await d.dismiss(); });
  if (mode === 'speedscope') {
    await page.goto(target);
    await page.waitForFunction(() => / - speedscope$/.test(document.title), null,
      { timeout: 60000 });
    await page.waitForTimeout(1500);
    out.title = await page.title();
    out.body = (await page.evaluate(() => document.body.innerText)).slice(0, 20000);
  } else if (mode === 'svg') {
    await page.goto('file://' + target);
    await page.waitForFunction(() => document.querySelectorAll('#frames g').length > 0);
    const snap = () => page.evaluate(() => [...document.querySelectorAll('#frames g')].map((g) => ({
      name: g.getAttribute('data-name'),
      depth: +g.getAttribute('data-depth'),
      x: +g.querySelector('rect').getAttribute('x'),
      w: +g.querySelector('rect').getAttribute('width'),
      shown: g.style.display !== 'none',
      label: g.querySelector('text').textContent,
    })));
    out.before = await snap();
    // the widest frame at depth 2 that is narrower than its parent: a real zoom target
    const cand = out.before.filter((f) => f.depth === 2).sort((a, b) => b.w - a.w);
    const pick = cand.find((f) => f.w < out.before[0].w * 0.9) || cand[0];
    out.clicked = pick;
    const idx = out.before.indexOf(pick);
    await page.locator('#frames g').nth(idx).locator('rect').click({ force: true });
    await page.waitForTimeout(300);
    out.after = await snap();
    out.unzoomOpacity = await page.evaluate(() => document.getElementById('unzoom').style.opacity);
    await page.locator('#unzoom').click({ force: true });
    await page.waitForTimeout(300);
    out.reset = await snap();
    out.width = await page.evaluate(() => +document.getElementById('frames').getAttribute('data-width'));
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
