// SPDX-License-Identifier: MIT
// Decode a gzipped pprof profile with the independent npm decoder `pprof-format` and print a
// JSON summary (totals per sample type, names, mappings, labels) for run_consumers.py.
// usage: node pprof_decode.mjs FILE
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';

const raw = readFileSync(process.argv[2]);
if (raw[0] !== 0x1f || raw[1] !== 0x8b) {
  console.error('not gzip data');
  process.exit(1);
}
const p = Profile.decode(gunzipSync(raw));
const str = (i) => p.stringTable.strings[Number(i)];
const totals = p.sampleType.map(() => 0n);
const leafSelf = {};
const labelKeys = new Set();
const locs = new Map(p.location.map((l) => [String(l.id), l]));
const funcs = new Map(p.function.map((f) => [String(f.id), f]));
let badRefs = 0;
for (const s of p.sample) {
  s.value.forEach((v, i) => { totals[i] += BigInt(v); });
  for (const l of s.label) labelKeys.add(str(l.key));
  const ids = s.locationId.map(String);
  for (const id of ids) if (!locs.has(id)) badRefs++;
  const leaf = locs.get(ids[0]);
  if (leaf) {
    const f = funcs.get(String(leaf.line[0].functionId));
    if (!f) badRefs++;
    else leafSelf[str(f.name)] = (leafSelf[str(f.name)] || 0n) + BigInt(s.value[0]);
  }
}
const top = Object.entries(leafSelf).sort((a, b) => (b[1] > a[1] ? 1 : b[1] < a[1] ? -1 : 0))[0];
console.log(JSON.stringify({
  sampleTypes: p.sampleType.map((t) => `${str(t.type)}/${str(t.unit)}`),
  totals: totals.map(String),
  samples: p.sample.length,
  locations: p.location.length,
  functions: p.function.length,
  mappings: p.mapping.map((m) => ({ file: str(m.filename), buildId: str(m.buildId),
    start: String(m.memoryStart), limit: String(m.memoryLimit) })),
  labelKeys: [...labelKeys].sort(),
  topSelf: top ? [top[0], String(top[1])] : null,
  badRefs,
  period: String(p.period),
  periodType: p.periodType ? `${str(p.periodType.type)}/${str(p.periodType.unit)}` : null,
}));
