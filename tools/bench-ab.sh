#!/usr/bin/env bash
# Runs Google Benchmark binaries side by side, alternating, and summarises each benchmark's
# real times over all runs (minimum, lower quartile, median): on a shared machine the minimum
# and the quartile move least with the load.
#   tools/bench-ab.sh <filter> <rounds> <binary> [binary...]
# Each round runs every binary once, in the order given, with 3 repetitions of each benchmark
# that matches <filter>. Example, a build of main against this tree's:
#   tools/bench-ab.sh 'BM_SweepPaperGrid(Explained|OneThread)?/' 5 /tmp/main/bench_plan build/release/bench/bench_plan
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 <filter> <rounds> <binary> [binary...]" >&2
  exit 2
fi
filter=$1; rounds=$2; shift 2
case "$rounds" in
  '' | *[!0-9]* | 0) echo "bench-ab: rounds must be a positive integer, not '$rounds'" >&2; exit 2 ;;
esac
for b in "$@"; do
  if [ ! -x "$b" ]; then
    echo "bench-ab: '$b' is not an executable file" >&2
    exit 2
  fi
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for i in $(seq "$rounds"); do
  n=0
  for b in "$@"; do
    n=$((n + 1))
    "$b" --benchmark_filter="$filter" --benchmark_repetitions=3 --benchmark_format=csv \
      2>/dev/null >>"$dir/$n.csv" || { echo "bench-ab: '$b' failed" >&2; exit 1; }
  done
done
n=0
for b in "$@"; do
  n=$((n + 1))
  python3 - "$b" "$dir/$n.csv" <<'PY'
import csv, statistics, sys
binary, path = sys.argv[1], sys.argv[2]
times = {}
with open(path) as f:
    for row in csv.reader(f):
        if len(row) < 4 or row[0] == "name" or row[0].endswith(("_mean", "_median", "_stddev", "_cv")):
            continue
        times.setdefault(row[0].split("/")[0], []).append((float(row[2]), row[4]))
if not times:
    sys.exit(f"bench-ab: no benchmark of {binary} matched")
for name, runs in sorted(times.items()):
    v = sorted(t for t, _ in runs)
    unit = runs[0][1]
    print(f"{binary}  {name}  n={len(v)}  min={v[0]:.1f}  p25={v[len(v) // 4]:.1f}  "
          f"median={statistics.median(v):.1f} {unit}")
PY
done
