#!/usr/bin/env python3
"""Predicted vs measured scatter of `compass validate` (one colour per strategy).

Usage: plot_validate.py POINTS.csv OUT.png   (the CSV `compass validate --csv` writes)
"""
import csv
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_validate.py: matplotlib is missing (apt install python3-matplotlib)",
              file=sys.stderr)
        return 1
    by_strategy = {}
    with open(sys.argv[1], newline="") as f:
        for row in csv.DictReader(f):
            kind = row["strategy"]
            if kind.startswith("decompose:"):
                kind = "decompose:d"
            pts = by_strategy.setdefault(kind, ([], []))
            pts[0].append(float(row["measured_s"]) * 1e3)
            pts[1].append(float(row["predicted_s"]) * 1e3)
    fig, ax = plt.subplots(figsize=(6, 6))
    lo, hi = float("inf"), 0.0
    for kind, (meas, pred) in sorted(by_strategy.items()):
        ax.scatter(meas, pred, s=14, label=kind, alpha=0.8)
        lo = min(lo, *meas, *pred)
        hi = max(hi, *meas, *pred)
    if hi > 0:
        ax.plot([lo, hi], [lo, hi], "k--", linewidth=0.8, label="predicted = measured")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("measured (ms, CPU executor with emulated links)")
    ax.set_ylabel("predicted by the planner (ms)")
    ax.set_title("compass validate")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
