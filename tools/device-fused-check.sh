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
: > "$LOG"
START=$(date +%s)
STEPS=()
log() { echo "[$(($(date +%s) - START))s] $*" | tee -a "$LOG" >&2; }

# The library search of tools/device-check.sh (loader cache, CUDA toolkit, pip wheels).
find_lib_dir() {
  local lib=$1 hit
  hit=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
  if [ -z "$hit" ]; then
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 /usr/lib/x86_64-linux-gnu /usr/local/nvidia/lib64; do
      [ -e "$d/$lib" ] && { hit="$d/$lib"; break; }
    done
  fi
  [ -z "$hit" ] && hit=$(timeout 30 find / -xdev -name "$lib" -not -path '/proc/*' 2>/dev/null | head -1)
  [ -n "$hit" ] && dirname "$hit"
}
LIBDIRS="$BUNDLE/lib"
for lib in libcublasLt.so.13 libcuda.so.1; do
  d=$(find_lib_dir "$lib")
  if [ -n "$d" ]; then log "found $lib in $d"; LIBDIRS="$LIBDIRS:$d"; else log "WARNING: $lib not found"; fi
done
export LD_LIBRARY_PATH="$LIBDIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
RUNNER=()
if ! "$BUNDLE/bin/compass" --version >>"$LOG" 2>&1 && [ -x "$BUNDLE/glibc/ld-linux-x86-64.so.2" ]; then
  RUNNER=("$BUNDLE/glibc/ld-linux-x86-64.so.2" --library-path "$BUNDLE/glibc:$LD_LIBRARY_PATH")
  log "direct start failed; using the bundled glibc loader"
fi

step() {
  local name=$1 limit=$2 out=$3
  shift 3
  log "step $name: $* (timeout ${limit}s)"
  local t0=$(date +%s) rc
  if [ -n "$out" ]; then
    timeout --kill-after=10 "$limit" "${RUNNER[@]}" "$@" >"$out" 2>>"$LOG"; rc=$?
    tail -c 4000 "$out" >>"$LOG"
  else
    timeout --kill-after=10 "$limit" "${RUNNER[@]}" "$@" >>"$LOG" 2>&1; rc=$?
  fi
  local secs=$(($(date +%s) - t0))
  log "step $name: exit $rc after ${secs}s"
  STEPS+=("{\"step\": \"$name\", \"command\": \"$*\", \"exit_code\": $rc, \"seconds\": $secs}")
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$LOG" 2>&1 || true
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
C="$BUNDLE/bin/compass"
SKIP=" ${FUSED_CHECK_SKIP:-} "

[[ "$SKIP" == *" tests "* ]] ||
  step fused_tests 100 "" "$BUNDLE/bin/test_cuda" --gtest_filter='Fused*' --gtest_output=json:"$OUT/fused_tests.json"
[[ "$SKIP" == *" bench "* ]] ||
  step bench_fused 120 "$OUT/bench_fused.json" "$BUNDLE/bin/bench_fused" --benchmark_format=json
TOTAL=$(($(date +%s) - START))
{
  echo "{"
  echo "  \"gpu\": \"${GPU:-unknown}\","
  echo "  \"total_seconds\": $TOTAL,"
  echo "  \"steps\": ["
  for i in "${!STEPS[@]}"; do
    sep=","; [ "$i" -eq $((${#STEPS[@]} - 1)) ] && sep=""
    echo "    ${STEPS[$i]}$sep"
  done
  echo "  ]"
  echo "}"
} > "$OUT/fused-results.json"
log "done in ${TOTAL}s; results in $OUT/fused-results.json"
failed=0
for s in "${STEPS[@]}"; do [[ "$s" == *'"exit_code": 0,'* ]] || failed=1; done
exit $failed
