#!/usr/bin/env python3
"""Turn scripts/bench-core.sh samples into a Markdown table and an SVG chart.

Usage: bench-chart.py SAMPLES.tsv TABLE.md CHART.svg "machine note"
Figures are medians over the paired runs; the ratio is the median of the
per-run ratios rfs/baseline (each pair ran back to back).
"""
import csv
import statistics
import sys
from xml.sax.saxutils import escape

samples, table_path, svg_path, note = sys.argv[1:5]
rows = list(csv.DictReader(open(samples), delimiter="\t"))
groups = {}
for r in rows:
    groups.setdefault((r["shape"], r["provider"], r["regime"]), []).append(r)

PIPE, ESC = "|", "\\|"
BASE = {"local": "git archive | tar -x", "docker": "git archive | docker cp -"}
WHERE = {
    ("docker", "cache"): " (writable layer)",
    ("docker", "volume"): " (volume)",
    ("local", "memory"): " (tmpfs)",
}
out = []
for (shape, prov, regime), rs in groups.items():
    b = statistics.median(float(r["baseline_s"]) for r in rs)
    o = statistics.median(float(r["rfs_s"]) for r in rs)
    ratio = statistics.median(float(r["rfs_s"]) / float(r["baseline_s"]) for r in rs)
    rss = max(int(r["rss_kib"]) for r in rs) / 1024
    out.append((shape, prov, regime, len(rs), b, o, ratio, rss))

with open(table_path, "w") as t:
    t.write(f"Measured {note}.\n\n")
    t.write("| shape | provider | regime | runs | baseline | baseline s | rfs sync s | ratio | peak RSS MiB |\n")
    t.write("|---|---|---|---|---|---|---|---|---|\n")
    for shape, prov, regime, n, b, o, ratio, rss in out:
        t.write(f"| {shape} | {prov} | {regime} | {n} | `{BASE[prov].replace(PIPE, ESC)}`{WHERE.get((prov, regime), '')} | {b:.2f} | {o:.2f} | {ratio:.2f}x | {rss:.1f} |\n")

# Horizontal grouped bars: baseline and rfs seconds per row, ratio label.
W, left, bar, gap = 760, 230, 14, 14
scale_max = max((max(x[4], x[5]) for x in out), default=1)
height = 70 + len(out) * (2 * bar + gap) + 40
px = (W - left - 110) / scale_max
s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif" font-size="12">',
     f'<rect width="{W}" height="{height}" fill="white"/>',
     '<text x="10" y="20" font-size="15" font-weight="bold">sync_source (verification included) vs baseline, seconds (median)</text>',
     f'<text x="10" y="38" fill="#555">{escape(note)}</text>',
     f'<rect x="{left}" y="48" width="12" height="10" fill="#9aa5b1"/><text x="{left + 16}" y="57">baseline</text>',
     f'<rect x="{left + 90}" y="48" width="12" height="10" fill="#2b6cb0"/><text x="{left + 106}" y="57">rfs</text>']
y = 70
for shape, prov, regime, n, b, o, ratio, rss in out:
    s.append(f'<text x="10" y="{y + bar + 4}">{escape(f"{shape} · {prov} · {regime}")}</text>')
    s.append(f'<rect x="{left}" y="{y}" width="{b * px:.1f}" height="{bar}" fill="#9aa5b1"/>')
    s.append(f'<text x="{left + b * px + 4:.1f}" y="{y + bar - 3}">{b:.2f}s</text>')
    s.append(f'<rect x="{left}" y="{y + bar}" width="{o * px:.1f}" height="{bar}" fill="#2b6cb0"/>')
    s.append(f'<text x="{left + o * px + 4:.1f}" y="{y + 2 * bar - 3}">{o:.2f}s · {ratio:.2f}x · {rss:.0f} MiB</text>')
    y += 2 * bar + gap
s.append("</svg>")
open(svg_path, "w").write("\n".join(s) + "\n")
