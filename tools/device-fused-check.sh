#!/usr/bin/env bash
# The device check of the fused CUTLASS kernels, for a lent GPU machine. Like
# tools/device-check.sh it builds nothing there: it runs the bundle made here by
# tools/make-device-bundle.sh (carried as an ignored path) and writes under $OUT:
#   fused-check.log       everything, step by step
#   fused-results.json    per step: command, exit code, seconds; plus the GPU
#   fused_tests.json      GoogleTest report of the fused-kernel GPU tests (test_cuda
#                         --gtest_filter='Fused*:CudaGpu.*Kernel*': the standalone kernels,
#                         the executor's fused kernel and the default; the timeout test runs
#                         in a child process)
#   bench_fused.json      Google Benchmark: fused AG-GEMM with all flags preset vs cuBLASLt
#                         (sm90 and sm80 kernels; 8192-class and per-rank model shapes)
#   bench_fused_rs.json   the same for the fused GEMM-RS over 8 virtual ranks (eight kernels
#                         and the owners' ordered sums) vs the same eight GEMMs in cuBLASLt, for
#                         the sm90 and the sm80 kernel
#   fused_runs.json       [{file, kernel, strategy, output}]: `compass run --backend cuda
#                         --launch virtual --kernel <fused|chunked> --strategy <s> --check
#                         --json` for ag_gemm, gemm_rs and gemm_ar and every fuse:* strategy
#                         (one file: the device tool returns at most 8). Only the fusions
#                         fuse:all2all, fuse:ring and fuse:double-ring have fused GEMM groups
#                         (AG-GEMM kernels for ag_gemm, GEMM-RS kernels for gemm_rs / gemm_ar):
#                         the tree patterns must be refused with --kernel fused (exit 2, one
#                         line naming the strategy), which the step expects.
# Every step has its own timeout. The runs are 30 steps of a few seconds each; if the whole
# check does not fit in one device call, split it with FUSED_CHECK_SKIP and FUSED_CHECK_OPS.
#
# Usage: tools/device-fused-check.sh [bundle-dir]   (default build-device/bundle; OUT defaults
#        to ./device-out). With the device tool:
#   run(command="tools/device-fused-check.sh", carry=["build-device/bundle"], timeout_s=570)
# FUSED_CHECK_SKIP="tests bench bench_rs runs" skips steps (to rerun one part in the time left);
# FUSED_CHECK_OPS (default "ag_gemm gemm_rs gemm_ar") picks the operators of the runs;
# FUSED_CHECK_TESTS (default 'Fused*:CudaGpu.*Kernel*') the GoogleTest filter of the tests.
# The GEMM-RS part alone (sm90 vs sm80 vs cuBLASLt, fused vs chunked in `compass run`):
#   FUSED_CHECK_SKIP=bench FUSED_CHECK_OPS="gemm_rs gemm_ar" \
#   FUSED_CHECK_TESTS='FusedGpu*GemmRs*:CudaGpu.*Rs*' tools/device-fused-check.sh
# DEVICE_DRY_RUN=1 logs the steps
# without running anything (tools/device-common.sh), e.g. to check this script off the device:
#   DEVICE_DRY_RUN=1 OUT=/tmp/fused-dry tools/device-fused-check.sh build/release
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
  step fused_tests 150 "" "$BUNDLE/bin/test_cuda" --gtest_filter="${FUSED_CHECK_TESTS:-Fused*:CudaGpu.*Kernel*}" --gtest_output=json:"$OUT/fused_tests.json"
[[ "$SKIP" == *" bench "* ]] ||
  step bench_fused 120 "$OUT/bench_fused.json" "$BUNDLE/bin/bench_fused" --benchmark_filter='^ag/' --benchmark_format=json
[[ "$SKIP" == *" bench_rs "* ]] ||
  step bench_fused_rs 120 "$OUT/bench_fused_rs.json" "$BUNDLE/bin/bench_fused" --benchmark_filter='^rs/' --benchmark_format=json

# Fused vs chunked inside `compass run`, virtual ranks on this one GPU, checked against cuBLAS.
STRATEGIES="fuse:all2all fuse:ring fuse:double-ring fuse:hier fuse:synth"
has_groups() { case "$2" in fuse:all2all|fuse:ring|fuse:double-ring) return 0 ;; esac; return 1; }
RUN_FILES=()
if [[ "$SKIP" != *" runs "* ]]; then
  for op in ${FUSED_CHECK_OPS:-ag_gemm gemm_rs gemm_ar}; do
    for strategy in $STRATEGIES; do
      for kernel in fused chunked; do
        want=0
        [ "$kernel" = fused ] && ! has_groups "$op" "$strategy" && want=2
        file="$OUT/run_${op}_${strategy#fuse:}_$kernel.json"
        RUN_FILES+=("$file|$op|$strategy|$kernel")
        EXPECT_RC=$want step "run_${op}_${strategy#fuse:}_$kernel" 25 "$file" "$C" run --backend cuda \
          --launch virtual --kernel "$kernel" --op "$op" --m 4096 --n 4096 --k 4096 --tp 8 \
          --dtype bf16 --strategy "$strategy" --check --repeat 3 --json
      done
    done
  done
fi
{
  echo "["
  first=1
  for entry in "${RUN_FILES[@]}"; do
    IFS='|' read -r f op strategy kernel <<<"$entry"
    [ $first -eq 1 ] || echo ","
    first=0
    echo "{\"file\": \"$(basename "$f")\", \"op\": \"$op\", \"strategy\": \"$strategy\", \"kernel\": \"$kernel\", \"output\":"
    json_or_null "$f"
    echo "}"
  done
  echo "]"
} > "$OUT/fused_runs.json"
for entry in "${RUN_FILES[@]}"; do rm -f "${entry%%|*}"; done

write_results "$OUT/fused-results.json"
steps_status
