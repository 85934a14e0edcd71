#!/usr/bin/env bash
# Captures the outputs of the planning and topology verbs on every preset, so a refactor can
# show that they did not change.
#   tools/diff-outputs.sh capture <compass-binary> <dir>   writes one file per command into dir
#   tools/diff-outputs.sh diff <dir-a> <dir-b>             diffs two captures (exit 1 on a difference)
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
    ;;
  diff)
    diff -r "$2" "$3" && echo "identical: $(ls "$2" | wc -l) files"
    ;;
  *) echo "usage: $0 capture <bin> <dir> | diff <a> <b>" >&2; exit 2;;
esac
