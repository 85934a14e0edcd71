#!/usr/bin/env bash
# A short diagnostic for a failing `compass run --backend cuda --check` on the device machine:
# one line per variant (iterations, serialized issue, sync mode, sizes, strategies alone or
# after others in one process), with the location of the largest error.
# Usage (device tool): run(command="tools/device-diag.sh", carry=["build-device/bundle"])
set -uo pipefail
cd "$(dirname "$0")/.."
B=$PWD/build-device/bundle
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/targets/x86_64-linux/lib:/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
C="$B/bin/compass"
RS="run --backend cuda --op gemm_rs --m 8192 --n 8192 --k 8192 --dtype bf16 --check --tp 8"
one() {
  local label=$1 line
  shift
  line=$(timeout 60 "$@" 2>&1 | grep -E "^(sequential|decompose|fuse)|largest|error" | tr -s ' ' | tr '\n' '|')
  echo "$label => $line"
}
{
one "J1 ring alone r5" "$C" $RS --strategy fuse:ring --repeat 5
one "J2 ring alone r1w0" "$C" $RS --strategy fuse:ring --repeat 1 --warmup 0
one "J7 dec4 alone r5" "$C" $RS --strategy decompose:4 --repeat 5
COMPASS_CUDA_SERIALIZE=1 one "J5 ring serialize r5" "$C" $RS --strategy fuse:ring --repeat 5
one "J6 ring flags r5" "$C" $RS --strategy fuse:ring --repeat 5 --sync flags
one "J3 all r1w0" "$C" $RS --strategy all --repeat 1 --warmup 0
one "J8 all r5" "$C" $RS --strategy all --repeat 5
one "J4 4096 all r5" "$C" run --backend cuda --op gemm_rs --m 4096 --n 4096 --k 4096 --dtype bf16 --check --tp 8 --strategy all --repeat 5
one "K1 ag all r5" "$C" run --backend cuda --op ag_gemm --m 8192 --n 8192 --k 8192 --dtype bf16 --check --tp 8 --strategy all --repeat 5
one "L ar all r5" "$C" run --backend cuda --op gemm_ar --m 8192 --n 8192 --k 8192 --dtype bf16 --check --tp 8 --strategy all --repeat 5
} 2>&1 | tee "$OUT/diag.log"
