#!/usr/bin/env python3
"""The job simulation against a fuller one: one pipeline against the whole cluster, or the
TP operators' priced durations against their simulated ones.

For each cluster and DP-overlap setting, runs `compass search ... --refine sim` twice with
the setting under study changed and compares the simulated iteration times of the same
layouts:

  --vary scope  `--sim-scope replica` (one pipeline, the usual scope) against `--sim-scope
                cluster` (every GPU): the one-replica approximation's error;
  --vary tp     `--sim-tp priced` (the step model's TP operator times, the default) against
                `--sim-tp simulated` (each TP operator's schedule simulated on the node first).

Each layout runs as `--under` prices it (`--sim-under`: compass, Compass's own choices, by
default; simulated TP operators exist for compass and megatron only).

Prints a row per layout with --rows, and per setting: layouts, the default's error against the
fuller simulation (mean absolute, largest, signed mean), whether both pick the same best layout,
the step model's MAPE against each, and the seconds each took.

Usage: tools/job_sim_compare.py [--vary scope|tp] [--compass build/release/compass] [--gpus 32]
                                [--top 40] [--clusters dgx-h100,dgx-a100,a6000x8-2nic] [--tp N]
                                [--under compass|megatron|launch|te-default] [--rows]
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARY = {
    "scope": (["--sim-scope", "replica"], ["--sim-scope", "cluster"], "replica", "cluster"),
    "tp": (["--sim-tp", "priced"], ["--sim-tp", "simulated"], "priced", "simulated"),
}


def search(a, cluster, extra, out):
    cmd = [a.compass, "search", "--model", "llama2-13b", "--cluster", cluster, "--gpus",
           str(a.gpus), "--global-batch", "128", "--seq", "4096", "--top", str(a.top), "--refine",
           "sim", "--sim-under", a.under, "--json-out", str(out), "--force"] + extra
    if a.tp:
        cmd += ["--tp", str(a.tp)]
    start = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"job_sim_compare: {' '.join(cmd)} failed: {r.stderr.strip()}")
    rows = json.loads(Path(out).read_text())["refine"]["rows"]
    return {row["describe"]: row for row in rows}, took


def mape(rows):
    return sum(abs((r["model_s"] - r["sim_s"]) / r["sim_s"]) for r in rows.values()) / len(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vary", choices=sorted(VARY), default="scope")
    ap.add_argument("--compass", default="build/release/compass")
    ap.add_argument("--gpus", type=int, default=32)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--clusters", default="dgx-h100,dgx-a100,a6000x8-2nic")
    ap.add_argument("--tp", type=int, help="search only layouts of this TP degree")
    ap.add_argument("--under", choices=["compass", "megatron", "launch", "te-default"],
                    default="compass", help="what each layout runs (compass search --sim-under)")
    ap.add_argument("--rows", action="store_true", help="print every layout")
    a = ap.parse_args()
    if not Path(a.compass).is_file():
        sys.exit(f"job_sim_compare: no compass binary at {a.compass} (build it first)")
    base_flags, full_flags, base, full = VARY[a.vary]
    all_err = []
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'cluster':<14} {'dp overlap':<10} {'layouts':>7} {'|error| mean':>12} "
              f"{'largest':>8} {'signed':>8} {'same best':>9} {'model vs ' + base:>17} "
              f"{'model vs ' + full:>19} {base + ' s':>11} {full + ' s':>11}")
        for cluster in a.clusters.split(","):
            for name, overlap in (("on", []), ("off", ["--no-dp-overlap"])):
                lo, lo_s = search(a, cluster, overlap + base_flags, Path(tmp) / "base.json")
                hi, hi_s = search(a, cluster, overlap + full_flags, Path(tmp) / "full.json")
                if set(lo) != set(hi):
                    sys.exit(f"job_sim_compare: {cluster}: the two searches returned other layouts")
                errs = {k: (lo[k]["sim_s"] - hi[k]["sim_s"]) / hi[k]["sim_s"] for k in lo}
                all_err += list(errs.values())
                best_lo = min(lo, key=lambda k: lo[k]["sim_s"])
                best_hi = min(hi, key=lambda k: hi[k]["sim_s"])
                mean_abs = sum(abs(e) for e in errs.values()) / len(errs)
                largest = max(errs.values(), key=abs)
                signed = sum(errs.values()) / len(errs)
                print(f"{cluster:<14} {name:<10} {len(errs):>7} {100 * mean_abs:>11.3f}% "
                      f"{100 * largest:>+7.3f}% {100 * signed:>+7.3f}% "
                      f"{'yes' if best_lo == best_hi else 'no':>9} {100 * mape(lo):>16.2f}% "
                      f"{100 * mape(hi):>18.2f}% {lo_s:>11.1f} {hi_s:>11.1f}")
                if a.rows:
                    for k in sorted(errs, key=lambda k: -abs(errs[k])):
                        print(f"    {k:<40} {base} {lo[k]['sim_s']:.4f} s  {full} "
                              f"{hi[k]['sim_s']:.4f} s  {100 * errs[k]:+.3f}%")
    mean_abs = sum(abs(e) for e in all_err) / len(all_err)
    print(f"all {len(all_err)} layouts: {base} against {full}: "
          f"mean |error| {100 * mean_abs:.3f}%, largest {100 * max(map(abs, all_err)):.3f}%")


if __name__ == "__main__":
    main()
