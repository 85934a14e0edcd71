#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, libFuzzer + ASan + UBSan, the `asan` CMake preset in
# build/asan) and runs each for a bounded time on its seed corpus: fuzz/corpus/<name> in the
# repository, plus (for the profile loader) seeds generated from the presets. Exits non-zero
# when a fuzzer finds a crash, leak, hang or sanitizer report.
# Usage: tools/run-fuzz.sh [seconds-per-harness] [harness...]
#   default 60 s each; harnesses: profile model schedule calibration cli agreement
#   (default: all)
#   JOBS=<n> limits build parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "run-fuzz: seconds must be a positive integer, got '$seconds'" >&2
  exit 2
fi
shift || true
all=(profile model schedule calibration cli agreement)
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=("${all[@]}")
targets=()
for h in "${harnesses[@]}"; do
  case "$h" in
    profile|model|schedule|calibration) targets+=("fuzz_${h}_loader") ;;
    cli) targets+=("fuzz_cli_args") ;;
    agreement) targets+=("fuzz_run_agreement") ;;
    *) echo "run-fuzz: unknown harness '$h' (expected: ${all[*]})" >&2; exit 2 ;;
  esac
done
for tool in clang clang++ cmake ninja; do
  command -v "$tool" >/dev/null 2>&1 || { echo "run-fuzz: $tool not found (run tools/setup.sh)" >&2; exit 2; }
done

# The `asan` preset (clang; ASan, UBSan and libFuzzer coverage in every library, so coverage guides
# the fuzzer into the loaders and the sanitizers check them) builds the harnesses next to the
# sanitized test suite of tools/sanitize.sh; the harness targets add -fsanitize=fuzzer themselves.
build="$PWD/build/asan"  # absolute: the CLI harness runs in a directory of its own
launcher=()
command -v ccache >/dev/null 2>&1 &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake --preset asan "${launcher[@]}" >/dev/null
cmake --build "$build" --target "${targets[@]}" -- -j"${JOBS:-$(nproc)}" \
  | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }

failed=0
for i in "${!targets[@]}"; do
  h="${harnesses[$i]}"
  target="${targets[$i]}"
  fuzzer="$build/fuzz/$target"
  work="$build/fuzz-$h"
  corpus="$work/corpus"
  artifacts="$work/artifacts"
  mkdir -p "$corpus" "$artifacts"
  seed_dirs=()
  [ -d "fuzz/corpus/$h" ] && seed_dirs+=("$PWD/fuzz/corpus/$h")
  if [ "$h" = profile ]; then
    rm -rf "$work/seeds"
    COMPASS_FUZZ_WRITE_SEEDS="$work/seeds" "$fuzzer"
    seed_dirs+=("$work/seeds")
  fi
  extra=()
  # The CLI prints tables and error lines; keep them out of the fuzzer's log.
  [ "$h" = cli ] && extra+=(-close_fd_mask=3)
  echo "run-fuzz: fuzzing $target for ${seconds} s" >&2
  # New interesting inputs go to the first directory; crashes to $artifacts.
  if ! "$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
      "${extra[@]}" -artifact_prefix="$artifacts/" "$corpus" "${seed_dirs[@]}" 2>"$work/fuzz.log"; then
    tail -n 60 "$work/fuzz.log" >&2
    echo "run-fuzz: $target FAILED; the input that failed is in $artifacts/" >&2
    failed=1
    continue
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)' "$work/fuzz.log" >&2 || true
done
[ "$failed" -eq 0 ] || exit 1
echo "run-fuzz: no crash in ${seconds} s per harness (${harnesses[*]})" >&2
