#!/usr/bin/env bash
# Builds the profile-loader fuzzer (clang, libFuzzer + ASan + UBSan, the `fuzz` CMake preset in
# build/fuzz, only that target) and runs it for a bounded time on a seed corpus generated from
# the presets. Exits non-zero when the fuzzer finds a crash, leak, hang or sanitizer report.
# Usage: tools/run-fuzz.sh [seconds]     (default 60; JOBS=<n> limits build parallelism)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "run-fuzz: seconds must be a positive integer, got '$seconds'" >&2
  exit 2
fi
for tool in clang clang++ cmake ninja; do
  command -v "$tool" >/dev/null 2>&1 || { echo "run-fuzz: $tool not found (run tools/setup.sh)" >&2; exit 2; }
done

build=build/fuzz
# Instrument the libraries too (not only the harness), so coverage guides the fuzzer into the
# loader and the sanitizers check it; the harness target adds -fsanitize=fuzzer itself.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
cmake --preset fuzz -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" >/dev/null
cmake --build "$build" --target fuzz_profile_loader -- -j"${JOBS:-$(nproc)}" \
  | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }

fuzzer="$build/fuzz/fuzz_profile_loader"
seeds="$build/fuzz-seeds"
corpus="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
rm -rf "$seeds"
mkdir -p "$corpus" "$artifacts"
COMPASS_FUZZ_WRITE_SEEDS="$seeds" "$fuzzer"

echo "run-fuzz: fuzzing the profile loader for ${seconds} s (seeds: $(ls "$seeds" | wc -l))" >&2
# New interesting inputs go to the first directory; crashes to $artifacts.
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$corpus" "$seeds" 2>"$build/fuzz.log" || {
  rc=$?
  tail -n 60 "$build/fuzz.log" >&2
  echo "run-fuzz: FAILED (exit $rc); the input that failed is in $artifacts/" >&2
  exit 1
}
grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)' "$build/fuzz.log" >&2 || true
echo "run-fuzz: no crash in ${seconds} s" >&2
