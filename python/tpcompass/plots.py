#!/usr/bin/env python3
"""Pictures of Compass's results, drawn with matplotlib.

The kind is recognised from the JSON document:

* ``compass plan --json``: per-operator stacked bars (GEMM, exposed communication, overheads and
  interference) for Megatron-LM, TransformerEngine's defaults and Compass;
* ``compass sweep --json``: the per-strategy speedup distributions over sequential;
* ``compass simulate --trace``: the simulated timeline, one row per rank and resource.

Usage as a script (what ``compass plot`` runs): ``plots.py DATA.json OUT.png``.
From Python: ``tpcompass.plot(data_or_path)`` returns the Figure (``out=`` also saves it).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def kind_of(data: Any) -> str:
    """``"plan"``, ``"sweep"`` or ``"timeline"``; raises ValueError for anything else."""
    if isinstance(data, dict):
        if "ops" in data and "iteration" in data:
            return "plan"
        if "rows" in data and "summary" in data:
            return "sweep"
        if "traceEvents" in data:
            return "timeline"
    raise ValueError("not a plan, sweep or simulation trace JSON document")


def _new_figure(figsize: tuple) -> Any:
    """A matplotlib Figure outside pyplot: no display backend is chosen or needed, and a
    notebook shows it when it is a cell's value."""
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def _plan(data: dict) -> Any:
    configs = [("megatron", "Megatron-LM"), ("te_default", "TE defaults"), (None, "Compass")]
    parts = [("compute_s", "GEMM"), ("exposed_comm_s", "exposed communication"),
             ("overhead_s", "overheads"), ("interference_s", "interference")]
    ops = data["ops"]
    roles = [o["op"]["role"] for o in ops]
    fig = _new_figure((max(8, 1.1 * len(ops) * 1.6), 5))
    ax = fig.subplots()
    width = 0.27
    colors = ["#4c72b0", "#dd8452", "#8c8c8c", "#c44e52"]
    for ci, (key, label) in enumerate(configs):
        bottoms = [0.0] * len(ops)
        for pi, (part, pname) in enumerate(parts):
            vals = []
            for o in ops:
                est = o[key] if key else next(e for e in o["estimates"]
                                              if e["strategy"] == o["choice"])
                vals.append(1e3 * est[part])
            xs = [i + (ci - 1) * width for i in range(len(ops))]
            ax.bar(xs, vals, width, bottom=bottoms, color=colors[pi],
                   edgecolor="black", linewidth=0.3, label=pname if ci == 0 else None,
                   alpha=1.0 - 0.25 * ci)
            bottoms = [b + v for b, v in zip(bottoms, vals)]
        for i, b in enumerate(bottoms):
            ax.text(i + (ci - 1) * width, b, label.split()[0][0], ha="center", va="bottom",
                    fontsize=7)
    ax.set_xticks(range(len(ops)))
    ax.set_xticklabels(roles, rotation=30, ha="right")
    ax.set_ylabel("predicted time per operator (ms)")
    ax.set_title(f"{data['model']} on {data['profile']}, tp {data['tp']}: "
                 "M = Megatron-LM, T = TE defaults, C = Compass")
    ax.legend()
    fig.tight_layout()
    return fig


def _sweep(data: dict) -> Any:
    names = ["decompose:d*", "decompose:4", "fuse:all2all", "fuse:ring", "fuse:double-ring"]
    series, labels = [], []
    for n in names:
        vals = [r["times_s"]["sequential"] / r["times_s"][n] for r in data["rows"]
                if r["times_s"].get(n)]
        if vals:
            series.append(vals)
            labels.append(n)
    choice = []
    for r in data["rows"]:
        t = r["times_s"]
        c = r["choice"]
        key = "decompose:d*" if c.startswith("decompose") else c
        choice.append(t["sequential"] / t[key])
    series.append(choice)
    labels.append("choice")
    fig = _new_figure((9, 5))
    ax = fig.subplots()
    ax.boxplot(series, showmeans=True)
    ax.set_xticks(range(1, len(labels) + 1))
    ax.set_xticklabels(labels, rotation=20)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylabel("speedup over sequential")
    ax.set_title(f"{len(data['rows'])} configurations on {data['profile']}")
    fig.tight_layout()
    return fig


def _timeline(data: dict) -> Any:
    from matplotlib.patches import Rectangle

    events = data["traceEvents"]
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[(e["pid"], None)] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    spans = [e for e in events if e.get("ph") == "X"]
    rows = sorted({(e["pid"], e["tid"]) for e in spans})
    index = {r: i for i, r in enumerate(rows)}
    fig = _new_figure((11, max(3, 0.35 * len(rows) + 1)))
    ax = fig.subplots()
    palette = {}
    for e in spans:
        cat = e.get("cat") or e.get("name", "").split(" ")[0]
        color = palette.setdefault(cat, f"C{len(palette) % 10}")
        ax.barh(index[(e["pid"], e["tid"])], e.get("dur", 0) / 1e3, left=e["ts"] / 1e3,
                height=0.7, color=color, edgecolor="black", linewidth=0.2)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{names.get((p, None), f'rank {p}')} / "
                        f"{names.get((p, t), f'resource {t}')}" for p, t in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in palette.values()]
    if handles:
        ax.legend(handles, list(palette), fontsize=7, loc="upper right")
    ax.set_title("simulated timeline per rank and resource")
    fig.tight_layout()
    return fig


def figure(data: Any) -> Any:
    """The matplotlib Figure of ``data`` (a parsed plan, sweep or trace JSON document)."""
    return {"plan": _plan, "sweep": _sweep, "timeline": _timeline}[kind_of(data)](data)


def plot(data: Any, out: str) -> str:
    """Draws ``data`` (a parsed JSON document) into the image file ``out``; returns the kind."""
    kind = kind_of(data)
    figure(data).savefig(out, dpi=120)
    return kind


def main(argv: list) -> int:
    if len(argv) != 3:
        print("usage: plots.py DATA.json OUT.png", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            data = json.load(f)
        kind = kind_of(data)
    except (OSError, ValueError) as e:
        print(f"{argv[1]}: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is missing (Debian: apt install python3-matplotlib)", file=sys.stderr)
        return 2
    plot(data, argv[2])
    print(kind)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
