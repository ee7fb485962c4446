#!/usr/bin/env python3
"""Draws a performance model's predicted-against-measured plot as a PNG (matplotlib).

    python3 scripts/plot_perfmodel.py cpu.plot.json cpu.png

The JSON is what `dype-profile show|run --plot cpu.png` writes beside the PNG: a title, a
subtitle (where the times come from: measured or modelled), and one panel per kernel with its
points (measured_s, predicted_s, holdout). Each panel is log-log with the y = x line and +-15%
bands; training points blue, held-out points red. Exit status 3: matplotlib is not installed.
"""
import json
import math
import sys

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    import matplotlib.ticker
except ImportError:
    print("plot_perfmodel: matplotlib is not installed (python3-matplotlib)", file=sys.stderr)
    sys.exit(3)


def decades(points):
    values = [v for p in points for v in (p["measured_s"], p["predicted_s"])
              if v > 0 and math.isfinite(v)]
    if not values:
        return 1e-6, 1.0
    # Whole decades around the points, with room so none sits on the frame.
    lo = 10 ** math.floor(math.log10(min(values) / 1.3))
    hi = 10 ** max(math.log10(lo) + 1, math.ceil(math.log10(max(values) * 1.3)))
    return lo, hi


def main():
    if len(sys.argv) != 3:
        print("usage: plot_perfmodel.py DATA.json OUT.png", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        data = json.load(f)
    panels = data["panels"] or [{"title": "no kernels", "points": []}]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        pts = [p for p in panel["points"] if p["measured_s"] > 0 and p["predicted_s"] > 0]
        lo, hi = decades(pts)
        ax.plot([lo, hi], [lo, hi], color="#999", linewidth=1)
        for f in (1.15, 1 / 1.15):
            ax.plot([lo, hi], [lo * f, hi * f], color="#bbb", linewidth=1, linestyle="--")
        for holdout, colour, alpha, label in ((False, "#1f77b4", 0.45, "training"),
                                              (True, "#d62728", 0.9, "held out")):
            sel = [p for p in pts if p["holdout"] == holdout]
            ax.scatter([p["measured_s"] for p in sel], [p["predicted_s"] for p in sel], s=10,
                       color=colour, alpha=alpha, label=f"{label} ({len(sel)})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.grid(True, which="major", color="#eee")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(panel["title"], fontsize=9)
        ax.set_xlabel("measured / device time (s)")
        ax.set_ylabel("predicted (s)")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{data['title']}\n{data['subtitle']}  (dashed: +-15%)", fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
