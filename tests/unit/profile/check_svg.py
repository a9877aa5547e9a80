#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Runs svg_gen (argv[1]) and checks that its SVG flamegraph is well-formed XML with the
# structure the embedded script relies on. Exit 0 ok, 1 failure.
import subprocess
import sys
import xml.etree.ElementTree as ET

NS = '{http://www.w3.org/2000/svg}'

out = subprocess.run([sys.argv[1]], check=True, capture_output=True).stdout
root = ET.fromstring(out)  # raises on malformed XML
assert root.tag == NS + 'svg', root.tag
assert root.find(NS + 'script') is not None, 'no script'
frames = root.find(".//*[@id='frames']")
assert frames is not None, 'no frames group'
gs = frames.findall(NS + 'g')
names = [g.get('data-name') for g in gs]
assert 'all' in names, names
assert 'a<b>&"c\'' in names, names          # escaped in the file, intact once parsed
assert any('\ufffd' in n or '?' in n for n in names if n not in ('all',)), names
for g in gs:
    assert g.find(NS + 'title') is not None and g.find(NS + 'rect') is not None
    assert g.find(NS + 'text') is not None
    assert float(g.find(NS + 'rect').get('width')) > 0
title = ''.join(root.itertext())
assert 'guest <img> & "quotes"' in title, 'title not escaped/decoded'
print('ok: svg is well-formed XML with %d frames' % len(gs))
