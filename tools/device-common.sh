# Shared by the device checks (tools/device-check.sh, tools/device-fused-check.sh); sourced, not
# run. The caller sets BUNDLE (the bundle of tools/make-device-bundle.sh), OUT and LOG first.
# Provides: log, step NAME TIMEOUT_S STDOUT_FILE COMMAND..., write_results FILE [EXTRA_JSON],
# steps_status; sets LD_LIBRARY_PATH (bundle, cuBLASLt, libcuda), RUNNER, GPU, START, STEPS.
# A step passes when it exits with EXPECT_RC (default 0; set it for one step, e.g.
# `EXPECT_RC=2 step ...` for a run that must be refused). DEVICE_DRY_RUN=1 runs nothing: each
# step is logged and recorded as if it had exited as expected (to check a script here).

: > "$LOG"
START=$(date +%s)
STEPS=()
FAILED_STEPS=0
DRY_RUN=${DEVICE_DRY_RUN:-0}

log() { echo "[$(($(date +%s) - START))s] $*" | tee -a "$LOG" >&2; }

# Finds the directory holding a library: the loader cache, the CUDA toolkit and driver
# directories, then pip wheels (PyTorch ships cuBLAS as nvidia-cublas), then a bounded search.
find_lib_dir() {
  local lib=$1 hit d
  hit=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}')
  if [ -z "$hit" ]; then
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
             /usr/lib/x86_64-linux-gnu /usr/local/nvidia/lib64; do
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
[ "$DRY_RUN" = 1 ] && log "dry run: nothing is run"
for lib in libcublasLt.so.13 libcuda.so.1; do
  [ "$DRY_RUN" = 1 ] && break
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
if [ "$DRY_RUN" != 1 ] && ! "$BUNDLE/bin/compass" --version >>"$LOG" 2>&1; then
  if [ -x "$BUNDLE/glibc/ld-linux-x86-64.so.2" ]; then
    RUNNER=("$BUNDLE/glibc/ld-linux-x86-64.so.2" --library-path "$BUNDLE/glibc:$LD_LIBRARY_PATH")
    log "direct start failed; using the bundled glibc loader"
    "${RUNNER[@]}" "$BUNDLE/bin/compass" --version >>"$LOG" 2>&1 || log "WARNING: compass does not start"
  fi
fi

# step NAME TIMEOUT_S STDOUT_FILE COMMAND... : runs, logs, records rc and seconds.
step() {
  local name=$1 limit=$2 out=$3 want=${EXPECT_RC:-0}
  shift 3
  log "step $name: $* (timeout ${limit}s, expected exit $want)"
  local t0 rc secs
  t0=$(date +%s)
  if [ "$DRY_RUN" = 1 ]; then
    rc=$want
  elif [ -n "$out" ]; then
    timeout --kill-after=10 "$limit" "${RUNNER[@]}" "$@" >"$out" 2>>"$LOG"
    rc=$?
    tail -c 4000 "$out" >>"$LOG"
  else
    timeout --kill-after=10 "$limit" "${RUNNER[@]}" "$@" >>"$LOG" 2>&1
    rc=$?
  fi
  secs=$(($(date +%s) - t0))
  log "step $name: exit $rc after ${secs}s"
  [ "$rc" -eq "$want" ] || FAILED_STEPS=$((FAILED_STEPS + 1))
  STEPS+=("{\"step\": \"$name\", \"command\": \"$*\", \"exit_code\": $rc, \"expected_exit_code\": $want, \"seconds\": $secs}")
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$LOG" 2>&1 || true
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)

# write_results FILE [EXTRA]: the GPU, the loader, the total time and every step as JSON;
# EXTRA is more '"key": value,' lines.
# Prints FILE when it holds valid JSON, else null (a run that wrote nothing or broke off).
json_or_null() {
  if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; then
    cat "$1"
  else
    echo "null"
  fi
}

write_results() {
  local file=$1 extra=${2:-} total i sep
  total=$(($(date +%s) - START))
  {
    echo "{"
    echo "  \"gpu\": \"${GPU:-unknown}\","
    [ -n "$extra" ] && echo "$extra"
    echo "  \"loader\": \"$([ ${#RUNNER[@]} -gt 0 ] && echo bundled || echo system)\","
    echo "  \"total_seconds\": $total,"
    echo "  \"steps\": ["
    for i in "${!STEPS[@]}"; do
      sep=","; [ "$i" -eq $((${#STEPS[@]} - 1)) ] && sep=""
      echo "    ${STEPS[$i]}$sep"
    done
    echo "  ]"
    echo "}"
  } > "$file"
  log "done in ${total}s; results in $file"
}

# 0 when every step exited as expected, else 1.
steps_status() {
  [ "$FAILED_STEPS" -eq 0 ]
}
