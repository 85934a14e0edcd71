#!/usr/bin/env python3
"""Runs `compass search` over a grid of machines, models, GPU counts and global batches and
prints every search whose best launch (what its printed Megatron-LM command runs) is another
layout than the one Compass's own per-operator choices would make fastest, then the count.

    python3 tools/search_winners.py [--compass build/release/compass]

Searches that fail (a model that does not fit, a batch no layout divides) are counted apart."""

import argparse
import itertools
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MACHINES = ["a6000x8", "a6000x4", "rtx4090x8", "a100x8", "h100x8", "a6000x8-2nic", "dgx-a100",
            "profiles/h100pcie-x8-gen5.json", "profiles/l40sx8.json", "profiles/a800x8.json"]
MODELS = ["llama2-7b", "llama2-13b", "gpt3-6.7b", "gpt3-13b"]
GPUS = [8, 16]
BATCHES = [32, 128]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compass", default=os.path.join(ROOT, "build/release/compass"))
    a = ap.parse_args()
    ran = failed = moved = 0
    for machine, model, gpus, batch in itertools.product(MACHINES, MODELS, GPUS, BATCHES):
        cluster = os.path.join(ROOT, machine) if machine.endswith(".json") else machine
        p = subprocess.run([a.compass, "search", "--model", model, "--cluster", cluster, "--gpus",
                            str(gpus), "--global-batch", str(batch), "--seq", "4096", "--top", "1",
                            "--json"], capture_output=True, text=True)
        if p.returncode != 0:
            failed += 1
            continue
        ran += 1
        best = json.loads(p.stdout)["best"]
        own, launch = best["compass"], best["launch"]
        if own["describe"] != launch["describe"]:
            moved += 1
            print(f"{machine} {model} {gpus} GPUs, batch {batch}: Compass's own best "
                  f"{own['describe']} ({own['compass']['iteration_s']:.3f} s, launched "
                  f"{own['launch']['iteration_s']:.3f} s); best launch {launch['describe']} "
                  f"({launch['launch']['iteration_s']:.3f} s)")
    print(f"{ran} searches ({failed} more failed): in {moved} the best launch is another layout "
          f"than Compass's own best")
    return 0


if __name__ == "__main__":
    sys.exit(main())
