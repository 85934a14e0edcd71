#!/usr/bin/env python3
"""Tree patterns against the cut bound on every preset and on random machines.

For each machine it runs `compass topo ... --json [--sim]` and reports, per pattern, the
pattern's time over the all-gather cut bound: the busiest direction's load (perfect pipelining)
and, with --sim, the simulated chunked all-gather. Random machines: seeds 0..SEEDS-1, group size
2 + seed % 15 (2..16 GPUs), family drawn from the seed.

usage: tools/pattern_study.py [--compass build/release/compass] [--seeds 60] [--sim]
                              [--size BYTES]
"""
import argparse
import json
import statistics
import subprocess
import sys


def topo(compass, args, sim, size):
    cmd = [compass, "topo", *args, "--json", "--size", str(size)]
    if sim:
        cmd.append("--sim")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def ratios(report):
    bound = report["bound"]["time_s"]
    r = {}
    for p in report["patterns"]:
        if p["pattern"] in ("ring", "double-ring", "hier", "synth") and bound > 0:
            r[p["pattern"] + " load"] = p["time_s"] / bound
    for p in report.get("simulated", []):
        if bound > 0:
            r[p["pattern"] + " sim"] = p["time_s"] / bound
    return r


def summary(name, values):
    v = sorted(values)
    within = sum(1 for x in v if x <= 1.05 + 1e-12)
    return (f"  {name:<16} n={len(v):3d}  min {v[0]:.3f}  median {statistics.median(v):.3f}  "
            f"p90 {v[min(len(v) - 1, int(0.9 * len(v)))]:.3f}  max {v[-1]:.3f}  "
            f"<=1.05x: {within}/{len(v)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compass", default="build/release/compass")
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--sim", action="store_true")
    ap.add_argument("--size", type=int, default=1 << 30)
    a = ap.parse_args()

    presets = subprocess.run([a.compass, "list", "presets", "--json"], check=True,
                             capture_output=True, text=True).stdout
    names = [p["name"] for p in json.loads(presets)]
    print(f"time / all-gather cut bound, {a.size} bytes")
    print("presets (every GPU of the machine):")
    for name in names:
        rep = topo(a.compass, [name], a.sim, a.size)
        if len(rep["group"]) < 2:
            continue
        r = ratios(rep)
        print(f"  {name:<10} " + "  ".join(f"{k} {v:.3f}" for k, v in sorted(r.items())))
    per = {}
    worst = {}
    for seed in range(a.seeds):
        n = 2 + seed % 15
        rep = topo(a.compass, ["--random", str(seed), "--tp", str(n)], a.sim, a.size)
        for k, v in ratios(rep).items():
            per.setdefault(k, []).append(v)
            if v > worst.get(k, (0, None))[0]:
                worst[k] = (v, f"seed {seed} n {n} {rep['machine']}")
    print(f"random machines: seeds 0..{a.seeds - 1}, 2..16 GPUs")
    for k in sorted(per):
        print(summary(k, per[k]) + f"  worst: {worst[k][1]}")


if __name__ == "__main__":
    sys.exit(main())
