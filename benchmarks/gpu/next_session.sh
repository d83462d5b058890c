#!/usr/bin/env bash
# What #13 still needs from the GPUs (docs/gpu_results.md, "Not done" and "Fixed before the next runs"), as
# device calls of under 10 minutes each. Carry the wheels in .whl: to fit the 64 MiB carry limit, unpacked
# into one archive, which benchmarks/gpu/device_env.sh unpacks on the device:
#   mkdir site && for w in .whl/*.whl; do unzip -q -o "$w" -d site; done
#   tar -C site -cf - . | xz -9e -T2 > .whl/site.tar.xz   (then move the .whl files out of .whl)
set -u
. benchmarks/gpu/device_env.sh
case "${1:-tp}" in
tp)  # 4 H200s (nvidia-h200-x4): the tensor-parallel step (2-way TP x 2-way FSDP, one issue order over both
     # groups; d_tie breaks the plain model's ties by the contention model). Runs on 4 gloo ranks with eager's
     # loss; never on a GPU: no 4-GPU machine was lent in four sessions.
  timeout 540 python3 benchmarks/gpu/e2e_step.py --world 4 --tp 2 --collective-order chain --out "$OUT/tp" \
    --steps 30 --prof-steps 5 --configs d d_tie c b_three b_iter 2>&1 | grep -v -i "warn\|pre_bucket" \
    | tee "$OUT/log_tp.txt" | cut -c1-200 | grep -v "^ " | tail -6 ;;
memory)  # 2 H200s (nvidia-h200-x2): run 33's overshoot (5.41 GB against 5.17 allowed and predicted at `free`
     # under the budget 1.3), with the allocator's requested and allocated peaks and the forward graph's peak
     # recorded (e2e_step.memory_phases); then the same at pin="all", which stops fusion across the order
  FIRST="d_mem d b_iter" SECOND="" FIRST_S=330 EXTRA="--collective-order free --memory-budget 1.3 --solve-s 60" \
    bash benchmarks/gpu/regather_x2.sh
  mv "$OUT/pass1" "$OUT/pin_compute"; mv "$OUT/log_pass1.txt" "$OUT/log_pin_compute.txt"
  FIRST="d_mem" SECOND="" FIRST_S=200 EXTRA="--collective-order free --memory-budget 1.3 --solve-s 60 --pin all" \
    bash benchmarks/gpu/regather_x2.sh ;;
snapshot)  # 2 H200s: the allocator's tensors at the peak of the budgeted `free` orders of runs 33 (5.41 GB) and
     # 34 (5.27 GB), applied from their stores without solving, against the importer's accounting (the rule's
     # third branch, docs/gpu_results.md); then run 34's order at pin="all" (the rule's second half, cut by the
     # time limit in run 34). Analysed offline: benchmarks/gpu/memory_snapshot.py
  R=benchmarks/results/gpu_2026-11-23
  for job in "r33 $R/run33_regather_free_mem compute" "r34 $R/run34_regather_free_mem compute" \
             "r34_pin_all $R/run34_regather_free_mem all"; do
    set -- $job
    timeout 175 python3 benchmarks/gpu/e2e_step.py --world 2 --regather --collective-order free --memory-budget 1.3 \
      --pin "$3" --steps 30 --prof-steps 3 --prof-warmup 1 --configs d_mem --keep-traces --snapshot \
      --store-from "$2/store.tar.gz" --out "$OUT/$1" 2>&1 | grep -v -i "warn\|pre_bucket" | tee "$OUT/log_$1.txt" \
      | cut -c1-200 | grep -v "^ \|^\[rank" | tail -3
  done ;;
esac
