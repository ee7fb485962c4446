#!/usr/bin/env python3
"""Draws dype-eval's figures from the CSVs in a report folder as PNG (matplotlib).

    python3 scripts/plot_eval.py eval-report

Figure 6: P2P against host-staged speedup by transfer size; Figure 7: throughput and energy
efficiency normalised to FPGA-only; Figure 8: the transformer's gain over GPU-only at window 512;
Figure 9: Pareto fronts. A figure whose CSV is missing or empty is skipped with a message.
Everything plotted is modelled (dype-eval's emulated testbeds). Exit status 3: matplotlib is not
installed.
"""
import csv
import os
import sys
from collections import defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
except ImportError:
    print("plot_eval: matplotlib is not installed (python3-matplotlib)", file=sys.stderr)
    sys.exit(3)


def rows(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def save(fig, folder, stem):
    fig.tight_layout()
    fig.savefig(os.path.join(folder, f"{stem}.png"), dpi=120)
    plt.close(fig)


def figure6(folder):
    data = rows(folder, "fig6_p2p.csv")
    if not data:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    by_ic = defaultdict(list)
    for r in data:
        by_ic[r["interconnect"]].append((int(r["bytes"]), float(r["speedup"])))
    for ic, pts in by_ic.items():
        pts.sort()
        label = ic if ic.startswith("measured") else f"{ic} (modelled)"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("transfer size (bytes)")
    ax.set_ylabel("P2P speedup over host-staged")
    ax.set_title("Figure 6: P2P vs host-staged (GPU to FPGA modelled; measured pairs as named)")
    ax.legend()
    save(fig, folder, "fig6_p2p")
    return True


def figure7(folder):
    data = rows(folder, "fig7_normalised.csv")
    if not data:
        return False
    workloads = list(dict.fromkeys(r["workload"] for r in data))
    ics = list(dict.fromkeys(r["interconnect"] for r in data))
    methods = list(dict.fromkeys(r["method"] for r in data))
    groups = [(w, ic) for w in workloads for ic in ics]
    value = {(r["workload"], r["interconnect"], r["method"]): r for r in data}
    fig, axes = plt.subplots(2, 1, figsize=(max(8, len(groups) * 0.9), 7), sharex=True)
    width = 0.8 / len(methods)
    for ax, metric, label in ((axes[0], "throughput", "throughput"), (axes[1], "efficiency", "energy efficiency")):
        for i, m in enumerate(methods):
            xs, ys = [], []
            for g, (w, ic) in enumerate(groups):
                r = value.get((w, ic, m))
                if r:
                    xs.append(g + (i - len(methods) / 2) * width + width / 2)
                    ys.append(float(r[metric]))
            ax.bar(xs, ys, width, label=m)
        ax.set_ylabel(f"{label} / FPGA-only")
        ax.axhline(1.0, color="grey", linewidth=0.5)
    axes[1].set_xticks(range(len(groups)))
    axes[1].set_xticklabels([f"{w}\n{ic}" for w, ic in groups], fontsize=7)
    axes[0].legend(fontsize=7, ncol=4)
    axes[0].set_title("Figure 7: normalised to FPGA-only (modelled)")
    save(fig, folder, "fig7_normalised")
    return True


def figure8(folder):
    data = rows(folder, "fig8_transformer.csv")
    if not data:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    series = defaultdict(list)
    for r in data:
        series[(r["interconnect"], r["mode"])].append(
            (int(r["seq_len"]), float(r["throughput_gain"]), float(r["efficiency_gain"])))
    for (ic, mode), pts in series.items():
        pts.sort()
        for ax, idx in ((axes[0], 1), (axes[1], 2)):
            ax.plot([p[0] for p in pts], [p[idx] for p in pts], marker="o", label=f"{mode} {ic}")
    for ax, name in ((axes[0], "throughput"), (axes[1], "energy efficiency")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("seq_len (window 512)")
        ax.set_ylabel(f"{name} gain over GPU-only")
        ax.axhline(1.0, color="grey", linewidth=0.5)
    axes[0].legend(fontsize=6)
    fig.suptitle("Figure 8: transformer, DyPe over GPU-only (modelled)")
    save(fig, folder, "fig8_transformer")
    return True


def figure9(folder):
    data = rows(folder, "fig9_pareto.csv")
    if not data:
        return False
    workloads = list(dict.fromkeys(r["workload"] for r in data))
    fig, axes = plt.subplots(1, len(workloads), figsize=(4 * len(workloads), 3.5), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        pts = sorted((float(r["throughput_per_s"]), 1.0 / float(r["energy_j"]), r["plan"])
                     for r in data if r["workload"] == w)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o")
        for x, y, plan in pts:
            ax.annotate(plan, (x, y), fontsize=6)
        ax.set_title(w)
        ax.set_xlabel("throughput (inferences/s)")
        ax.set_ylabel("inferences per joule")
    fig.suptitle("Figure 9: Pareto fronts (modelled)")
    save(fig, folder, "fig9_pareto")
    return True


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: plot_eval.py REPORT_FOLDER", file=sys.stderr)
        return 2
    folder = sys.argv[1]
    for name, draw in (("Figure 6", figure6), ("Figure 7", figure7), ("Figure 8", figure8), ("Figure 9", figure9)):
        if not draw(folder):
            print(f"plot_eval: {name} skipped (no data in its CSV)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
