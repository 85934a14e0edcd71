#!/usr/bin/env bash
# The device check of the fused CUTLASS kernels, for a lent GPU machine. Like
# tools/device-check.sh it builds nothing there: it runs the bundle made here by
# tools/make-device-bundle.sh (carried as an ignored path) and writes under $OUT:
#   fused-check.log       everything, step by step
#   fused-results.json    per step: command, exit code, seconds; plus the GPU
#   fused_tests.json      GoogleTest report of the fused-kernel GPU tests (test_cuda
#                         --gtest_filter='Fused*'; the timeout test runs in a child process)
#   bench_fused.json      Google Benchmark: fused AG-GEMM with all flags preset vs cuBLASLt
#                         (sm90 and sm80 kernels; 8192-class and per-rank model shapes) and the
#                         fused GEMM-RS over 8 virtual ranks vs the same GEMMs in cuBLASLt
# Every step has its own timeout; the whole check stays under 4 minutes.
#
# Usage: tools/device-fused-check.sh [bundle-dir]   (default build-device/bundle; OUT defaults
#        to ./device-out). With the device tool:
#   run(command="tools/device-fused-check.sh", carry=["build-device/bundle"], timeout_s=330)
# FUSED_CHECK_SKIP="tests bench" skips steps (to rerun one part in the time left).
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=$(cd "${1:-build-device/bundle}" 2>/dev/null && pwd) || { echo "device-fused-check: no bundle at ${1:-build-device/bundle} (run tools/make-device-bundle.sh first)" >&2; exit 2; }
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
LOG="$OUT/fused-check.log"
. tools/device-common.sh

C="$BUNDLE/bin/compass"
SKIP=" ${FUSED_CHECK_SKIP:-} "

[[ "$SKIP" == *" tests "* ]] ||
  step fused_tests 100 "" "$BUNDLE/bin/test_cuda" --gtest_filter='Fused*' --gtest_output=json:"$OUT/fused_tests.json"
[[ "$SKIP" == *" bench "* ]] ||
  step bench_fused 120 "$OUT/bench_fused.json" "$BUNDLE/bin/bench_fused" --benchmark_format=json
write_results "$OUT/fused-results.json"
steps_status
