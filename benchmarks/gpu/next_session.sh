#!/usr/bin/env bash
# What #13 still needs from the GPUs (docs/gpu_results.md, "Not done"), as one device call of about 9 minutes
# on 4 H200s (nvidia-h200-x4): the tensor-parallel step (2-way TP x 2-way FSDP, one issue order over both
# groups; d_tie breaks the plain model's ties by the contention model, which matters with several groups) and
# the issue's own configuration (every weight re-gathered in backward) on 2 of the GPUs. Both
# ran on CPU (gloo) with matching losses; neither has run on a GPU. Carry the wheels in .whl.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
timeout 290 python3 benchmarks/gpu/e2e_step.py --world 4 --tp 2 --collective-order chain --out "$OUT/tp" \
  --steps 30 --prof-steps 5 --configs d d_tie c b_three b_iter 2>&1 | grep -v -i "warn\|pre_bucket" \
  | tee "$OUT/log_tp.txt" | cut -c1-200 | grep -v "^ " | tail -6
timeout 260 python3 benchmarks/gpu/e2e_step.py --world 2 --regather --out "$OUT/regather" \
  --steps 30 --prof-steps 5 --configs d c b_three b_iter 2>&1 | grep -v -i "warn\|pre_bucket" \
  | tee "$OUT/log_regather.txt" | cut -c1-200 | grep -v "^ " | tail -5
