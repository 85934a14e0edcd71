#!/usr/bin/env python3
"""The job simulation's one-replica approximation against the whole cluster.

For each cluster and DP-overlap setting, runs `compass search ... --refine sim` twice, with
`--sim-scope replica` (one pipeline, the usual scope) and `--sim-scope cluster` (every GPU), and
compares the simulated iteration times of the same layouts. Prints a row per layout with
--rows, and per setting: layouts, the replica scope's error against the whole cluster (mean
absolute, largest, signed mean), whether both scopes pick the same best layout, the step
model's MAPE against each scope, and the seconds each scope took.

Usage: tools/job_sim_scope.py [--compass build/release/compass] [--gpus 32] [--top 40]
                              [--clusters dgx-h100,dgx-a100,a6000x8-2nic] [--rows]
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def search(compass, cluster, gpus, top, overlap, scope, out):
    cmd = [compass, "search", "--model", "llama2-13b", "--cluster", cluster, "--gpus", str(gpus),
           "--global-batch", "128", "--seq", "4096", "--top", str(top), "--refine", "sim",
           "--sim-scope", scope, "--json-out", str(out), "--force"] + overlap
    start = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"job_sim_scope: {' '.join(cmd)} failed: {r.stderr.strip()}")
    rows = json.loads(Path(out).read_text())["refine"]["rows"]
    return {row["describe"]: row for row in rows}, took


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compass", default="build/release/compass")
    ap.add_argument("--gpus", type=int, default=32)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--clusters", default="dgx-h100,dgx-a100,a6000x8-2nic")
    ap.add_argument("--rows", action="store_true", help="print every layout")
    a = ap.parse_args()
    if not Path(a.compass).is_file():
        sys.exit(f"job_sim_scope: no compass binary at {a.compass} (build it first)")
    all_err = []
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'cluster':<14} {'dp overlap':<10} {'layouts':>7} {'|rep-cl| mean':>13} "
              f"{'largest':>8} {'signed':>8} {'same best':>9} {'model vs rep':>12} "
              f"{'model vs cl':>11} {'rep s':>6} {'cl s':>6}")
        for cluster in a.clusters.split(","):
            for name, overlap in (("on", []), ("off", ["--no-dp-overlap"])):
                rep, rep_s = search(a.compass, cluster, a.gpus, a.top, overlap, "replica",
                                    Path(tmp) / "r.json")
                cl, cl_s = search(a.compass, cluster, a.gpus, a.top, overlap, "cluster",
                                  Path(tmp) / "c.json")
                if set(rep) != set(cl):
                    sys.exit(f"job_sim_scope: {cluster}: the two searches returned other layouts")
                errs = {k: (rep[k]["sim_s"] - cl[k]["sim_s"]) / cl[k]["sim_s"] for k in rep}
                all_err += list(errs.values())
                best_rep = min(rep, key=lambda k: rep[k]["sim_s"])
                best_cl = min(cl, key=lambda k: cl[k]["sim_s"])
                model_rep = sum(abs(r["error"]) for r in rep.values()) / len(rep)
                model_cl = sum(abs((cl[k]["model_s"] - cl[k]["sim_s"]) / cl[k]["sim_s"])
                               for k in cl) / len(cl)
                mean_abs = sum(abs(e) for e in errs.values()) / len(errs)
                largest = max(errs.values(), key=abs)
                signed = sum(errs.values()) / len(errs)
                print(f"{cluster:<14} {name:<10} {len(errs):>7} {100 * mean_abs:>12.3f}% "
                      f"{100 * largest:>+7.3f}% {100 * signed:>+7.3f}% "
                      f"{'yes' if best_rep == best_cl else 'no':>9} {100 * model_rep:>11.2f}% "
                      f"{100 * model_cl:>10.2f}% {rep_s:>6.1f} {cl_s:>6.1f}")
                if a.rows:
                    for k in sorted(errs, key=lambda k: -abs(errs[k])):
                        print(f"    {k:<40} replica {rep[k]['sim_s']:.4f} s  cluster "
                              f"{cl[k]['sim_s']:.4f} s  {100 * errs[k]:+.3f}%")
    mean_abs = sum(abs(e) for e in all_err) / len(all_err)
    print(f"all {len(all_err)} layouts: the replica scope's error against the whole cluster: "
          f"mean |error| {100 * mean_abs:.3f}%, largest {100 * max(map(abs, all_err)):.3f}%")


if __name__ == "__main__":
    main()
