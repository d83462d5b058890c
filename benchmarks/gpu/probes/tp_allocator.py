"""The captured order of the tensor-parallel re-gather step on CPU: the allocator's peaks against the FX model's.

    python benchmarks/gpu/probes/tp_allocator.py > benchmarks/results/allocator_cpu_tp_<date>.md

On 4 H200s (2026-11-30, `gpu_2026-11-30_w4/eqshape_w4_tp2_regather`) the FX model read `a`'s peak 6.5 % low. This
compiles a small version of that step (2 layers, dim 512, sequence 256, float32; 2-way TP x 2-way FSDP with the
re-gather) on the fake process group of 4 ranks, captured by overlapsat and left in its order, and reads each
graph's peak from the CPU allocator's own events (`allocator.allocator_peaks`) beside MODEL.md's peak of the FX
graph (`allocator.predicted`). Where the two agree, what the GPU adds is outside the graphs' model.
"""

from __future__ import annotations

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def main() -> None:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()
    import torch
    import torch._inductor.config as icfg

    from benchmarks.gpu.probes.allocator import SMALL, allocator_peaks, predicted, step
    from overlapsat.torch.fx_apply import install_fx

    icfg.force_disable_caches = True
    model, x = step(SMALL, "float32", world=4, tp=2)
    store = tempfile.mkdtemp()
    install_fx("capture", store, collective_order="free")
    peaks = allocator_peaks(torch.compile(model), model, x)
    print(f"# The tensor-parallel re-gather step's captured order on the CPU allocator (torch {torch.__version__})\n")
    print("2 layers, dim 512, sequence 256, float32; 2-way TP x 2-way FSDP, re-gather; fake process group of 4 ranks.\n")
    print("| graph | nodes | allocator B | FX model B | error |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, g, p in zip(("forward", "backward"), predicted(store), peaks):
        fx = g["captured"]["peak_bytes"]
        print(f"| {name} | {g['nodes']:,} | {p:,} | {fx:,} | {100 * (fx / p - 1):+.3f} % |")


if __name__ == "__main__":
    main()
