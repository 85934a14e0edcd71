#!/usr/bin/env python3
"""Checks `compass export te` the way Megatron-LM and TransformerEngine consume it.

The configuration is loaded with yaml.safe_load (as Megatron-LM does for --tp-comm-overlap-cfg)
and the launch script is sourced by bash in a scratch directory; the rules below are written
from reading TE's userbuffers initialisation and Megatron-LM's launch code, independently of the
C++ validator (docs/te-export.md, "Rules"):

- names and methods: all-gather layers run ring_exchange; forward reduce-scatter layers pipeline
  or ring_exchange; *_wgrad only bulk and only beside a bulk *_dgrad; a non-bulk *_dgrad needs
  --tp-comm-overlap-rs-dgrad, which covers both column-parallel layers;
- keys: each entry carries only the keys TE reads for its method;
- atomic GEMM: FP8 only, never bulk, delayed scaling, and the all-gather / reduce-scatter sides
  of a block (forward and backward) run atomic ring exchange together or not at all;
- --first-last-layers-bf16: TE builds a second, non-FP8 set of communicators from the same
  dictionary, so no entry may be atomic and *_dgrad must stay bulk;
- fp8_buf only on a pipeline reduce-scatter layer of an FP8 run;
- launch: UB_SKIPMC=1 unless every listed GPU is Hopper-class or newer on an NVSwitch; no
  export where GPUs lack peer access; CUDA_VISIBLE_DEVICES lists every TP group of the node;
  the configuration path is absolute; nothing in the script executes when sourced.

Every combination of the presets a6000x8, a6000x4, rtx4090x8 and h100x8, four models, TP 2/4/8,
{BF16, --fp8, --fp8 --atomic-gemm}, with and without --first-last-layers-bf16, must either
pass these rules or be refused in one line (exit 2).

Usage: te_export_check.py <path to the compass binary>
"""
import concurrent.futures
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
COMMON_KEYS = {"method", "num_sm", "cga_size", "set_sm_margin"}
PAIRS = (("qkv_fprop", "proj_fprop"), ("fc1_fprop", "fc2_fprop"),
         ("proj_dgrad", "qkv_dgrad"), ("fc2_dgrad", "fc1_dgrad"))
PRESETS = ("a6000x8", "a6000x4", "rtx4090x8", "h100x8")
MODELS = ("llama2-7b", "llama2-13b", "llama2-70b", "gpt3-13b")
VARIANTS = ((), ("--fp8",), ("--fp8", "--atomic-gemm"))


def run(cli, *args, cwd=None):
    return subprocess.run([cli, *args], capture_output=True, text=True, check=False, cwd=cwd)


def keys_read(name, method, fp8):
    """The keys TE reads for an entry (others it ignores)."""
    keys = set(COMMON_KEYS)
    if method == "ring_exchange":
        keys |= {"atomic_gemm", "use_ce"}
        if name in AG:
            keys.add("aggregate")
    elif method == "pipeline":
        keys |= {"num_splits", "atomic_gemm"}
        if fp8:
            keys.add("fp8_buf")
    return keys


def multicast(machine):
    """Every GPU is sm_90 or newer and linked to an NVSwitch node."""
    arch = {d["name"]: d["arch"] for d in machine["devices"]}
    kinds = {n["name"]: n["kind"] for n in machine["nodes"]}
    gpus = [n for n in machine["nodes"] if n["kind"] == "gpu"]
    for g in gpus:
        a = arch[g["device"]]
        if not a.startswith("sm_") or int(a[3:5]) < 90:
            return False
        ends = [l["b"] if l["a"] == g["name"] else l["a"] for l in machine["links"]
                if g["name"] in (l["a"], l["b"])]
        if not any(kinds.get(e) == "nvswitch" for e in ends):
            return False
    return True


def source_launch(path, cwd):
    """Sources the launch script in bash; returns (env, args)."""
    script = ('source "$1" || exit 3; '
              'for v in CUDA_DEVICE_MAX_CONNECTIONS CUDA_VISIBLE_DEVICES UB_SKIPMC; do '
              'printf "%s=%s\\0" "$v" "${!v-__unset__}"; done; printf "ARGS\\0"; '
              'printf "%s\\0" "${MEGATRON_TP_ARGS[@]}"')
    r = subprocess.run(["bash", "-c", script, "_", path], capture_output=True, text=True,
                       cwd=cwd, check=False)
    if r.returncode != 0:
        return None, None
    parts = r.stdout.split("\0")[:-1]
    i = parts.index("ARGS")
    env = dict(p.split("=", 1) for p in parts[:i])
    env = {k: v for k, v in env.items() if v != "__unset__"}
    return env, parts[i + 1:]


class Checker:
    def __init__(self, cli):
        self.cli = cli
        self.failures = []
        self.machines = {}
        self.refusals = {}

    def check(self, cond, what):
        if not cond:
            self.failures.append(what)

    def machine(self, preset):
        if preset not in self.machines:
            self.machines[preset] = json.loads(run(self.cli, "topo", preset, "--json").stdout)
        return self.machines[preset]

    def check_refusal(self, where, r):
        err = r.stderr.strip("\n")
        self.check(r.returncode == 2, f"{where}: refused with exit {r.returncode}")
        self.check(err.count("\n") == 0 and err.startswith("compass: error: "),
                   f"{where}: refusal is not one line: {err!r}")
        self.check(r.stdout == "", f"{where}: refusal wrote to stdout")

    def check_export(self, preset, model, tp, extra=(), seq=4096):
        """Returns 'ok', 'refused' or 'failed'."""
        where = f"{preset} {model} tp {tp} {' '.join(extra)}".strip()
        n0 = len(self.failures)
        with tempfile.TemporaryDirectory() as d:
            r = run(self.cli, "export", "te", "--profile", preset, "--model", model, "--tp",
                    str(tp), "--seq", str(seq), "--out", d + "/", *extra)
            if r.returncode != 0:
                self.check_refusal(where, r)
                self.refusals.setdefault(r.stderr.strip()[:90], []).append(where)
                return "refused" if len(self.failures) == n0 else "failed"
            cfg_path = os.path.join(d, "tp_comm_overlap.yaml")
            with open(cfg_path) as f:
                cfg = yaml.safe_load(f)
            env, args = source_launch(os.path.join(d, "launch.sh"), d)
            if env is None:
                self.failures.append(f"{where}: launch.sh does not source")
                return "failed"
            self.check_rules(where, preset, tp, cfg, env, args, seq)
            self.check(args[args.index("--tp-comm-overlap-cfg") + 1] == cfg_path,
                       f"{where}: config path in the launch is not {cfg_path}")
        return "ok" if len(self.failures) == n0 else "failed"

    def check_rules(self, where, preset, tp, cfg, env, args, seq):
        machine = self.machine(preset)
        check = self.check
        rs_dgrad = "--tp-comm-overlap-rs-dgrad" in args
        fp8 = "--fp8-format" in args
        bf16_edges = "--first-last-layers-bf16" in args
        delayed = "--fp8-recipe" in args and args[args.index("--fp8-recipe") + 1] == "delayed"
        rows = seq // tp
        # Launch settings.
        check(env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1", f"{where}: CUDA_DEVICE_MAX_CONNECTIONS")
        check((env.get("UB_SKIPMC") == "1") == (not multicast(machine)),
              f"{where}: UB_SKIPMC={env.get('UB_SKIPMC')} on a machine with multicast "
              f"{multicast(machine)}")
        check(machine["p2p"], f"{where}: exported although the machine has no peer access")
        gpus = sum(1 for n in machine["nodes"] if n["kind"] == "gpu")
        visible = [int(g) for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",")]
        check(len(visible) == (gpus // tp) * tp and len(set(visible)) == len(visible),
              f"{where}: device order {visible} does not cover the {gpus // tp} TP groups")
        for flag in ("--tp-comm-overlap", "--sequence-parallel", "--tp-comm-overlap-cfg"):
            check(flag in args, f"{where}: missing {flag}")
        check(args[args.index("--tensor-model-parallel-size") + 1] == str(tp), f"{where}: tp flag")
        cfg_arg = args[args.index("--tp-comm-overlap-cfg") + 1]
        check(os.path.isabs(cfg_arg), f"{where}: config path {cfg_arg} is not absolute")
        # Entries.
        check(isinstance(cfg, dict), f"{where}: configuration is not a mapping")
        known = AG | RS_FPROP | DGRAD | WGRAD
        check(set(cfg) <= known, f"{where}: unknown entries {set(cfg) - known}")
        check(AG | RS_FPROP | DGRAD <= set(cfg), f"{where}: missing entries")
        for name, e in cfg.items():
            m = e.get("method")
            check(m in ("ring_exchange", "pipeline", "bulk"), f"{where}: {name} method {m}")
            check(set(e) == keys_read(name, m, fp8),
                  f"{where}: {name} keys {sorted(e)} (TE reads {sorted(keys_read(name, m, fp8))})")
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
                if bf16_edges:
                    check(m == "bulk", f"{where}: {name} {m} with --first-last-layers-bf16 "
                                       "(TE's second, BF16 pass fails on it)")
            if m == "pipeline":
                check(e["num_splits"] >= 1 and rows % e["num_splits"] == 0,
                      f"{where}: {name} pipeline splits {e['num_splits']} vs {rows} rows")
            check(e["cga_size"] in (1, 2, 4, 8) and e["num_sm"] % e["cga_size"] == 0,
                  f"{where}: {name} sm/cga {e['num_sm']}/{e['cga_size']}")
            check(1 <= e["num_sm"] <= 32, f"{where}: {name} num_sm {e['num_sm']} (TE allows 32)")
            if e.get("atomic_gemm"):
                check(fp8, f"{where}: {name} atomic without FP8")
                check(delayed, f"{where}: {name} atomic without delayed FP8 scaling")
                check(not bf16_edges, f"{where}: {name} atomic with --first-last-layers-bf16")
            if e.get("fp8_buf"):
                check(m == "pipeline" and name not in AG | WGRAD, f"{where}: {name} fp8_buf")
            if e.get("aggregate"):
                check(name in AG and tp % 2 == 0, f"{where}: {name} aggregate")
        for ag, rs in PAIRS:
            a = ag in cfg and cfg[ag].get("atomic_gemm") and cfg[ag]["method"] == "ring_exchange"
            b = rs in cfg and cfg[rs].get("atomic_gemm") and cfg[rs]["method"] == "ring_exchange"
            check(bool(a) == bool(b), f"{where}: atomic ring exchange pair {ag}/{rs}")

    def check_stdout_modes(self):
        """--out - is the configuration alone; no --out is the report alone."""
        with tempfile.TemporaryDirectory() as d:
            r = run(self.cli, "export", "te", "--out", "-", cwd=d)
            self.check(r.returncode == 0, f"--out -: exit {r.returncode}: {r.stderr}")
            try:
                cfg = yaml.safe_load(r.stdout)
            except yaml.YAMLError:
                cfg = None
            self.check(isinstance(cfg, dict) and "qkv_fprop" in cfg, "--out -: stdout is not the YAML")
            self.check(os.listdir(d) == [], f"--out - wrote files: {os.listdir(d)}")
            r2 = run(self.cli, "export", "te", "--out", d + "/")
            with open(os.path.join(d, "tp_comm_overlap.yaml")) as f:
                self.check(yaml.safe_load(f) == cfg, "--out - differs from the written file")
            r = run(self.cli, "export", "te", cwd=d)
            self.check(r.returncode == 0, f"no --out: exit {r.returncode}")
            self.check(not any(l.startswith("qkv_fprop:") for l in r.stdout.splitlines()),
                       "no --out: the report and the YAML are mixed on stdout")

    def check_hostile_path(self):
        """A configuration path full of shell syntax runs nothing when the script is sourced."""
        for name in ("x$(touch PWNED).yaml", "x`touch PWNED`$(touch PWNED)'q\"; touch PWNED.yaml"):
            with tempfile.TemporaryDirectory() as d:
                r = run(self.cli, "export", "te", "--out", name, cwd=d)
                self.check(r.returncode == 0, f"hostile path {name!r}: exit {r.returncode}: {r.stderr}")
                launch = [f for f in os.listdir(d) if f.endswith(".launch.sh")]
                self.check(len(launch) == 1, f"hostile path {name!r}: launch scripts {launch}")
                if launch:
                    env, args = source_launch(os.path.join(d, launch[0]), d)
                    self.check(env is not None, f"hostile path {name!r}: launch.sh does not source")
                    if args:
                        cfg = args[args.index("--tp-comm-overlap-cfg") + 1]
                        self.check(cfg in (os.path.join(os.path.realpath(d), name),
                                           os.path.join(d, name)),
                                   f"hostile path {name!r}: the configuration path became {cfg!r}")
                self.check(not os.path.exists(os.path.join(d, "PWNED")),
                           f"hostile path {name!r}: sourcing the launch script ran a command")

def main():
    cli = os.path.abspath(sys.argv[1])
    c = Checker(cli)
    for p in PRESETS:
        c.machine(p)
    jobs = []
    for p in PRESETS:
        for m in MODELS:
            for tp in (2, 4, 8):
                if tp > sum(1 for n in c.machine(p)["nodes"] if n["kind"] == "gpu"):
                    continue
                for v in VARIANTS:
                    for edges in ((), ("--first-last-layers-bf16",)):
                        jobs.append((p, m, tp, v + edges))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(lambda j: c.check_export(j[0], j[1], j[2], j[3]), jobs))
    ok = results.count("ok")
    refused = results.count("refused")
    c.check(len(jobs) == 2 * 3 * 44, f"{len(jobs)} combinations, expected 264")
    # Every combination on a machine with peer access (and an FP8 peak for --fp8) is exported,
    # except BF16 first/last layers without FP8 or with atomic GEMM; the others are refused.
    def expected(job):
        p, _, _, flags = job
        edges = "--first-last-layers-bf16" in flags
        fp8_peak = all("fp8" in d["peak_flops"] for d in c.machine(p)["devices"])
        return (c.machine(p)["p2p"] and (fp8_peak or "--fp8" not in flags) and
                not (edges and ("--fp8" not in flags or "--atomic-gemm" in flags)))
    for job, res in zip(jobs, results):
        c.check((res == "ok") == expected(job) or res == "failed",
                f"{' '.join(map(str, job[:3]))} {' '.join(job[3])}: {res}, expected "
                f"{'an export' if expected(job) else 'a refusal'}")
    c.check_stdout_modes()
    c.check_hostile_path()
    # JSON format loads as YAML too; no overwrite without --force.
    with tempfile.TemporaryDirectory() as d:
        r = run(cli, "export", "te", "--format", "json", "--out", os.path.join(d, "te.json"))
        c.check(r.returncode == 0, f"--format json: {r.stderr}")
        with open(os.path.join(d, "te.json")) as f:
            text = f.read()
        c.check(yaml.safe_load(text) == json.loads(text), "JSON configuration does not load as YAML")
        c.check(os.path.exists(os.path.join(d, "te.launch.sh")), "te.launch.sh not written")
        r = run(cli, "export", "te", "--format", "json", "--out", os.path.join(d, "te.json"))
        c.check(r.returncode == 2 and "--force" in r.stderr, "overwrite without --force")
    for why, where in sorted(c.refusals.items()):
        print(f"refused {len(where)}x: {why}  (e.g. {where[0]})")
    for f in c.failures:
        print("FAIL:", f)
    print(f"{len(jobs)} combinations: {ok} exported and checked, {refused} refused in one line; "
          f"{len(c.failures)} failures")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
