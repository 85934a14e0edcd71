#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, libFuzzer + ASan + UBSan, the `asan` CMake preset in
# build/asan) and runs each for a bounded time on its seed corpus: fuzz/corpus/<name> in the
# repository, plus (for the profile loader) seeds generated from the presets. Exits non-zero
# when a fuzzer finds a crash, leak, hang or sanitizer report.
# Usage: tools/run-fuzz.sh [seconds-per-harness] [harness...]
#   default 60 s each; harnesses: profile model schedule calibration cli agreement
#   (default: all)
#   JOBS=<n> limits build parallelism and the fuzzer processes run at a time.
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

# The fuzzer processes run JOBS at a time (libFuzzer uses one core each). With fewer harnesses
# than JOBS, a harness runs as several processes on one corpus directory, splitting its seconds,
# so the fuzzing time per harness is the same and no core waits.
jobs="${JOBS:-$(nproc)}"
parts=$((jobs / ${#targets[@]}))
[ "$parts" -lt 1 ] && parts=1
part_seconds=$(( (seconds + parts - 1) / parts ))
runs=()  # index:part
for i in "${!targets[@]}"; do
  h="${harnesses[$i]}"
  work="$build/fuzz-$h"
  mkdir -p "$work/corpus" "$work/artifacts"
  if [ "$h" = profile ]; then
    rm -rf "$work/seeds"
    COMPASS_FUZZ_WRITE_SEEDS="$work/seeds" "$build/fuzz/${targets[$i]}"
  fi
  echo "run-fuzz: fuzzing ${targets[$i]} for ${seconds} s ($parts process(es) of ${part_seconds} s)" >&2
  for ((part = 0; part < parts; ++part)); do runs+=("$i:$part"); done
done

fuzz_one() {  # index part: one fuzzer process, its log in the harness's work directory
  local i="$1" part="$2"
  local h="${harnesses[$i]}" target="${targets[$i]}"
  local work="$build/fuzz-$h"
  local seed_dirs=() extra=()
  [ -d "fuzz/corpus/$h" ] && seed_dirs+=("$PWD/fuzz/corpus/$h")
  [ "$h" = profile ] && seed_dirs+=("$work/seeds")
  # The CLI prints tables and error lines; keep them out of the fuzzer's log.
  [ "$h" = cli ] && extra+=(-close_fd_mask=3)
  # New interesting inputs go to the first directory; crashes to the artifacts directory.
  "$build/fuzz/$target" -max_total_time="$part_seconds" -timeout=20 -rss_limit_mb=4096 \
    -print_final_stats=1 "${extra[@]}" -artifact_prefix="$work/artifacts/" "$work/corpus" \
    "${seed_dirs[@]}" 2>"$work/fuzz.$part.log"
}

failed=0
declare -A run_of=()  # by pid
running=0
reap() {  # waits for whichever fuzzer ends first and reports it
  local pid rc=0
  wait -n -p pid || rc=$?
  local run="${run_of[$pid]}"
  unset "run_of[$pid]"
  running=$((running - 1))
  local i="${run%%:*}" part="${run#*:}"
  local target="${targets[$i]}" work="$build/fuzz-${harnesses[$i]}"
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$work/fuzz.$part.log" >&2
    echo "run-fuzz: $target FAILED; the input that failed is in $work/artifacts/" >&2
    failed=1
  else
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)' "$work/fuzz.$part.log" |
      sed "s/^/$target: /" >&2 || true
  fi
}
for run in "${runs[@]}"; do
  while [ "$running" -ge "$jobs" ]; do reap; done
  fuzz_one "${run%%:*}" "${run#*:}" &
  run_of[$!]="$run"
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do reap; done
[ "$failed" -eq 0 ] || exit 1
echo "run-fuzz: no crash in ${seconds} s per harness (${harnesses[*]})" >&2
