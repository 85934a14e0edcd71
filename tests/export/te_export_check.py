#!/usr/bin/env python3
"""Checks `compass export te` the way Megatron-LM consumes it: the configuration is loaded with
yaml.safe_load (as Megatron-LM does for --tp-comm-overlap-cfg) and the launch script is read as
text; every rule of docs/te-export.md is checked here independently of the C++ validator, for
every preset with at least two GPUs and every built-in model at every TP degree it allows.

Usage: te_export_check.py <path to the compass binary>
"""
import json
import os
import subprocess
import sys
import tempfile

import yaml

AG = {"qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad"}
RS_FPROP = {"proj_fprop", "fc2_fprop"}
DGRAD = {"qkv_dgrad", "fc1_dgrad"}
WGRAD = {"qkv_wgrad", "fc1_wgrad"}
KEYS = {"method", "num_splits", "num_sm", "cga_size", "set_sm_margin", "aggregate",
        "atomic_gemm", "use_ce"}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(cli, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True, check=False)


def check_export(cli, preset, model, tp, seq, extra=()):
    where = f"{preset} {model} tp {tp} {' '.join(extra)}"
    with tempfile.TemporaryDirectory() as d:
        r = run(cli, "export", "te", "--profile", preset, "--model", model, "--tp", str(tp),
                "--seq", str(seq), "--out", d + "/", *extra)
        if r.returncode != 0:
            failures.append(f"{where}: exit {r.returncode}: {r.stderr.strip()}")
            return None
        with open(os.path.join(d, "tp_comm_overlap.yaml")) as f:
            cfg = yaml.safe_load(f)
        with open(os.path.join(d, "launch.sh")) as f:
            launch = f.read()
    check(isinstance(cfg, dict), f"{where}: configuration is not a mapping")
    args_line = next(l for l in launch.splitlines() if l.startswith("MEGATRON_TP_ARGS=("))
    args = args_line[len("MEGATRON_TP_ARGS=("):-1].split()
    env = dict(l[len("export "):].split("=", 1) for l in launch.splitlines()
               if l.startswith("export "))
    rs_dgrad = "--tp-comm-overlap-rs-dgrad" in args
    fp8 = "--fp8-format" in args
    rows = seq // tp
    # Launch settings.
    check(env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1", f"{where}: CUDA_DEVICE_MAX_CONNECTIONS")
    visible = [int(g) for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    check(len(visible) == tp and len(set(visible)) == tp, f"{where}: device order {visible}")
    for flag in ("--tp-comm-overlap", "--sequence-parallel", "--tp-comm-overlap-cfg"):
        check(flag in args, f"{where}: missing {flag}")
    check(args[args.index("--tensor-model-parallel-size") + 1] == str(tp), f"{where}: tp flag")
    # Entries.
    known = AG | RS_FPROP | DGRAD | WGRAD
    check(set(cfg) <= known, f"{where}: unknown entries {set(cfg) - known}")
    check(AG | RS_FPROP | DGRAD <= set(cfg), f"{where}: missing entries")
    for name, e in cfg.items():
        check(set(e) == KEYS, f"{where}: {name} keys {sorted(e)}")
        m = e["method"]
        check(m in ("ring_exchange", "pipeline", "bulk"), f"{where}: {name} method {m}")
        if name in AG:
            check(m == "ring_exchange", f"{where}: {name}: {m} on an all-gather layer")
        if name in RS_FPROP:
            check(m != "bulk", f"{where}: {name}: bulk on a reduce-scatter layer")
        if name in WGRAD:
            check(m == "bulk", f"{where}: {name}: wgrad must be bulk")
            check(cfg[name.replace("wgrad", "dgrad")]["method"] == "bulk",
                  f"{where}: {name} present although its dgrad is not bulk")
        if name in DGRAD:
            check((m != "bulk") == rs_dgrad, f"{where}: {name} {m} vs rs-dgrad flag {rs_dgrad}")
            if m != "bulk":
                check(name.replace("dgrad", "wgrad") not in cfg, f"{where}: wgrad beside {name}")
        if m == "ring_exchange":
            check(e["num_splits"] == tp, f"{where}: {name} ring_exchange splits {e['num_splits']}")
        if m == "pipeline":
            check(e["num_splits"] >= 1 and rows % e["num_splits"] == 0,
                  f"{where}: {name} pipeline splits {e['num_splits']} vs {rows} rows")
        check(e["cga_size"] in (1, 2, 4, 8) and e["num_sm"] % e["cga_size"] == 0,
              f"{where}: {name} sm/cga {e['num_sm']}/{e['cga_size']}")
        if e["atomic_gemm"]:
            check(fp8, f"{where}: {name} atomic without FP8")
            check(m != "bulk", f"{where}: {name} atomic bulk")
        if e["aggregate"]:
            check(name in AG and tp % 2 == 0, f"{where}: {name} aggregate")
    for ag, rs in (("qkv_fprop", "proj_fprop"), ("fc1_fprop", "fc2_fprop")):
        a = cfg[ag]["atomic_gemm"] and cfg[ag]["method"] == "ring_exchange"
        b = cfg[rs]["atomic_gemm"] and cfg[rs]["method"] == "ring_exchange"
        check(a == b, f"{where}: atomic ring exchange pair {ag}/{rs}")
    return cfg


def main():
    cli = sys.argv[1]
    presets = json.loads(run(cli, "list", "presets", "--json").stdout)
    models = json.loads(run(cli, "list", "models", "--json").stdout)
    count = 0
    for p in presets:
        gpus = p.get("gpus", p.get("gpu_count"))
        for m in models:
            for tp in (2, 4, 8):
                if tp > gpus or m["heads"] % tp or m.get("kv_heads", m["heads"]) % tp:
                    continue
                if check_export(cli, p["name"], m["name"], tp, 4096) is not None:
                    count += 1
    # FP8 with atomic GEMM on one machine, and the JSON format loads as YAML too.
    check_export(cli, "h100x8", "llama2-70b", 8, 4096, ("--fp8", "--atomic-gemm"))
    with tempfile.TemporaryDirectory() as d:
        r = run(cli, "export", "te", "--format", "json", "--out", os.path.join(d, "te.json"))
        check(r.returncode == 0, f"--format json: {r.stderr}")
        with open(os.path.join(d, "te.json")) as f:
            check(yaml.safe_load(f) == json.load(open(os.path.join(d, "te.json"))),
                  "JSON configuration does not load as YAML")
        check(os.path.exists(os.path.join(d, "te.launch.sh")), "te.launch.sh not written")
        r = run(cli, "export", "te", "--format", "json", "--out", os.path.join(d, "te.json"))
        check(r.returncode == 2 and "--force" in r.stderr, "overwrite without --force")
    check(count > 50, f"only {count} exports checked")
    for f in failures:
        print("FAIL:", f)
    print(f"{count} exports checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
