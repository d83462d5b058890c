#!/usr/bin/env bash
# What #13 still needs from the GPUs (docs/gpu_results.md, "Not done"), as one device call on 4 H200s
# (nvidia-h200-x4): the tensor-parallel step (2-way TP x 2-way FSDP, one issue order over both groups; d_tie
# breaks the plain model's ties by the contention model, which matters with several groups). It ran on 4 gloo
# ranks with matching losses, never on a GPU. (The re-gather configuration it also ran is done: runs 13-18,
# benchmarks/gpu/regather_x2.sh.) Carry the wheels in .whl.
set -u
. benchmarks/gpu/device_env.sh
timeout 540 python3 benchmarks/gpu/e2e_step.py --world 4 --tp 2 --collective-order chain --out "$OUT/tp" \
  --steps 30 --prof-steps 5 --configs d d_tie c b_three b_iter 2>&1 | grep -v -i "warn\|pre_bucket" \
  | tee "$OUT/log_tp.txt" | cut -c1-200 | grep -v "^ " | tail -6
# The 2-GPU checks fixed before runs 19 on ran (runs 19-20, docs/gpu_results.md). Still open on 2 GPUs
# (nvidia-h200-x2), one call each: overlapsat's free order under a memory budget, beside the iterative pair
#   FIRST="d_mem d b_iter" SECOND="" FIRST_S=540 EXTRA="--collective-order free --memory-budget 1.3 \
#     --solve-s 60" bash benchmarks/gpu/regather_x2.sh
# and the partial-hold tests fixed after runs 19-26 (docs/gpu_results.md, "Fixed before the next runs"), twice:
#   FIRST="d_hold d b_iter" SECOND="" FIRST_S=540 EXTRA="--solve-s 60 --collective-order free" \
#     bash benchmarks/gpu/regather_x2.sh
#   . benchmarks/gpu/device_env.sh; python3 benchmarks/gpu/e2e_step.py --world 2 --out "$OUT/plain" \
#     --steps 50 --prof-steps 10 --configs d b_iter c    (the step without re-gather)
# The carry limit is 64 MiB: strip pandas/tests from the carried pandas wheel (docs/gpu_results.md, Setup).
