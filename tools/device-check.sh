#!/usr/bin/env bash
# The device check of the CUDA backend, for a lent GPU machine (CUDA 13 driver and libraries,
# none of our Debian packages, no network). It runs a bundle made here by
# tools/make-device-bundle.sh (carried to the device as an ignored path) and writes under $OUT:
#   device-check.log     everything, step by step
#   results.json         per step: command, exit code, seconds; plus the GPU and library paths
#   test_cuda.json       GoogleTest report of the GPU tests (virtual ranks)
#   runs.json            [{file: run_<op>_<sync>.json, output: `compass run --backend cuda
#                        --strategy all --check --sync <sync> --json`}] (sync: events, flags);
#                        the device tool returns at most 8 files, so the runs travel as one
#   h200.json            the calibrated profile; calibrate.json the raw measurements
# Every step has its own timeout; the whole check stays under 8 minutes.
#
# Usage: tools/device-check.sh [bundle-dir]          (default build-device/bundle; OUT defaults
#        to ./device-out). With the device tool:
#   run(command="tools/device-check.sh", carry=["build-device/bundle"], timeout_s=450)
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=$(cd "${1:-build-device/bundle}" 2>/dev/null && pwd) || { echo "device-check: no bundle at ${1:-build-device/bundle} (run tools/make-device-bundle.sh first)" >&2; exit 2; }
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
LOG="$OUT/device-check.log"
. tools/device-common.sh

C="$BUNDLE/bin/compass"
# DEVICE_CHECK_OPS narrows the runs, DEVICE_CHECK_SKIP ("tests", "calibrate") skips steps:
# for rerunning one part inside the device time left.
OPS=${DEVICE_CHECK_OPS:-ag_gemm gemm_rs gemm_ar}
SKIP=" ${DEVICE_CHECK_SKIP:-} "
[[ "$SKIP" == *" tests "* ]] ||
  step test_cuda 120 "" "$BUNDLE/bin/test_cuda" --gtest_output=json:"$OUT/test_cuda.json"
for op in $OPS; do
  # gemm_ar's --check compares p full M x N outputs on the host: give it longer.
  limit=30; [ "$op" = gemm_ar ] && limit=90
  for sync in events flags; do
    step "run_${op}_$sync" $limit "$OUT/run_${op}_$sync.json" "$C" run --backend cuda --op "$op" \
      --m 8192 --n 8192 --k 8192 --tp 8 --dtype bf16 --strategy all --check --repeat 5 \
      --sync "$sync" --json
  done
done
[[ "$SKIP" == *" calibrate "* ]] ||
  step calibrate 100 "$OUT/calibrate.json" "$C" calibrate --backend cuda --profile h200x1 \
  --out "$OUT/h200.json" --force --json

# The device tool brings back at most 8 files: the runs go back as one JSON array.
RUNS=("$OUT"/run_*.json)
{
  echo "["
  first=1
  for f in "${RUNS[@]}"; do
    [ -s "$f" ] || continue
    [ $first -eq 1 ] || echo ","
    first=0
    echo "{\"file\": \"$(basename "$f")\", \"output\":"
    json_or_null "$f"
    echo "}"
  done
  echo "]"
} > "$OUT/runs.json"
rm -f "${RUNS[@]}"

write_results "$OUT/results.json" "  \"bundle\": \"$BUNDLE\",
  \"ld_library_path\": \"$LD_LIBRARY_PATH\","
# Exit 0 only when every step passed.
steps_status
