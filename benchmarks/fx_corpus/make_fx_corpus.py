"""FX graphs of production-sized training steps, traced with fake tensors (no real memory).

    python benchmarks/fx_corpus/make_fx_corpus.py [NAME ...] [--out DIR]

Each case builds a model at full size under FakeTensorMode on the fake process
group, traces one training step (forward, loss, backward through
`torch.autograd.grad`) with `make_fx` into one ATen FX graph with functional
collectives, imports it with `overlapsat.torch.fx.import_fx` (calibrated H200
pricing) and runs torch's OverlapScheduler on it for the peer order, and
once more with bucketing on (a different graph; its figures only). Writes
`<name>.json.gz` with the graph, the peer's order and the bucketed figures.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time

import torch

from overlapsat.io import graph_to_dict
from overlapsat.simulate import simulate
from overlapsat.torch.capture import ensure_fake_process_group
from overlapsat.torch.fx import import_fx
from overlapsat.torch.fx_peer import bucketed, overlap_scheduler_order

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the repository root
from benchmarks.models import fsdp_tp_llama, llama_fsdp, moe_ep, moe_fsdp_ep  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (world size, model kwargs, batch, seq)
CASES = {
    "llama_tiny_w8": (8, dict(layers=2, dim=256, heads=4, ffn=688, seq=64), 1),
    "llama3_8b_L4_w64": (64, dict(layers=4, dim=4096, heads=32, ffn=14336, seq=8192), 1),
    "llama3_8b_L8_w64": (64, dict(layers=8, dim=4096, heads=32, ffn=14336, seq=8192), 1),
    "llama3_8b_L32_w64": (64, dict(layers=32, dim=4096, heads=32, ffn=14336, seq=8192), 1),
    "llama3_8b_L32_w256": (256, dict(layers=32, dim=4096, heads=32, ffn=14336, seq=8192), 1),
    # scale: a Llama3-70B-sized step (about 20k FX nodes); generated on demand, not committed
    "llama3_70b_L80_w64": (64, dict(layers=80, dim=8192, heads=64, ffn=28672, seq=8192), 1),
    # expert parallel MoE (DeepSeek-like widths: dim 7168, expert FFN 2048, 4 experts per rank), all_to_all
    "moe_L16_w64": (64, dict(model="moe", layers=16, dim=7168, ffn=2048, experts_per_rank=4, seq=4096), 1),
    # DeepSeek-V3-like: 61 layers, dim 7168, 56 heads of 128, expert FFN 2048, a shared expert, 8 routed
    # experts per rank over an EP group of 8, every weight SimpleFSDP-sharded over the other 8 (64 ranks);
    # about 16k nodes, generated on demand; the 8-layer cut is committed
    "moe_dsv3_L8_ep8_w64": (64, dict(model="moe_fsdp", layers=8, dim=7168, heads=56, ffn=2048, experts_per_rank=8,
                                     ep=8, seq=4096), 1),
    "moe_dsv3_L61_ep8_w64": (64, dict(model="moe_fsdp", layers=61, dim=7168, heads=56, ffn=2048, experts_per_rank=8,
                                      ep=8, seq=4096), 1),
    # 2-D: tensor parallel over 8 ranks, SimpleFSDP over 8 (64 ranks), Llama3-8B widths
    "llama3_8b_2d_L8_tp8_w64": (64, dict(model="2d", layers=8, dim=4096, heads=32, ffn=14336, tp=8, seq=8192), 1),
}


def trace(name: str) -> tuple[torch.fx.GraphModule, float]:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    world, kw, batch = CASES[name]
    ensure_fake_process_group(world)
    t0 = time.monotonic()
    kw = dict(kw)
    builder = {"moe": moe_ep, "moe_fsdp": moe_fsdp_ep, "2d": fsdp_tp_llama}.get(kw.pop("model", "llama"), llama_fsdp)
    seq = kw.pop("seq") if builder is not llama_fsdp else kw["seq"]
    with FakeTensorMode():
        model = builder(**kw)
        params = {k: p.detach().requires_grad_(True) for k, p in model.named_parameters()}
        x = torch.randn(batch, seq, kw["dim"])

        def step(params: dict, x: torch.Tensor) -> list:
            out = torch.func.functional_call(model, params, (x,))
            return list(torch.autograd.grad(out.float().pow(2).mean(), list(params.values())))

        gm = make_fx(step)(params, x)
    return gm, time.monotonic() - t0


def main(names: list[str], out: str) -> None:
    names = names or list(CASES)
    if len(names) > 1:  # one process per case: each needs its own (fake) world size
        import subprocess

        for name in names:
            subprocess.run([sys.executable, os.path.abspath(__file__), name, "--out", out], check=True)
        return
    for name in names:
        gm, t_trace = trace(name)
        t0 = time.monotonic()
        g = import_fx(gm, name=name)  # group sizes from the (fake) process groups
        t_import = time.monotonic() - t0
        t0 = time.monotonic()
        peer = overlap_scheduler_order(gm, g)
        t_peer = time.monotonic() - t0
        gm2, _ = trace(name)  # bucketing rewrites the graph: a fresh trace of the same step
        torch_buckets: list[list[str]] = []
        b = bucketed(gm2, g, torch_buckets)
        bucket = None
        if b is not None:  # a different graph: its own figures, in the order torch chose
            r = simulate(b)
            c2 = b.counts()
            bucket = {"nodes": c2["nodes"], "collectives": c2["collective"], "makespan_us": r.makespan,
                      "exposed_us": r.exposed, "peak_memory": r.peak_memory, "buckets": torch_buckets}
        path = os.path.join(out, f"{name}.json.gz")
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump({"graph": graph_to_dict(g), "overlap_scheduler": peer, "bucketed": bucket,
                       "torch_version": torch.__version__,
                       "seconds": {"trace": t_trace, "import": t_import, "peer": t_peer}}, f)
        c = g.counts()
        print(f"{path}: {c['nodes']} nodes, {c['collective']} collectives; trace {t_trace:.1f} s, "
              f"import {t_import:.2f} s, peer {t_peer:.1f} s", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args()
    main(a.names, a.out)
    sys.exit(0)
