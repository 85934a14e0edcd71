#!/usr/bin/env bash
# Starts one `compass run --backend cuda --launch env` process per rank on this machine, the
# way torchrun would (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, a free MASTER_PORT),
# waits for all of them and exits with their common exit code, or 99 when they disagree (one
# rank failed and another did not: every rank must report a failure). Used by
# tools/device-mp-check.sh; also usable by hand.
# Usage: tools/device-mp-run.sh COMPASS RANKS OUT_FILE ERR_FILE -- RUN_ARGS...
#   OUT_FILE gets rank 0's stdout (the only rank that reports), ERR_FILE every rank's stderr.
#   MP_RUNNER (optional): a loader command put in front of COMPASS (the bundled glibc loader).
#   MP_TIMEOUT_S (default 120): per process.
set -uo pipefail
[ $# -ge 5 ] && [ "$5" = "--" ] || { echo "usage: $0 COMPASS RANKS OUT_FILE ERR_FILE -- RUN_ARGS..." >&2; exit 2; }
C=$1 RANKS=$2 OUT_FILE=$3 ERR_FILE=$4
shift 5
read -r -a RUNNER <<<"${MP_RUNNER:-}"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo $((29500 + RANDOM % 2000)))
: > "$ERR_FILE"
pids=()
for ((r = RANKS - 1; r >= 0; r--)); do
  out=/dev/null
  [ "$r" -eq 0 ] && out=$OUT_FILE
  RANK=$r WORLD_SIZE=$RANKS LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
    timeout --kill-after=10 "${MP_TIMEOUT_S:-120}" "${RUNNER[@]}" "$C" run --backend cuda \
    --launch env "$@" >"$out" 2> >(sed "s/^/[process $r] /" >>"$ERR_FILE") &
  pids[r]=$!
done
rcs=()
for ((r = 0; r < RANKS; r++)); do
  wait "${pids[r]}"
  rcs[r]=$?
done
wait  # the stderr filters
echo "exit codes by rank: ${rcs[*]}" >>"$ERR_FILE"
for rc in "${rcs[@]}"; do [ "$rc" -eq "${rcs[0]}" ] || exit 99; done
exit "${rcs[0]}"
