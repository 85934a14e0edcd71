#!/usr/bin/env python3
"""Predicts every published run of tests/data/public_runs.json with `compass search` (the run's
layout fixed, memory not enforced) and prints source, layout, measured, predicted and error.

    python3 tools/job_validate.py [--compass build/release/compass] [--runs FILE] [--markdown]

Rows whose layout Compass cannot express (a missing micro-batch or interleaving size,
interleaved stages of unequal layers, a GPU without a built-in cluster) are listed with the
reason. Nothing is
fitted to these rows."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

CLUSTERS = {"A100-80GB-SXM": "dgx-a100", "H100-SXM": "dgx-h100"}


def layout_text(r):
    s = f"tp{r['tp']}"
    if (r.get("cp") or 1) > 1:
        s += f" cp{r['cp']}"
    s += f" pp{r['pp']}"
    if r.get("vpp") and r["vpp"] > 1:
        s += f" vpp{r['vpp']}"
    s += f" dp{r['dp']} mbs{r['micro_batch']} gbs{r['global_batch']}"
    if r.get("sequence_parallel"):
        s += " sp"
    if r.get("recompute") and r["recompute"] != "none":
        s += f" rc-{r['recompute']}"
    if r.get("fp8"):
        s += " fp8"
    return s


def skip_reason(r):
    if r["gpu"] not in CLUSTERS:
        return f"no built-in cluster for {r['gpu']}"
    for key in ("tp", "pp", "dp", "micro_batch", "global_batch", "seq"):
        if r.get(key) is None:
            return f"{key} not published"
    for key in ("hidden", "ffn", "heads", "layers", "vocab"):
        if r["model"].get(key) is None:
            return f"model {key} not published"
    if r["tp"] * (r.get("cp") or 1) * r["pp"] * r["dp"] != r["gpus"]:
        return "tp x cp x pp x dp != gpus"
    return None


def predict(compass, r, tmp):
    m = r["model"]
    model = {"name": m["name"].replace(" ", "_").replace(".", "_"), "hidden": m["hidden"],
             "ffn": m["ffn"], "heads": m["heads"], "kv_heads": m["kv_heads"],
             "layers": m["layers"], "vocab": m["vocab"], "swiglu": m["swiglu"]}
    path = os.path.join(tmp, "model.json")
    with open(path, "w") as f:
        json.dump(model, f)
    cmd = [compass, "search", "--model", path, "--cluster", CLUSTERS[r["gpu"]],
           "--gpus", str(r["gpus"]), "--global-batch", str(r["global_batch"]),
           "--seq", str(r["seq"]), "--tp", str(r["tp"]), "--cp", str(r.get("cp") or 1),
           "--pp", str(r["pp"]),
           "--vpp", str(r.get("vpp") or 1), "--mbs", str(r["micro_batch"]),
           "--sp", "on" if r.get("sequence_parallel") and r["tp"] > 1 else "off",
           "--recompute", r.get("recompute") or "none", "--ignore-memory", "--json", "--top", "1"]
    if r.get("dist_optimizer") is False:
        cmd.append("--no-dist-opt")
    if r.get("fp8"):
        cmd.append("--fp8")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return json.loads(p.stdout)["top"][0], None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compass", default=os.path.join(here, "..", "build", "release", "compass"))
    ap.add_argument("--runs", default=os.path.join(here, "..", "tests", "data", "public_runs.json"))
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    a = ap.parse_args()
    with open(a.runs) as f:
        runs = json.load(f)
    rows, errors, over = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, r in enumerate(runs):
            why = skip_reason(r)
            meas = r["measured"]
            src = r["source"].split(" (")[0]
            name = r["model"]["name"]
            if why:
                rows.append((i + 1, src, name, r["gpus"], "-", "-", "-", "-", "skipped: " + why))
                continue
            cand, err = predict(a.compass, r, tmp)
            if cand is None:
                rows.append((i + 1, src, name, r["gpus"], layout_text(r), "-", "-", "-", "error: " + err))
                continue
            # Megatron-LM's sequential TP (no --tp-comm-overlap) unless the run is a TE/FP8 one.
            cfg = "te-default" if r.get("fp8") else "megatron"
            pred = cand[cfg]
            if meas.get("iteration_s"):
                measured, predicted, unit = meas["iteration_s"], pred["iteration_s"], "s/iter"
            else:
                measured, predicted, unit = meas["tflops_per_gpu"], pred["model_tflops_per_gpu"], "TFLOP/s/GPU"
            err = (predicted - measured) / measured
            errors.append(abs(err))
            over += 0 if pred["memory_fits"] else 1
            note = cfg + ("" if pred["memory_fits"] else
                          f", over memory ({pred['memory_peak_bytes'] / 2**30:.1f} GiB)")
            rows.append((i + 1, src, name, r["gpus"], layout_text(r), f"{measured:.4g} {unit}",
                         f"{predicted:.4g}", f"{err * 100:+.1f}%", note))
    if a.markdown:
        print("| # | source | model | GPUs | layout | measured | predicted | error | note |")
        print("|---|---|---|---|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(str(x) for x in row) + " |")
    else:
        for row in rows:
            print("  ".join(str(x) for x in row))
    if errors:
        errors.sort()
        mape = sum(errors) / len(errors)
        print(f"\n{len(errors)} rows predicted; mean absolute error {mape * 100:.1f}%, "
              f"median {errors[len(errors) // 2] * 100:.1f}%; {over} of them over memory in "
              "the model although they ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
