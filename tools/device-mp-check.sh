#!/usr/bin/env bash
# The one-process-per-GPU check of the CUDA backend, for a lent GPU machine (usually one GPU).
# Like tools/device-check.sh it builds nothing there: it runs the bundle made here by
# tools/make-device-bundle.sh (carried as an ignored path) and writes under $OUT:
#   mp-check.log        everything, step by step (every process's stderr, prefixed)
#   mp-results.json     per step: command, exit code, expected exit code, seconds; the GPU, the
#                       NCCL directory and version used
#   mp_tests.json       GoogleTest report of test_launch_gpu (two processes per case, every
#                       operator x strategy with --check, failure injection, a missing rank)
#   mp_runs.json        [{file, op, strategy, output}]: rank 0's `--json` output of each pair
# Two processes share the one GPU (`--launch env` on loopback, LOCAL_RANK 0 and 1, so both
# use GPU 0 when there is one): every strategy but sequential moves its chunks with CUDA IPC
# copies and flags, which works on one GPU with any NCCL; sequential runs one NCCL collective
# and needs a communicator with two ranks on one GPU, which only NCCL 2.30+ allows, with
# NCCL_MULTI_RANK_GPU_ENABLE=1 (set here). NCCL 2.28 (the CUDA toolkit's) refuses it, so the
# script looks for the newest libnccl.so.2 it can find ($NCCL_DIR first, then pip's nvidia/nccl,
# then the loader's and the toolkit's) and, when none is 2.30+, expects the sequential runs to
# be refused with exit code 2 (the refusal names the ranks sharing the GPU and the NCCL
# version). Timings of two processes on one GPU mean nothing and are never reported.
#
# Usage: tools/device-mp-check.sh [bundle-dir]   (default build-device/bundle; OUT defaults to
#        ./device-out). With the device tool:
#   run(command="tools/device-mp-check.sh", carry=["build-device/bundle"], timeout_s=420)
# MP_CHECK_SKIP="tests runs" skips parts; MP_CHECK_OPS narrows the operators.
# DEVICE_DRY_RUN=1 runs nothing (tools/device-common.sh) and takes the NCCL version from
# DEVICE_NCCL_CODE (default 0, i.e. none found), e.g. to check the script here:
#   DEVICE_DRY_RUN=1 OUT=/tmp/mp-dry tools/device-mp-check.sh build/release
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=$(cd "${1:-build-device/bundle}" 2>/dev/null && pwd) || { echo "device-mp-check: no bundle at ${1:-build-device/bundle} (run tools/make-device-bundle.sh first)" >&2; exit 2; }
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
LOG="$OUT/mp-check.log"
. tools/device-common.sh

C="$BUNDLE/bin/compass"
[ -x "$C" ] || [ -x "$BUNDLE/compass" ] || [ "$DRY_RUN" = 1 ] || { log "no compass in $BUNDLE/bin"; exit 2; }
[ -x "$C" ] || C="$BUNDLE/compass"  # a build directory instead of a bundle
TESTS="$BUNDLE/bin/test_launch_gpu"
[ -x "$TESTS" ] || TESTS="$BUNDLE/tests/test_launch_gpu"
SKIP=" ${MP_CHECK_SKIP:-} "

# NCCL: the newest libnccl.so.2 found; its version from `compass doctor --json`.
nccl_code() {  # DIR -> version code, 0 when none loads
  LD_LIBRARY_PATH="$1:$LD_LIBRARY_PATH" "${RUNNER[@]}" "$C" doctor --json 2>/dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin).get("nccl_version") or "0.0.0"
a, b, c = (int(x) for x in v.split("."))
print(a * 10000 + b * 100 + c)' 2>/dev/null || echo 0
}
NCCL_DIR_USED=""
NCCL_CODE=0
if [ "$DRY_RUN" = 1 ]; then
  NCCL_CODE=${DEVICE_NCCL_CODE:-0}
  log "dry run: NCCL version code $NCCL_CODE assumed"
else
  CANDIDATES=()
  [ -n "${NCCL_DIR:-}" ] && CANDIDATES+=("$NCCL_DIR")
  while IFS= read -r d; do CANDIDATES+=("$d"); done < <(python3 - <<'PY' 2>/dev/null
import glob, os, site
for r in site.getsitepackages() + [site.getusersitepackages()]:
    for p in glob.glob(os.path.join(r, "nvidia", "nccl", "lib", "libnccl.so.2")):
        print(os.path.dirname(p))
PY
)
  d=$(find_lib_dir libnccl.so.2) && [ -n "$d" ] && CANDIDATES+=("$d")
  for d in "${CANDIDATES[@]}"; do
    code=$(nccl_code "$d")
    log "libnccl.so.2 in $d: version code $code"
    if [ "$code" -gt "$NCCL_CODE" ]; then NCCL_CODE=$code; NCCL_DIR_USED=$d; fi
  done
  [ -n "$NCCL_DIR_USED" ] && export LD_LIBRARY_PATH="$NCCL_DIR_USED:$LD_LIBRARY_PATH"
fi
export NCCL_MULTI_RANK_GPU_ENABLE=1
SEQ_RC=0
if [ "$NCCL_CODE" -lt 23000 ]; then
  SEQ_RC=2
  log "no NCCL 2.30+ found (best code $NCCL_CODE): the sequential runs must be refused (exit 2)"
fi
step doctor 30 "" "$C" doctor

# The pairs go through tools/device-mp-run.sh, which puts the loader in front of compass itself.
MP_RUNNER="${RUNNER[*]}"
export MP_RUNNER
SAVED_RUNNER=("${RUNNER[@]}")
RUNNER=()
if [[ "$SKIP" != *" tests "* ]]; then
  RUNNER=("${SAVED_RUNNER[@]}")
  export COMPASS_CLI="$C"
  step test_launch_gpu 300 "" "$TESTS" --gtest_output=json:"$OUT/mp_tests.json"
  RUNNER=()
fi

RUN_FILES=()
STRATEGIES="sequential decompose:2 fuse:all2all fuse:ring fuse:double-ring fuse:hier fuse:synth"
if [[ "$SKIP" != *" runs "* ]]; then
  for op in ${MP_CHECK_OPS:-ag_gemm gemm_rs gemm_ar}; do
    for strategy in $STRATEGIES; do
      want=0
      [ "$strategy" = sequential ] && want=$SEQ_RC
      name="${op}_${strategy//[:-]/_}"
      file="$OUT/mp_${name}.json"
      RUN_FILES+=("$file|$op|$strategy")
      EXPECT_RC=$want step "run_$name" 130 "" tools/device-mp-run.sh "$C" 2 "$file" \
        "$OUT/mp_${name}.err" -- --op "$op" --m 4096 --n 4096 --k 4096 --tp 2 --dtype bf16 \
        --strategy "$strategy" --check --repeat 3 --json --launch-timeout 60
      cat "$OUT/mp_${name}.err" >>"$LOG" 2>/dev/null
      rm -f "$OUT/mp_${name}.err"
    done
  done
fi
RUNNER=("${SAVED_RUNNER[@]}")

# The device tool brings back at most 8 files: the runs go back as one JSON array.
{
  echo "["
  first=1
  for entry in "${RUN_FILES[@]}"; do
    IFS='|' read -r f op strategy <<<"$entry"
    [ $first -eq 1 ] || echo ","
    first=0
    echo "{\"file\": \"$(basename "$f")\", \"op\": \"$op\", \"strategy\": \"$strategy\", \"output\":"
    json_or_null "$f"
    echo "}"
  done
  echo "]"
} > "$OUT/mp_runs.json"
for entry in "${RUN_FILES[@]}"; do rm -f "${entry%%|*}"; done

write_results "$OUT/mp-results.json" "  \"nccl_dir\": \"$NCCL_DIR_USED\",
  \"nccl_version_code\": $NCCL_CODE,
  \"note\": \"two processes on one GPU: times mean nothing\","
steps_status
