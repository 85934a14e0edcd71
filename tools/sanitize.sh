#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer and UndefinedBehaviorSanitizer (the `asan` CMake
# preset, build/asan: clang, no CUDA, no SimGrid, no benchmarks; tools/run-fuzz.sh builds its
# harnesses on the same instrumented libraries) and runs it. Any sanitizer report
# fails its test (halt_on_error), so the script exits non-zero.
# Usage: tools/sanitize.sh [layer...]
#   no arguments: every test executable (the CLI too), through ctest; with layers (core hardware
#   workload schedule model plan executor study cli launch ...): only test_<layer>, each run as
#   one process, JOBS of them at a time (cli and launch run the compass binary, which is built
#   with them); a layer's output is printed when it fails.
#   JOBS=<n> limits parallelism (default nproc).
#   SANITIZER=thread: ThreadSanitizer instead (the `tsan` preset, build/tsan: gcc, no CUDA, no
#   SimGrid), for the layers that run threads (executor, plan, study); any data race or
#   lock-order report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${JOBS:-$(nproc)}"
for layer in "$@"; do
  if ! [[ "$layer" =~ ^[a-z_]+$ ]]; then
    echo "sanitize: '$layer' is not a layer name (e.g. core, schedule, executor)" >&2
    exit 2
  fi
done
launcher=()
command -v ccache >/dev/null 2>&1 &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
preset=asan
case "${SANITIZER:-address}" in
  address) ;;
  thread) preset=tsan ;;
  *) echo "sanitize: SANITIZER must be address or thread, got '${SANITIZER}'" >&2; exit 2 ;;
esac
cmake --preset "$preset" "${launcher[@]}" >/dev/null
targets=()
for layer in "$@"; do targets+=("test_$layer"); done
if [ ${#targets[@]} -gt 0 ]; then
  # The CLI binary is what test_cli and test_launch run, so it is built with them.
  [[ " $* " == *" cli "* || " $* " == *" launch "* ]] && targets+=(compass_cli)
  cmake --build --preset "$preset" --target "${targets[@]}" -- -j"$jobs" | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }
else
  cmake --build --preset "$preset" -- -j"$jobs" | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }
fi
# ThreadSanitizer: stop at the first report, with both stacks of a lock-order problem.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
if [ $# -eq 0 ]; then
  ctest --preset "$preset" -j"$jobs"
else
  # One process per layer: its test executable runs all its tests. (ctest starts a process per
  # test, and an instrumented process's start costs more than most of these tests: the schedule
  # layer takes about 30 s this way and ten minutes of process time through ctest.) The
  # sanitizer options are the test preset's, read from CMakePresets.json.
  while IFS= read -r setting; do export "${setting?}"; done < <(python3 -c '
import json, sys
for t in json.load(open("CMakePresets.json"))["testPresets"]:
    if t["name"] == sys.argv[1]:
        for k, v in t.get("environment", {}).items():
            print(f"{k}={v}")' "$preset")
  # The layers run side by side, JOBS at a time, each into its own log, printed when it fails.
  logs="build/$preset/sanitize-logs"
  mkdir -p "$logs"
  run_layer() {
    local layer="$1" exe="build/$preset/tests/test_$1"
    if [ "$layer" = launch ] && [ "$preset" = asan ]; then
      # Open MPI's runtime leaks at exit from plugins it has already unloaded, so LeakSanitizer
      # reports unattributable leaks in every process mpirun starts; leak checking is off for
      # this layer only (the address and undefined-behaviour checks stay on, and test_cli checks
      # the same verbs' leaks in single processes).
      ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}" "$exe" --gtest_brief=1
    else
      "$exe" --gtest_brief=1
    fi
  }
  for layer in "$@"; do
    if [ ! -x "build/$preset/tests/test_$layer" ]; then
      echo "sanitize: no test executable for layer '$layer' in the $preset build" >&2
      exit 2
    fi
  done
  pids=(); names=()
  failed=0
  wait_one() {  # waits for the oldest running layer; prints its log when it failed
    local pid="${pids[0]}" layer="${names[0]}" start="${starts[0]}"
    pids=("${pids[@]:1}"); names=("${names[@]:1}"); starts=("${starts[@]:1}")
    if wait "$pid"; then
      echo "sanitize: build/$preset/tests/test_$layer passed ($((SECONDS - start)) s)" >&2
    else
      echo "sanitize: build/$preset/tests/test_$layer FAILED; its output:" >&2
      cat "$logs/$layer.log" >&2
      failed=1
    fi
  }
  starts=()
  for layer in "$@"; do
    while [ ${#pids[@]} -ge "$jobs" ]; do wait_one; done
    run_layer "$layer" >"$logs/$layer.log" 2>&1 &
    pids+=($!); names+=("$layer"); starts+=("$SECONDS")
  done
  while [ ${#pids[@]} -gt 0 ]; do wait_one; done
  [ "$failed" -eq 0 ] || exit 1
fi
if [ "$preset" = tsan ]; then
  echo "sanitize: no ThreadSanitizer report" >&2
else
  echo "sanitize: no AddressSanitizer or UndefinedBehaviorSanitizer report" >&2
fi
