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
: > "$LOG"
START=$(date +%s)
STEPS=()

log() { echo "[$(($(date +%s) - START))s] $*" | tee -a "$LOG" >&2; }

# Finds the directory holding a library: the loader cache, the CUDA toolkit, then pip wheels
# (PyTorch ships cuBLAS as nvidia-cublas), then a bounded search.
find_lib_dir() {
  local lib=$1 hit
  hit=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
  if [ -z "$hit" ]; then
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 /usr/lib/x86_64-linux-gnu; do
      [ -e "$d/$lib" ] && { hit="$d/$lib"; break; }
    done
  fi
  if [ -z "$hit" ] && command -v python3 >/dev/null; then
    hit=$(python3 - "$lib" 2>/dev/null <<'PY'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for p in glob.glob(os.path.join(r, "nvidia", "**", sys.argv[1]), recursive=True):
        print(p); sys.exit(0)
PY
)
  fi
  if [ -z "$hit" ]; then
    hit=$(timeout 30 find / -xdev -name "$lib" -not -path '/proc/*' 2>/dev/null | head -1)
  fi
  [ -n "$hit" ] && dirname "$hit"
}

LIBDIRS="$BUNDLE/lib"
for lib in libcublasLt.so.13 libcuda.so.1; do
  d=$(find_lib_dir "$lib")
  if [ -n "$d" ]; then
    log "found $lib in $d"
    case ":$LIBDIRS:" in *":$d:"*) ;; *) LIBDIRS="$LIBDIRS:$d" ;; esac
  else
    log "WARNING: $lib not found; the GPU steps will fail"
  fi
done
export LD_LIBRARY_PATH="$LIBDIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Run directly; if the device's glibc is older than ours, through the bundled loader.
RUNNER=()
if ! "$BUNDLE/bin/compass" --version >>"$LOG" 2>&1; then
  if [ -x "$BUNDLE/glibc/ld-linux-x86-64.so.2" ]; then
    RUNNER=("$BUNDLE/glibc/ld-linux-x86-64.so.2" --library-path "$BUNDLE/glibc:$LD_LIBRARY_PATH")
    log "direct start failed; using the bundled glibc loader"
    "${RUNNER[@]}" "$BUNDLE/bin/compass" --version >>"$LOG" 2>&1 || log "WARNING: compass does not start"
  fi
fi

# step NAME TIMEOUT_S STDOUT_FILE COMMAND... : runs, logs, records rc and seconds.
step() {
  local name=$1 limit=$2 out=$3
  shift 3
  log "step $name: $* (timeout ${limit}s)"
  local t0=$(date +%s) rc
  if [ -n "$out" ]; then
    timeout --kill-after=10 "$limit" "${RUNNER[@]}" "$@" >"$out" 2>>"$LOG"
    rc=$?
    cat "$out" >>"$LOG"
  else
    timeout --kill-after=10 "$limit" "${RUNNER[@]}" "$@" >>"$LOG" 2>&1
    rc=$?
  fi
  local secs=$(($(date +%s) - t0))
  log "step $name: exit $rc after ${secs}s"
  STEPS+=("{\"step\": \"$name\", \"command\": \"$*\", \"exit_code\": $rc, \"seconds\": $secs}")
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$LOG" 2>&1 || true
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)

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
    if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null; then
      cat "$f"
    else
      echo "null"
    fi
    echo "}"
  done
  echo "]"
} > "$OUT/runs.json"
rm -f "${RUNS[@]}"

TOTAL=$(($(date +%s) - START))
{
  echo "{"
  echo "  \"gpu\": \"${GPU:-unknown}\","
  echo "  \"bundle\": \"$BUNDLE\","
  echo "  \"ld_library_path\": \"$LD_LIBRARY_PATH\","
  echo "  \"loader\": \"$([ ${#RUNNER[@]} -gt 0 ] && echo bundled || echo system)\","
  echo "  \"total_seconds\": $TOTAL,"
  echo "  \"steps\": ["
  for i in "${!STEPS[@]}"; do
    sep=","; [ "$i" -eq $((${#STEPS[@]} - 1)) ] && sep=""
    echo "    ${STEPS[$i]}$sep"
  done
  echo "  ]"
  echo "}"
} > "$OUT/results.json"
log "done in ${TOTAL}s; results in $OUT/results.json"
# Exit 0 only when every step passed.
failed=0
for s in "${STEPS[@]}"; do [[ "$s" == *'"exit_code": 0,'* ]] || failed=1; done
exit $failed
