#!/usr/bin/env bash
# The speed-up of a study shared among MPI processes: the same command run by one process and
# under `mpirun -np N`, alternately, REPS times each; prints every wall time, the medians and
# their ratio, and checks that both wrote the same JSON.
# Usage: tools/bench-mpi-spread.sh [N] [REPS] [-- compass arguments]
#   default: N=2, REPS=3, arguments: sweep --sim --summary --progress none (the paper grid)
set -euo pipefail
cd "$(dirname "$0")/.."
np="${1:-2}"
reps="${2:-3}"
shift $(( $# >= 2 ? 2 : $# )) || true
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(sweep --sim --summary --progress none)
if ! [[ "$np" =~ ^[0-9]+$ ]] || [ "$np" -lt 2 ]; then
  echo "bench-mpi-spread: N must be an integer >= 2, got '$np'" >&2; exit 2
fi
if ! [[ "$reps" =~ ^[0-9]+$ ]] || [ "$reps" -lt 1 ]; then
  echo "bench-mpi-spread: REPS must be a positive integer, got '$reps'" >&2; exit 2
fi
compass="$PWD/build/release/compass"
[ -x "$compass" ] || { echo "bench-mpi-spread: $compass not built (tools/setup.sh --tests)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "bench-mpi-spread: mpirun not found" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wall() {  # seconds one command takes, its JSON written to $1
  local out="$1"; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" "${args[@]}" --json-out "$out" --force >/dev/null
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}'
}
one=(); many=()
for ((i = 1; i <= reps; i++)); do
  one+=("$(wall "$work/one.json" "$compass")")
  many+=("$(wall "$work/many.json" mpirun --oversubscribe --allow-run-as-root -np "$np" "$compass")")
  cmp -s "$work/one.json" "$work/many.json" ||
    { echo "bench-mpi-spread: the outputs differ" >&2; exit 1; }
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
m1=$(median "${one[@]}"); mn=$(median "${many[@]}")
printf 'compass %s\n' "${args[*]}"
printf 'one process:   %s s (median %.2f s)\n' "$(printf '%.2f ' "${one[@]}")" "$m1"
printf 'mpirun -np %s: %s s (median %.2f s)\n' "$np" "$(printf '%.2f ' "${many[@]}")" "$mn"
awk -v a="$m1" -v b="$mn" 'BEGIN {printf "speed-up %.2fx, the same JSON every time\n", a / b}'
