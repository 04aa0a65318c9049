#!/usr/bin/env python3
"""Plots dashboard panels from a real run's Prometheus data as one SVG (no Grafana here).

The input is what tests/e2e/monitoring_test.cpp writes after its parameter-server job
(build/e2e/dashboard-ps-job.json): for each panel title, each query's legendFormat and its
query_range result. Standard library only (no matplotlib on the development machines).

    docs/monitoring/plot_panels.py build/e2e/dashboard-ps-job.json docs/monitoring/ps-job.svg
"""
import json
import math
import re
import sys
from xml.sax.saxutils import escape

WIDTH, PANEL_H, MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 760, 190, 64, 150, 28, 30
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


def legend_of(fmt, metric):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt) or "value"


def lines_of(panel):
    """[(label, [(t, v)])] with the NaN samples left out."""
    lines = []
    for query in panel:
        for series in query["result"]:
            points = [(float(t), float(v)) for t, v in series["values"] if v not in ("NaN", "+Inf", "-Inf")]
            if points:
                lines.append((legend_of(query["legend"], series["metric"]), points))
    return lines


def nice_ticks(lo, hi, count=4):
    if hi <= lo:
        hi = lo + 1
    step = 10 ** math.floor(math.log10((hi - lo) / count))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= count:
            step *= m
            break
    first = math.floor(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 2) if first + i * step <= hi + 1e-9]


def panel_svg(title, lines, top, t0):
    out = []
    plot_w, plot_h = WIDTH - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B
    ts = [t for _, pts in lines for t, _ in pts]
    vs = [v for _, pts in lines for _, v in pts]
    t_hi = max(ts) - t0 if ts else 1
    v_lo, v_hi = min(0.0, min(vs)) if vs else 0.0, max(vs) if vs else 1.0
    if v_hi <= v_lo:
        v_hi = v_lo + 1
    x = lambda t: MARGIN_L + (t - t0) / max(t_hi, 1e-9) * plot_w
    y = lambda v: top + MARGIN_T + plot_h - (v - v_lo) / (v_hi - v_lo) * plot_h
    out.append(f'<text x="{MARGIN_L}" y="{top + 18}" font-weight="bold">{escape(title)}</text>')
    out.append(f'<rect x="{MARGIN_L}" y="{top + MARGIN_T}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>')
    for tick in nice_ticks(v_lo, v_hi):
        out.append(f'<line x1="{MARGIN_L}" x2="{MARGIN_L + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{MARGIN_L - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
    for tick in nice_ticks(0, t_hi):
        out.append(f'<text x="{x(t0 + tick):.1f}" y="{top + PANEL_H - 10}" text-anchor="middle">{tick:g} s</text>')
    for i, (label, pts) in enumerate(lines):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        ly = top + MARGIN_T + 12 + 16 * i
        out.append(f'<line x1="{WIDTH - MARGIN_R + 10}" x2="{WIDTH - MARGIN_R + 26}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{WIDTH - MARGIN_R + 30}" y="{ly}">{escape(label)}</text>')
    if not lines:
        out.append(f'<text x="{MARGIN_L + 10}" y="{top + MARGIN_T + 20}">no data</text>')
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data = json.load(open(sys.argv[1]))
    panels = [(title, lines_of(queries)) for title, queries in data.items()]
    t0 = min((t for _, lines in panels for _, pts in lines for t, _ in pts), default=0)
    height = PANEL_H * len(panels) + 40
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>']
    for i, (title, lines) in enumerate(panels):
        svg += panel_svg(title, lines, 10 + i * PANEL_H, t0)
    svg.append(f'<text x="{MARGIN_L}" y="{height - 8}" fill="#666">Plotted from a real run\'s '
               'Prometheus data with the dashboard\'s own queries (docs/monitoring/plot_panels.py); '
               'not a Grafana rendering.</text>')
    svg.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
