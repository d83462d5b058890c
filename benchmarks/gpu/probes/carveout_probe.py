"""What an SM carveout costs the step's GEMMs, on one GPU (#13, benchmarks/results/gpu_runs.md, run 50).

    python benchmarks/gpu/probes/carveout_probe.py --out DIR        (one H100/H200; torch and CuPy, no overlapsat)
    python benchmarks/gpu/probes/carveout_probe.py --read DIR       (the table, here)

The comparable step's one-wave GEMMs run 1.78-2.01 times as long beside NCCL (runs 32, 47, 48). In its traces
they are persistent cuBLAS kernels of 132 CTAs with 213 KB of shared memory each, and NCCL's kernels are 24
CTAs with 104 KB each: no SM holds one of each, so beside a transfer 24 of the GEMM's CTAs wait for SMs. A
carveout plans the GEMM for fewer SMs; what that costs alone decides whether it can pay (wave quantisation
can make it dearer than 132/108).

This probe times the step's six GEMM shapes (bf16, batch 1 x seq 2048, dim 4096, ffn 11008) through cuBLAS,
and through cuBLASLt with carveouts 0-32, each alone and beside an occupier: a CuPy kernel shaped like NCCL's
(24 CTAs x 544 threads, 103,808 B of shared memory) copying memory for OCC_US, launched just before the GEMM
on another stream. The occupier stands in for NCCL's SM use and memory traffic, not its NVLink traffic; its
figures say what the mechanism does, not what a step gains. Durations are the kernels' own, from the
profiler (CUPTI); the grid of each GEMM is kept, to see the carveout honoured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import trace_kernels  # noqa: E402

SEQ, DIM, FFN = 2048, 4096, 11008
# (name, M, K, N, transpose A, transpose B): forward, input gradient and weight gradient of the two sizes
SHAPES = (("qkvo_fwd", SEQ, DIM, DIM, False, True), ("qkvo_dx", SEQ, DIM, DIM, False, False),
          ("qkvo_dw", DIM, SEQ, DIM, True, False), ("mlp_fwd", SEQ, DIM, FFN, False, True),
          ("mlp_dx", SEQ, FFN, DIM, False, False), ("mlp_dw", FFN, SEQ, DIM, True, False))
SETTINGS = (("cublas", 0), ("cublaslt", 0), ("cublaslt", 8), ("cublaslt", 16), ("cublaslt", 24),
            ("cublaslt", 32))
OCC_CTAS, OCC_THREADS, OCC_SMEM = 24, 544, 103808  # NCCL's all_gather/reduce_scatter kernels in run 47
OCC_US = 165.0  # the median all_gather kernel of run 47's (d)
OCC_NAME = "occupy"

OCC_SRC = r"""
extern "C" __global__ void occupy(const float4* __restrict__ src, float4* __restrict__ dst, long long n,
                                  unsigned long long ns) {
  extern __shared__ float4 stage[];
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  long long stride = (long long)gridDim.x * blockDim.x;
  do {
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += stride) {
      stage[threadIdx.x] = src[j];
      dst[j] = stage[threadIdx.x];
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
"""


def measure(out: str, reps: int, smem: int = OCC_SMEM) -> dict:
    import cupy
    import torch
    from torch.profiler import ProfilerActivity, profile

    dev = torch.device("cuda")
    occ = cupy.RawKernel(OCC_SRC, "occupy")
    occ.max_dynamic_shared_size_bytes = smem
    n = OCC_CTAS * OCC_THREADS * 64  # float4s: 13 MiB a pass, many passes per launch
    src, dst = torch.randn(n * 4, device=dev), torch.empty(n * 4, device=dev)
    side = torch.cuda.Stream()
    side_cp = cupy.cuda.ExternalStream(side.cuda_stream)

    def occupy() -> None:
        side.wait_stream(torch.cuda.current_stream())
        with side_cp:
            occ((OCC_CTAS,), (OCC_THREADS,), (cupy.from_dlpack(src), cupy.from_dlpack(dst), cupy.int64(n),
                                               cupy.uint64(int(OCC_US * 1000))), shared_mem=smem)

    occupy()  # compiles the occupier
    torch.cuda.synchronize()
    ops = {}
    for name, m, k, nn, ta, tb in SHAPES:
        a = torch.randn((k, m) if ta else (m, k), device=dev, dtype=torch.bfloat16)
        b = torch.randn((nn, k) if tb else (k, nn), device=dev, dtype=torch.bfloat16)
        ops[name] = (a.t() if ta else a, b.t() if tb else b)
    rows = []
    for lib, carve in SETTINGS:
        torch.backends.cuda.preferred_blas_library(lib)
        torch._C._set_sm_carveout_experimental(carve or None)
        for name, (a, b) in ops.items():
            for _ in range(3):
                torch.mm(a, b)  # warm-up: plans and heuristics cached
            torch.cuda.synchronize()
            for beside in (False, True):
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(reps):
                        if beside:
                            occupy()
                        torch.mm(a, b)
                        torch.cuda.synchronize()
                path = os.path.join(out, "t.json")
                prof.export_chrome_trace(path)
                kern = trace_kernels(path)
                os.remove(path)
                kern.sort(key=lambda e: e["ts"])
                gemm = [e for e in kern if OCC_NAME not in e["name"]]
                occs = [e for e in kern if OCC_NAME in e["name"]]
                rows.append({"lib": lib, "carveout": carve, "shape": name, "beside": beside,
                             "gemm_us": [e["dur"] for e in gemm], "kernel": sorted({e["name"] for e in gemm}),
                             "grid": sorted({str(e["args"].get("grid")) for e in gemm}),
                             "occupier_us": [e["dur"] for e in occs],
                             "occupier_args": occs[0]["args"] if occs else {},
                             # how far the GEMM started after the occupier: it must start inside it
                             "start_after_occupier_us": [g["ts"] - o["ts"] for g, o in zip(gemm, occs)]})
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cupy": cupy.__version__,
           "sms": torch.cuda.get_device_properties(0).multi_processor_count, "reps": reps, "occ_us": OCC_US,
           "occ_smem": smem,
           "rows": rows}
    with open(os.path.join(out, "carveout.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
    return res


def table(res: dict) -> str:
    """GEMM medians (us): alone and beside the occupier, per shape and setting, against cuBLAS alone."""
    med = {(r["lib"], r["carveout"], r["shape"], r["beside"]): statistics.median(r["gemm_us"]) for r in res["rows"]}
    grid = {(r["lib"], r["carveout"], r["shape"]): r["grid"] for r in res["rows"] if not r["beside"]}
    lines = [f"{res['device']}, torch {res['torch']}, {res['sms']} SMs, median of {res['reps']} launches; "
             f"occupier {OCC_CTAS} CTAs of {res.get('occ_smem', OCC_SMEM)} B shared memory for {res['occ_us']:.0f} us",
             "| shape | setting | grid | alone us | beside us | alone / cuBLAS alone | beside / cuBLAS alone |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for name, *_ in SHAPES:
        base = med[("cublas", 0, name, False)]
        for lib, carve in SETTINGS:
            al, bs = med[(lib, carve, name, False)], med[(lib, carve, name, True)]
            lines.append(f"| {name} | {lib}{f' -{carve}' if carve else ''} | {' '.join(grid[(lib, carve, name)])} "
                         f"| {al:.1f} | {bs:.1f} | {al / base:.2f} | {bs / base:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="measure on this machine's GPU and write carveout.json here")
    ap.add_argument("--read", help="print the table of a kept carveout.json's folder")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--occ-smem", type=int, default=OCC_SMEM,
                    help="the occupier's shared memory per CTA; over half an SM's (116000) forces one CTA per SM")
    a = ap.parse_args()
    if a.read:
        with open(os.path.join(a.read, "carveout.json"), encoding="utf-8") as f:
            print(table(json.load(f)))
        return
    if not a.out:
        ap.error("--out or --read is required")
    os.makedirs(a.out, exist_ok=True)
    print(table(measure(a.out, a.reps, a.occ_smem)))


if __name__ == "__main__":
    main()
