#!/usr/bin/env bash
# Hostile input against the compass binary, as a new user (or an attacker) would try it: closed
# and full standard streams, integer and time flags that overflow or are empty, inputs far
# beyond any machine, FIFOs and devices where a file is expected, commands whose later output
# fails. Every case runs in a fresh directory with a time limit and is classed:
#   ok         bad input: exit 2 and one line "compass: error: ..." on stderr (or a quiet exit 2
#              when stderr itself is gone) and no output file left; good input: exit 0
#   hang       still running after the limit
#   crash      ended by a signal (134 is an abort)
#   exit0      exit 0 on bad input (or on an output that could not be written)
#   other      another exit code, a message that is not one line, or a file left behind
# Prints one line per failing case and the counts; exits 1 when any case is not ok.
# Usage: tools/hostile.sh [compass-binary]   (default build/release/compass)
set -uo pipefail
cd "$(dirname "$0")/.."
src="$PWD"
compass="${1:-build/release/compass}"
[ -x "$compass" ] || { echo "hostile: no compass binary at '$compass'" >&2; exit 2; }
compass="$(cd "$(dirname "$compass")" && pwd)/$(basename "$compass")"
limit_s="${HOSTILE_TIMEOUT_S:-30}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

declare -A count=([ok]=0 [hang]=0 [crash]=0 [exit0]=0 [other]=0)
total=0

# The inputs the cases read.
inputs="$work/inputs"
mkdir -p "$inputs"
mkfifo "$inputs/fifo"
python3 - "$inputs" <<'EOF'
import sys
d = sys.argv[1]
def matrix(n):
    head = "\t" + "".join(f"GPU{i}\t" for i in range(n)) + "CPU Affinity\tNUMA Affinity\n"
    rows = "".join(f"GPU{i}" + "".join("\t X " if i == j else "\tNODE" for j in range(n)) + "\t0-63\t0\n"
                   for i in range(n))
    return head + rows
open(f"{d}/gpus1000.txt", "w").write(matrix(1000))
open(f"{d}/gpus65.txt", "w").write(matrix(65))
log = open("tests/data/nccl/all_reduce_8xh20.log").read()
def put(name, a, b):
    assert a in log, a
    open(f"{d}/{name}", "w").write(log.replace(a, b, 1))
put("busbw.log", "   3.07       0    17.95", "  1e300       0    17.95")
put("size.log", "       32768          8192", "100000000000000000000000          8192")
put("nan.log", "   3.07       0    17.95", "    nan       0    17.95")
put("zero.log", "       32768          8192", "           0          8192")
# JSON a user might write by hand: a key twice, a misspelt field, a number past a double.
model = '"hidden": 64, "ffn": 256, "heads": 1, "kv_heads": 1, "vocab": 8'
open(f"{d}/model-dup.json", "w").write('{"name": "m", %s, "layers": 32, "layers": 2}' % model)
open(f"{d}/cluster-dup.json", "w").write('{"node": "h100x8", "nic": {"gbps": 400, "gbps": 100}}')
open(f"{d}/cluster-typo.json", "w").write('{"node": "h100x8", "nic": {"gbsp": 100}}')
open(f"{d}/cluster-huge.json", "w").write('{"node": "h100x8", "nodes": 1e999}')
open(f"{d}/cluster-frac.json", "w").write('{"node": "h100x8", "nodes": 2.5}')
EOF
log="$src/tests/data/nccl/all_reduce_8xh20.log"
topo="$src/tests/data/topo/nvlink_pairs_4x3090.txt"

# check KIND STREAMS ARGS...: KIND bad|good; STREAMS none|out_full|out_closed|err_full|err_closed.
check() {
  local kind="$1" streams="$2"
  shift 2
  local dir="$work/case$total"
  mkdir -p "$dir"
  total=$((total + 1))
  local rc
  (
    cd "$dir" || exit 99
    case "$streams" in
      none) timeout -k 5 "$limit_s" "$compass" "$@" >"$work/out" 2>"$work/err" ;;
      out_full) timeout -k 5 "$limit_s" "$compass" "$@" >/dev/full 2>"$work/err" ;;
      out_closed) timeout -k 5 "$limit_s" "$compass" "$@" >&- 2>"$work/err" ;;
      err_full) : >"$work/err"; timeout -k 5 "$limit_s" "$compass" "$@" >"$work/out" 2>/dev/full ;;
      err_closed) : >"$work/err"; timeout -k 5 "$limit_s" "$compass" "$@" >"$work/out" 2>&- ;;
    esac
  )
  rc=$?
  local class=ok why=""
  local lines
  lines=$(wc -l <"$work/err")
  local left
  left=$(ls -A "$dir")
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    class=hang
  elif [ "$rc" -ge 128 ]; then
    class=crash why="exit $rc"
  elif [ "$kind" = good ]; then
    [ "$rc" -eq 0 ] || { class=other why="exit $rc: $(head -c 200 "$work/err")"; }
  elif [ "$rc" -eq 0 ]; then
    class=exit0
  elif [ "$rc" -ne 2 ]; then
    class=other why="exit $rc"
  elif [[ "$streams" != err_* ]] && { [ "$lines" -ne 1 ] || ! grep -q '^compass: error: ' "$work/err"; }; then
    class=other why="stderr: $(head -c 200 "$work/err")"
  elif [ -n "$left" ]; then
    class=other why="left behind: $(echo $left)"
  fi
  count[$class]=$((count[$class] + 1))
  [ "$class" = ok ] || printf 'hostile: %-6s %s [%s] %s\n' "$class" "$*" "$streams" "$why"
}

# 1. Closed and full standard streams, on commands that print.
printing=(
  "list presets"
  "list models --json"
  "topo a6000x8"
  "schedule --op ag_gemm --m 64 --n 32 --k 16 --tp 2 --strategy sequential"
  "op --op gemm_rs --m 8192 --n 5120 --k 13824 --tp 8"
  "plan"
  "plan --json"
  "sweep --limit 2 --progress none"
  "profile dump a6000x8"
  "profile diff a6000x8 a6000x8"
  "discover --from-topo $topo"
  "calibrate --from-nccl-tests $log --profile h100x8"
  "run --op ag_gemm --m 64 --n 32 --k 16 --tp 2 --strategy sequential --repeat 1 --warmup 0"
  "export te --json"
  "export te --cluster dgx-h100 --model llama2-7b --tp 8"
  "search --model llama2-7b --gpus 16 --global-batch 32 --top 1"
  "--help"
  "--version"
)
for c in "${printing[@]}"; do
  read -ra args <<<"$c"
  check good none "${args[@]}"
  check bad out_full "${args[@]}"
  check bad out_closed "${args[@]}"
done
# Errors (and progress) with stderr gone: a quiet exit 2.
failing=(
  "no-such-verb"
  "topo --tp 0"
  "plan --model missing.json"
  "op --op ag_gemm --m 1 --n 1 --k 1 --tp 3 --gpus 9"
  "sweep --limit 2 --progress lines"
  "sweep --limit 1 --csv /dev/full"
)
for c in "${failing[@]}"; do
  read -ra args <<<"$c"
  check bad err_full "${args[@]}"
  check bad err_closed "${args[@]}"
done

# 2. Integer and time flags.
run=(run --op ag_gemm --m 64 --n 32 --k 16 --tp 2 --strategy sequential)
op=(op --op gemm_rs --n 5120 --k 13824 --tp 8)
for v in 18446744073709551616 9223372036854775808 "" -1 " 5" 1e3 0x10; do
  check bad none "${run[@]}" --seed "$v"
done
for v in 18446744073709551616 "" 0 -8192 1e3 0x10 "64 "; do
  check bad none "${op[@]}" --m "$v"
done
for flag in --repeat --warmup --threads-per-rank; do
  for v in "" -1 4294967297; do check bad none "${run[@]}" "$flag" "$v"; done
done
for flag in --seq --mbs; do
  for v in "" 0 -1 18446744073709551617; do check bad none plan "$flag" "$v"; done
done
for flag in --limit --stride --threads; do
  for v in "" -1 99999999999; do check bad none sweep "$flag" "$v"; done
done
for v in "" 0 -2 4294967298; do check bad none topo --tp "$v"; done
for v in "" -5; do check bad none topo --random "$v" --tp 4; done
check bad none plan --refine sim --refine-candidates ""
check bad none calibrate --backend cuda --device -1 --out x.json
for flag in --launch-timeout --wait-timeout; do
  for v in 1e12 1e400 "" -1 nan inf 5s; do check bad none "${run[@]}" "$flag" "$v"; done
done
check bad none "${run[@]}" --launch-timeout 0

# 3. Limits: GPU count, nccl-tests numbers, non-regular inputs.
check bad none discover --from-topo "$inputs/gpus1000.txt"
check bad none discover --from-topo "$inputs/gpus65.txt"
for l in busbw size nan zero; do check bad none calibrate --from-nccl-tests "$inputs/$l.log"; done
for f in "$inputs/fifo" /dev/zero /dev/null "$inputs"; do
  check bad none plot "$f" --out x.png
  check bad none discover --from-topo "$f"
  check bad none calibrate --from-nccl-tests "$f"
  check bad none plan --model "$f"
  check bad none topo --profile "$f"
done

# 4. The layout search and the export it prints: requests no layout can meet, inputs written by
# hand, and a simulation too large to finish.
search=(search --model llama2-7b --cluster dgx-h100)
for v in "" 0 -1 99999999999999999999 12 1e3; do check bad none "${search[@]}" --gpus "$v"; done
for v in "" 0 2147483648 3x; do check bad none "${search[@]}" --global-batch "$v"; done
for v in 0 9223372036854775807; do check bad none "${search[@]}" --seq "$v"; done
for flag in --tp --pp --vpp --mbs; do
  for v in 0 3 1048577; do check bad none "${search[@]}" --gpus 8 --global-batch 8 "$flag" "$v"; done
done
# 40 layers on PP 4 x VPP 3: neither 40 nor 42 (the embedding and the loss counted) is a multiple of 12.
check bad none search --model llama2-13b --cluster dgx-h100 --gpus 8 --global-batch 8 --pp 4 --vpp 3
check bad none "${search[@]}" --top 0
check bad none "${search[@]}" --sp maybe
check bad none "${search[@]}" --recompute some
check bad none "${search[@]}" --refine sim --sim-scope cluster --gpus 65536 --global-batch 65536
for v in "" te Launch; do check bad none "${search[@]}" --refine sim --sim-under "$v"; done
check bad none "${search[@]}" --sim-under compass
for v in launch te-default; do check bad none "${search[@]}" --refine sim --sim-tp simulated --sim-under "$v"; done
for v in 0 3 1048577 x; do check bad none "${search[@]}" --gpus 16 --global-batch 16 --cp "$v"; done
check bad none "${search[@]}" --max-cp 0
for v in "" -1 x 99999999999; do check bad none "${search[@]}" --threads "$v"; done
check bad none "${search[@]}" --gpus 16 --global-batch 16 --seq 2050 --cp 2
check bad none search --model llama2-7b --cluster a6000x8 --fp8
check bad none search --model "$inputs/model-dup.json"
for c in dup typo huge frac; do check bad none search --cluster "$inputs/cluster-$c.json"; done
for f in "$inputs/fifo" /dev/zero "$inputs" missing.json; do
  check bad none search --cluster "$f"
  check bad none export te --cluster "$f"
done
check bad none export te --cluster dgx-h100 --profile h100x8
check bad none export te --cluster dgx-h100 --tp 16

# 5. Several outputs: a later one failing leaves none of them.
sweep=(sweep --limit 2 --progress none)
check bad none "${sweep[@]}" --csv a.csv --json /dev/full
check bad none "${sweep[@]}" --csv a.csv --json-out /dev/full
check bad none "${sweep[@]}" --json-out a.json --csv /dev/full
check bad none simulate --m 64 --n 32 --k 16 --tp 2 --strategy sequential --trace t.json --json-out /dev/full
check bad none simulate --m 64 --n 32 --k 16 --tp 2 --strategy sequential --json-out j.json --trace /dev/full
check bad none calibrate --from-nccl-tests "$log" --profile h100x8 --out p.json --json-out /dev/full
check bad none export te --out cfg.yaml --json-out /dev/full
check bad none export te --json-out j.json --out /dev/full
check bad none calibrate --from-nccl-tests "$log" --out - --json
check good none calibrate --from-nccl-tests "$log" --profile h100x8 --out -
[ -e "$work/case$((total - 1))/-" ] && { echo "hostile: other  calibrate --out - created a file named '-'"; count[other]=$((count[other] + 1)); count[ok]=$((count[ok] - 1)); }

echo "hostile: $total cases: ${count[ok]} ok, ${count[hang]} hang, ${count[crash]} crash or abort, ${count[exit0]} exit 0 on bad input, ${count[other]} other"
[ "${count[ok]}" -eq "$total" ]
