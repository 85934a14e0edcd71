#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer and UndefinedBehaviorSanitizer (the `asan` CMake
# preset, build/asan: clang, no CUDA, no SimGrid, no benchmarks; tools/run-fuzz.sh builds its
# harnesses on the same instrumented libraries) and runs it. Any sanitizer report
# fails its test (halt_on_error), so the script exits non-zero.
# Usage: tools/sanitize.sh [layer...]
#   no arguments: every test executable (the CLI too), through ctest; with layers (core hardware
#   workload schedule model plan executor study cli launch ...): only test_<layer>, run as one
#   process (cli and launch run the compass binary, which is built with them).
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
  for layer in "$@"; do
    exe="build/$preset/tests/test_$layer"
    if [ ! -x "$exe" ]; then
      echo "sanitize: no test executable for layer '$layer' in the $preset build ($exe)" >&2
      exit 2
    fi
    echo "sanitize: $exe" >&2
    "$exe" --gtest_brief=1
  done
fi
if [ "$preset" = tsan ]; then
  echo "sanitize: no ThreadSanitizer report" >&2
else
  echo "sanitize: no AddressSanitizer or UndefinedBehaviorSanitizer report" >&2
fi
