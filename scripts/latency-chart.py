#!/usr/bin/env python3
"""Chart of Daytona per-step time against added latency.

Usage: bench-daytona-latency.sh | latency-chart.py OUT.svg [BEFORE]
Reads the benchmark's table (latency, per step) from stdin; BEFORE is an
optional "ms:per_step,..." series measured earlier, drawn for comparison.
The 2.5x round-trip target is drawn as a line.
"""
import re
import sys
from xml.sax.saxutils import escape

out = sys.argv[1]
before = []
if len(sys.argv) > 2:
    before = [tuple(float(x) for x in p.split(":")) for p in sys.argv[2].split(",")]
now = []
for line in sys.stdin:
    m = re.match(r"\s*(\d+) ms\s+([\d.]+) ms", line)
    if m:
        now.append((float(m.group(1)), float(m.group(2))))
W, H, L, B, T, R = 560, 320, 60, 40, 20, 150
xmax = max(x for x, _ in now + before)
ymax = max(y for _, y in now + before + [(xmax, 2.5 * xmax)]) * 1.1
sx = lambda x: L + (W - L - R) * x / xmax
sy = lambda y: H - B - (H - B - T) * y / ymax
s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<line x1="{L}" y1="{H-B}" x2="{W-R}" y2="{H-B}" stroke="black"/>',
     f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H-B}" stroke="black"/>']
for x, _ in now:
    s.append(f'<text x="{sx(x):.0f}" y="{H-B+16}" text-anchor="middle">{x:.0f}</text>')
s.append(f'<text x="{(L+W-R)/2:.0f}" y="{H-6}" text-anchor="middle">added latency per response (ms)</text>')
step = 100 if ymax > 300 else 50
for y in range(0, int(ymax) + 1, step):
    s.append(f'<text x="{L-6}" y="{sy(y)+4:.0f}" text-anchor="end">{y}</text>')
    s.append(f'<line x1="{L}" y1="{sy(y):.0f}" x2="{W-R}" y2="{sy(y):.0f}" stroke="#eee"/>')
s.append(f'<text x="14" y="{T+(H-B-T)/2:.0f}" transform="rotate(-90 14 {T+(H-B-T)/2:.0f})" text-anchor="middle">per step (ms)</text>')


def series(points, colour, label, dash=""):
    pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    s.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2" {dash}/>')
    for x, y in points:
        s.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"/>')
    lx, ly = points[-1]
    s.append(f'<text x="{sx(lx)+8:.0f}" y="{sy(ly)+4:.0f}" fill="{colour}">{escape(label)}</text>')


series([(0, 0), (xmax, 2.5 * xmax)], "#999", "2.5 x round trip (target)", 'stroke-dasharray="4 4"')
if before:
    series(before, "#c33", "before: session per step")
series(now, "#26a", "step agent")
s.append("</svg>")
open(out, "w").write("\n".join(s) + "\n")
