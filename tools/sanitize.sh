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
  # The longest (cli under ASan, executor under TSan) run as two GoogleTest shards, so that the
  # stage does not end with one core waiting on one process.
  logs="build/$preset/sanitize-logs"
  mkdir -p "$logs"
  run_layer() {  # layer shard shards
    local layer="$1" exe="build/$preset/tests/test_$1"
    export GTEST_SHARD_INDEX="$2" GTEST_TOTAL_SHARDS="$3"
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
  runs=()  # layer:shard:shards
  for layer in "$@"; do
    if [ ! -x "build/$preset/tests/test_$layer" ]; then
      echo "sanitize: no test executable for layer '$layer' in the $preset build" >&2
      exit 2
    fi
    if [ "$jobs" -ge 2 ] && { [ "$layer" = cli ] || [ "$layer" = executor ]; }; then
      runs+=("$layer:0:2" "$layer:1:2")
    else
      runs+=("$layer:0:1")
    fi
  done
  declare -A name_of=() start_of=()  # by pid, the processes running
  running=0
  failed=0
  wait_one() {  # reaps whichever test process ends first; prints its log when it failed
    local pid rc=0
    wait -n -p pid || rc=$?
    local name="${name_of[$pid]}" took=$((SECONDS - ${start_of[$pid]}))
    unset "name_of[$pid]" "start_of[$pid]"
    running=$((running - 1))
    if [ "$rc" -eq 0 ]; then
      echo "sanitize: test_${name%%:*} (shard ${name#*:}) passed in ${took} s" >&2
    else
      echo "sanitize: test_${name%%:*} (shard ${name#*:}) FAILED; its output:" >&2
      cat "$logs/${name//:/.}.log" >&2
      failed=1
    fi
  }
  for run in "${runs[@]}"; do
    while [ "$running" -ge "$jobs" ]; do wait_one; done
    IFS=: read -r layer shard shards <<<"$run"
    run_layer "$layer" "$shard" "$shards" >"$logs/$layer.$shard.$shards.log" 2>&1 &
    name_of[$!]="$run"
    start_of[$!]=$SECONDS
    running=$((running + 1))
  done
  while [ "$running" -gt 0 ]; do wait_one; done
  [ "$failed" -eq 0 ] || exit 1
fi
if [ "$preset" = tsan ]; then
  echo "sanitize: no ThreadSanitizer report" >&2
else
  echo "sanitize: no AddressSanitizer or UndefinedBehaviorSanitizer report" >&2
fi
