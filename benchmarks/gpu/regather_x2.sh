#!/usr/bin/env bash
# The issue's own configuration (every weight re-gathered in backward under selective checkpointing) on
# 2 H200s (nvidia-h200-x2), as one device call of under 10 minutes: all five configurations, then a
# second pass over as many as time allows (d first). FIRST, SECOND (configurations), FIRST_S (the first
# pass's limit) and EXTRA (more e2e_step options) change the plan; runs 15-16 were FIRST="d_mem d b_iter c a" FIRST_S=545 (SECOND="" then still ran the default second pass; fixed), run 17 FIRST="d_mem d a b_iter" SECOND="" FIRST_S=520. Measures fixed before the runs: benchmarks/results/gpu_runs.md,
# "Runs 13 on". Carry the wheels in .whl.
set -u
. benchmarks/gpu/device_env.sh
FIRST=${FIRST-d c b_iter b_three a}
SECOND=${SECOND-d c b_iter b_three}
start=$SECONDS
run() {  # out-dir seconds configs...
  local dir=$1 limit=$2; shift 2
  timeout "$limit" python3 benchmarks/gpu/e2e_step.py --world 2 --regather --out "$OUT/$dir" \
    --steps 50 --prof-steps 10 --prof-warmup 1 ${EXTRA:-} --configs "$@" 2>&1 | grep -v -i "warn\|pre_bucket" \
    | tee "$OUT/log_$dir.txt" | cut -c1-220 | grep -v "^ \|^\[rank" | tail -7
}
run pass1 "${FIRST_S:-400}" $FIRST
left=$(( 560 - (SECONDS - start) ))
[ "$left" -gt 90 ] && [ -n "$SECOND" ] && run pass2 "$left" $SECOND
echo "total ${SECONDS}s"
