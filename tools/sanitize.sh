#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer and UndefinedBehaviorSanitizer (the `asan` CMake
# preset, build/asan: no CUDA, no SimGrid, no benchmarks) and runs it. Any sanitizer report
# fails its test (halt_on_error), so the script exits non-zero.
# Usage: tools/sanitize.sh [layer...]
#   no arguments: every test executable (the CLI too); with layers (core hardware workload
#   schedule model plan executor study cli ...): only test_<layer>, and only its tests.
#   JOBS=<n> limits parallelism (default nproc).
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
cmake --preset asan "${launcher[@]}" >/dev/null
targets=()
for layer in "$@"; do targets+=("test_$layer"); done
if [ ${#targets[@]} -gt 0 ]; then
  # The CLI binary is what test_cli runs, so it is built with it.
  [[ " $* " == *" cli "* ]] && targets+=(compass_cli)
  cmake --build --preset asan --target "${targets[@]}" -- -j"$jobs" | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }
else
  cmake --build --preset asan -- -j"$jobs" | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }
fi
args=(--preset asan -j"$jobs")
if [ $# -gt 0 ]; then
  labels=$(IFS='|'; echo "$*")
  args+=(-L "^(${labels})\$")
fi
ctest "${args[@]}"
echo "sanitize: no AddressSanitizer or UndefinedBehaviorSanitizer report" >&2
