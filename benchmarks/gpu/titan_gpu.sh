#!/usr/bin/env bash
# Issue "torchtitan, for real": torchtitan's own Llama3 (its 8B widths, LAYERS blocks, SDPA attention) under its
# SimpleFSDP on 2 GPUs, compiled (torch.compile, Inductor) with no overlap pass (a), torchtitan's JIT passes
# (`auto_bucketing`: titan_auto; `transformer_block_bucketing`: tbb_torch, the same Inductor path) and overlapsat's
# plan (p: the default budget; p_free: none), each configuration in a process of its own, `a` first:
#   bash benchmarks/gpu/titan_gpu.sh TAG "CONFIGS"     (e.g. titan "a titan_auto tbb_torch", then "p p_free")
# FLAVOR picks the model: 8B (Llama3, the default) or dsv3-16B (DeepSeek-V3's 16B widths, experts over both ranks).
# torchtitan (0.3.0; on torch 2.11, 0.2.2, the newest that imports there) and its pure-Python dependencies travel
# as wheels in .whl beside the bundle (0.2.2's config manager imports tyro: carry tyro 1.0.17, docstring-parser
# and typeguard too; run of 2026-11-29); its data-loading
# and logging packages, which the model code does not use, are empty stubs (titan_models.stub_missing).
# PROFILE: the pricing (default h200; e.g. benchmarks/gpu/h200_host40.json). EXTRA: more e2e_step.py arguments (e.g. "--resolve-rounds 2", what a user's second run does; decision 82).
# DRY=1 (--device cpu, debugmodel, 2 layers): the same flow on this machine (DeepSeek-V3: FLAVOR=dsv3-debugmodel
# LAYERS=3, with torchtitan 0.2 first on PYTHONPATH).
set -u
[ -n "${DRY:-}" ] && OUT=${OUT:-$(mktemp -d)} || . benchmarks/gpu/device_env.sh
tag=${1:-titan}; configs=${2:-a titan_auto tbb_torch}
if [ -n "${DRY:-}" ]; then
  shape="--device cpu --world 2 --titan ${FLAVOR:-debugmodel} --layers ${LAYERS:-2} --seq 64 --steps 2 --warmup 1 --prof-steps 1"
else
  shape="--world 2 --titan ${FLAVOR:-8B} --layers ${LAYERS:-4} --seq ${SEQ:-4096} --steps 30 --warmup 5 --prof-steps 4"
fi
mkdir -p "$OUT/$tag"
timeout "${LIMIT:-560}" python3 benchmarks/gpu/e2e_step.py $shape --prof-warmup 1 --profile "${PROFILE:-h200}" --solve-s "${SOLVE_S:-12}" ${EXTRA:-} \
  --configs $configs --out "$OUT/$tag" 2>&1 | grep -v -i "warn\|pre_bucket\|^ \|^\[rank" > "$OUT/$tag/log.txt"
grep -E "^($(echo $configs | tr ' ' '|')) " "$OUT/$tag/log.txt" | cut -c1-160
tail -5 "$OUT/$tag/log.txt" | cut -c1-400
