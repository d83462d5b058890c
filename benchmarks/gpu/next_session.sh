#!/usr/bin/env bash
# What #13 still needs from 2 H200s (docs/gpu_results.md, "Not done"), as one device call of about 9 minutes:
# interference by size, kind and launch order, then the 8-layer step under every configuration with the fixed
# FX pricing (GEMM FLOPs, fused chains). Carry the wheels in .whl (OR-Tools and its pure-Python dependencies).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
timeout 200 python3 benchmarks/gpu/interference.py --out "$OUT/interference" --pairs 20 2>&1 | tee "$OUT/log_interference.txt" | tail -12
timeout 330 python3 benchmarks/gpu/e2e_step.py --out "$OUT/e2e" --steps 50 --prof-steps 10 \
  --configs d a b_iter b_three c 2>&1 | grep -v -i "warn\|pre_bucket" | tee "$OUT/log_e2e.txt" | cut -c1-300 | tail -8
