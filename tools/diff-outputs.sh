#!/usr/bin/env bash
# Captures the outputs of the planning and topology verbs on every preset and of the whole-job
# search on every built-in cluster, so a refactor can show that they did not change.
#   tools/diff-outputs.sh capture <compass-binary> <dir>   writes one file per command into dir
#   tools/diff-outputs.sh diff <dir-a> <dir-b>             diffs two captures (exit 1 on a difference)
#   tools/diff-outputs.sh numbers <dir-a> <dir-b>          compares the sweeps' JSON number by number:
#     per preset, how many numbers differ and the largest relative difference (exit 1 when a
#     non-number differs, such as a choice)
set -u
mode=${1:-}
case "$mode" in
  capture)
    bin=$2; out=$3
    mkdir -p "$out"
    run() { # name, args...
      local name=$1; shift
      "$bin" "$@" >"$out/$name.out" 2>"$out/$name.err"
      echo $? >"$out/$name.rc"
    }
    presets=$("$bin" list presets --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(p["name"] for p in (d["presets"] if isinstance(d,dict) else d)))')
    for p in $presets; do
      run "sweep_$p" sweep --profile "$p"
      tmp=$(mktemp -d)
      "$bin" sweep --profile "$p" --csv "$tmp/s.csv" --json "$tmp/s.json" >"$out/sweep_files_$p.out" 2>&1
      cp "$tmp/s.csv" "$out/sweep_$p.csv" 2>/dev/null; cp "$tmp/s.json" "$out/sweep_$p.json" 2>/dev/null
      rm -rf "$tmp"
      run "plan_$p" plan --profile "$p"
      run "plan_json_$p" plan --profile "$p" --json
      for tp in 2 4 8; do
        run "plan_tp${tp}_$p" plan --profile "$p" --tp $tp
        run "plan_nosp_tp${tp}_$p" plan --profile "$p" --tp $tp --no-sp --model gpt3-175b
      done
      run "topo_$p" topo "$p"
      run "topo_json_$p" topo "$p" --json
      for op in ag_gemm gemm_rs gemm_ar; do
        for tp in 2 4 8; do
          run "op_${op}_tp${tp}_$p" op --profile "$p" --op $op --m 8192 --n 20480 --k 5120 --tp $tp
          run "op_json_${op}_tp${tp}_$p" op --profile "$p" --op $op --m 4096 --n 5120 --k 13824 --tp $tp --json
        done
      done
    done
    # The whole-job search on every built-in cluster (text and JSON), and its knobs.
    for c in dgx-a100 dgx-h100 a6000x8-2nic gb200-nvl72; do
      run "search_$c" search --model llama2-13b --cluster "$c" --gpus 32 --global-batch 128 --top 3
      run "search_json_$c" search --model llama3-70b --cluster "$c" --gpus 64 --global-batch 512 --json
    done
    run search_fixed search --model llama2-7b --gpus 16 --global-batch 64 --tp 2 --pp 2 --mbs 2 \
      --sp on --recompute full --no-dp-overlap
    run search_over search --model llama2-70b --gpus 8 --global-batch 8 --ignore-memory --top 5
    run search_fp8 search --model llama3-70b --gpus 128 --global-batch 1024 --fp8 --max-vpp 8 --json
    ;;
  diff)
    diff -r "$2" "$3" && echo "identical: $(ls "$2" | wc -l) files"
    ;;
  numbers)
    python3 - "$2" "$3" <<'PY'
import glob, json, os, sys
a_dir, b_dir = sys.argv[1], sys.argv[2]
other = 0
def walk(a, b, path, diffs):
    global other
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for k in a:
            walk(a[k], b[k], f"{path}.{k}", diffs)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]", diffs)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if a != b:
            diffs.append((abs(a - b) / max(abs(a), abs(b)), path))
    elif a != b:
        other += 1
        print(f"  differs: {path}: {a!r} -> {b!r}")
for fa in sorted(glob.glob(os.path.join(a_dir, "sweep_*.json"))):
    name = os.path.basename(fa)
    fb = os.path.join(b_dir, name)
    if not os.path.exists(fb):
        print(f"{name}: missing in {b_dir}")
        other += 1
        continue
    diffs = []
    walk(json.load(open(fa)), json.load(open(fb)), "", diffs)
    worst = max(diffs, default=(0.0, "-"))
    print(f"{name}: {len(diffs)} numbers differ, largest relative difference {worst[0]:.2g} ({worst[1]})")
sys.exit(1 if other else 0)
PY
    ;;
  *) echo "usage: $0 capture <bin> <dir> | diff <a> <b> | numbers <a> <b>" >&2; exit 2;;
esac
