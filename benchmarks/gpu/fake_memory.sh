#!/usr/bin/env bash
# Issue "plans within the memory a user has", on ONE GPU: rank 0 of each step on torch's fake process group
# (e2e_step.py --fake). Its collectives move nothing, so its times are its compute alone; its tensors, and the
# caching allocator's peak, are rank 0's (2026-12-02: `a`, `tbb_torch` and `p_co_free` of the 4-rank
# tensor-parallel re-gather step read the 4-GPU NCCL run's peaks of 2026-11-30 to the byte, less NCCL's
# 512-B barrier block). Torch's bucketed scheduler (c_bkt) chooses otherwise when no collective takes time,
# so it is not measured here. Each step: `a` first, then CONFIGS; one results.json per step:
#   CONFIGS="p_co p_co_free" bash benchmarks/gpu/fake_memory.sh eq eqshape_w4_regather
# CONFIGS="" runs `a` alone. EXTRA: more e2e_step options (e.g. --resolve-rounds 2: a plan set aside after fusion is solved again and compiled)
set -u  # OVERLAPSAT_LOG=INFO: the library's INFO lines too, in each step's log.txt
. benchmarks/gpu/device_env.sh
for step in "$@"; do
  case $step in
    eq) shape="--world 2 --layers 8" ;;                        # 8 layers, dim 4096, seq 2048, 2 ranks
    eq_w4_regather) shape="--world 4 --layers 8 --regather" ;;
    eqshape_w4_regather) shape="--world 4 --layers 10 --dim 2560 --heads 20 --ffn 6912 --seq 3072 --regather" ;;
    eqshape_w4_tp2_regather) shape="--world 4 --tp 2 --layers 10 --dim 2560 --heads 20 --ffn 6912 --seq 3072 --regather" ;;
    # a shape no run had before 2026-12-02 (6 layers, dim 3072, sequence 2560)
    newshape_w4_regather) shape="--world 4 --layers 6 --dim 3072 --heads 24 --ffn 8192 --seq 2560 --regather" ;;
    newshape_w4_tp2_regather) shape="--world 4 --tp 2 --layers 6 --dim 3072 --heads 24 --ffn 8192 --seq 2560 --regather" ;;
    # a third shape, first run in the evening session of 2026-12-02 (4 layers, dim 4096, FFN 14336, sequence 2048)
    shape3_w4) shape="--world 4 --layers 4 --dim 4096 --heads 32 --ffn 14336 --seq 2048" ;;
    shape3_w4_tp2_regather) shape="--world 4 --tp 2 --layers 4 --dim 4096 --heads 32 --ffn 14336 --seq 2048 --regather" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  mkdir -p "$OUT/fake_$step"
  timeout "${LIMIT:-280}" python3 benchmarks/gpu/e2e_step.py --fake $shape --profile h200 --steps 10 --warmup 5 \
    --prof-steps 4 --prof-warmup 1 --solve-s "${SOLVE_S:-12}" --keep-traces --out "$OUT/fake_$step" \
    --configs a ${CONFIGS-p_co p_co_free} ${EXTRA:-} 2>&1 | grep -v -i "warn\|pre_bucket\|^ \|^\[rank" > "$OUT/fake_$step/log.txt"
  grep -E "^(a|p|p_co|p_co_mem|p_co_free) " "$OUT/fake_$step/log.txt" | cut -c1-160
done
