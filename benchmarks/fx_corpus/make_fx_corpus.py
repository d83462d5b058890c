"""FX graphs of production-sized training steps, traced with fake tensors (no real memory).

    python benchmarks/fx_corpus/make_fx_corpus.py [NAME ...] [--out DIR]

Without names, every case but the held-out ones (`heldout_*`, written to benchmarks/fx_heldout when named).

Each case builds a model at full size under FakeTensorMode on the fake process
group, traces one training step (forward, loss, backward through
`torch.autograd.grad`) with `make_fx` into one ATen FX graph with functional
collectives, imports it with `overlapsat.torch.fx.import_fx` (calibrated H200
pricing) and runs torch's OverlapScheduler on it for the peer order, and
once more with bucketing on (a different graph; its figures only), and once
with only its FSDP pre-bucketing before a scheduler that does not bucket.
It also runs torch's OverlapPreservingBucketer on overlapsat's own order
(`optimize` at level free, `ORDER_SECONDS`, deterministic). Writes
`<name>.json.gz` with the graph, the peer's order, the bucketed and
pre-bucketed figures and torch's buckets for each, the overlap-preserving
buckets of overlapsat's order, and a TBB plan's buckets (one gather bucket
and one reduce-scatter bucket per transformer block, `block_buckets`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time

import torch

from overlapsat import Problem, optimize
from overlapsat.io import graph_to_dict
from overlapsat.simulate import simulate
from overlapsat.torch.capture import ensure_fake_process_group
from overlapsat.torch.fx import import_fx
from overlapsat.torch.fx_peer import bucketed, overlap_preserving_buckets, overlap_scheduler_order

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the repository root
from benchmarks.models import fsdp_tp_llama, llama_fsdp, moe_ep, moe_fsdp_ep  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER_SECONDS = 30.0  # overlapsat's order that torch's overlap-preserving bucketer is run on

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
    # large memory-heavy steps (issue "plans within the memory a user has"): 2-D at 256 ranks (TP 8 x FSDP 32),
    # 24 layers; DeepSeek-V3-like at 128 ranks (EP 8 x FSDP 16), 16 layers
    "llama3_8b_2d_L24_tp8_w256": (256, dict(model="2d", layers=24, dim=4096, heads=32, ffn=14336, tp=8, seq=8192), 1),
    "moe_dsv3_L16_ep8_w128": (128, dict(model="moe_fsdp", layers=16, dim=7168, heads=56, ffn=2048, experts_per_rank=8,
                                        ep=8, seq=4096), 1),
    # backward graphs alone (`_bwd`: AOTAutograd's min-cut partition of the step, Inductor's decompositions,
    # every parameter re-gathered in backward as SimpleFSDP's selective checkpointing does): the kind of graph
    # the held-out 5.5k-16k-node gaps were measured on. 2-D Llama3-8B (32 layers) at 64 and 256 ranks;
    # DeepSeek-V3-like at 64 ranks (32 layers) and 128 ranks (all 61 layers)
    "llama3_8b_2d_L32_tp8_w64_bwd": (64, dict(model="2d", layers=32, dim=4096, heads=32, ffn=14336, tp=8, seq=8192,
                                              bwd=True), 1),
    "llama3_8b_2d_L32_tp8_w256_bwd": (256, dict(model="2d", layers=32, dim=4096, heads=32, ffn=14336, tp=8, seq=8192,
                                                bwd=True), 1),
    "moe_dsv3_L32_ep8_w64_bwd": (64, dict(model="moe_fsdp", layers=32, dim=7168, heads=56, ffn=2048,
                                          experts_per_rank=8, ep=8, seq=4096, bwd=True), 1),
    "moe_dsv3_L61_ep8_w128_bwd": (128, dict(model="moe_fsdp", layers=61, dim=7168, heads=56, ffn=2048,
                                            experts_per_rank=8, ep=8, seq=4096, bwd=True), 1),
    # held out (2026-12-03, `benchmarks/fx_heldout`): shapes no search setting was chosen on, generated after the
    # code they are run on was committed: 1-D at 128 ranks and sequence 4096, 2-D at TP 4 and TP 2, DeepSeek-V3 at
    # 256 ranks, and Llama3-70B widths (the 1-D model's backward alone does not trace: AOTAutograd refuses its RoPE
    # tables, fake constants)
    "heldout_llama3_8b_L16_w128": (128, dict(layers=16, dim=4096, heads=32, ffn=14336, seq=4096), 1),
    "heldout_llama3_8b_2d_L16_tp4_w128_bwd": (128, dict(model="2d", layers=16, dim=4096, heads=32, ffn=14336, tp=4,
                                                        seq=4096, bwd=True), 1),
    "heldout_moe_dsv3_L24_ep8_w256_bwd": (256, dict(model="moe_fsdp", layers=24, dim=7168, heads=56, ffn=2048,
                                                    experts_per_rank=8, ep=8, seq=4096, bwd=True), 1),
    "heldout_llama3_70b_L12_w128": (128, dict(layers=12, dim=8192, heads=64, ffn=28672, seq=4096), 1),
    "heldout_llama3_8b_2d_L40_tp2_w128_bwd": (128, dict(model="2d", layers=40, dim=4096, heads=32, ffn=14336, tp=2,
                                                        seq=8192, bwd=True), 1),
}


HELD_OUT = "heldout_"  # the cases of benchmarks/fx_heldout (docs/plans.md "Held out")


def out_dir(name: str) -> str:
    """Where a case is written by default: the corpus, or the held-out graphs' folder beside it."""
    return os.path.join(os.path.dirname(HERE), "fx_heldout") if name.startswith(HELD_OUT) else HERE


def trace(name: str) -> tuple[torch.fx.GraphModule, float]:
    gm, names, t = trace_named(name)
    return gm, t


def trace_named(name: str) -> tuple[torch.fx.GraphModule, list[str], float]:
    """The traced step, its parameters' names (in placeholder and gradient-output order), and the seconds."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    world, kw, batch = CASES[name]
    ensure_fake_process_group(world)
    t0 = time.monotonic()
    kw = dict(kw)
    builder = {"moe": moe_ep, "moe_fsdp": moe_fsdp_ep, "2d": fsdp_tp_llama}.get(kw.pop("model", "llama"), llama_fsdp)
    seq = kw.pop("seq") if builder is not llama_fsdp else kw["seq"]
    if kw.pop("bwd", False):
        return _trace_backward(builder, kw, batch, seq, t0)
    with FakeTensorMode():
        model = builder(**kw)
        params = {k: p.detach().requires_grad_(True) for k, p in model.named_parameters()}
        x = torch.randn(batch, seq, kw["dim"])

        def step(params: dict, x: torch.Tensor) -> list:
            out = torch.func.functional_call(model, params, (x,))
            return list(torch.autograd.grad(out.float().pow(2).mean(), list(params.values())))

        gm = make_fx(step)(params, x)
    return gm, list(params), time.monotonic() - t0


def _regather(joint: torch.fx.GraphModule, inputs: list, **kw) -> tuple:
    """AOTAutograd's min-cut partition, with every parameter's all_gather and its wait marked for recompute
    (SimpleFSDP's policy: backward gathers each weight again instead of keeping it from forward)."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch.utils.checkpoint import CheckpointPolicy

    for n in joint.graph.nodes:
        if "all_gather_into_tensor" in str(n.target) and all(a.op == "placeholder" for a in n.all_input_nodes):
            for m in [n, *(u for u in n.users if "wait_tensor" in str(u.target))]:
                m.meta["recompute"], m.meta["ac_graph_id"] = CheckpointPolicy.MUST_RECOMPUTE, 0
    return min_cut_rematerialization_partition(joint, inputs, **kw)


def _trace_backward(builder, kw: dict, batch: int, seq: int, t0: float) -> tuple:
    """The backward graph alone, as Inductor receives it: the parameters' names by the backward graph's
    `primals_<i>` placeholders (the forward's i-th input) and gradient outputs (in parameter order)."""
    from torch._functorch.aot_autograd import aot_function
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.fake_tensor import FakeTensorMode

    got: dict = {}

    def keep(which: str):
        def compiler(gm: torch.fx.GraphModule, example_inputs: list):
            got[which] = gm
            return gm
        return compiler

    with FakeTensorMode():
        model = builder(**kw)
        params = {k: p.detach().requires_grad_(True) for k, p in model.named_parameters()}
        x = torch.randn(batch, seq, kw["dim"])

        def loss(params: dict, x: torch.Tensor) -> torch.Tensor:
            return torch.func.functional_call(model, params, (x,)).float().pow(2).mean()

        f = aot_function(loss, fw_compiler=keep("fw"), bw_compiler=keep("bw"), partition_fn=_regather,
                         decompositions=select_decomp_table())
        f(params, x).backward()
    return got["bw"], list(params), time.monotonic() - t0


def block_buckets(gm: torch.fx.GraphModule, param_names: list[str], g) -> list[list[str]]:
    """TBB (transformer-block bucketing): per transformer block, its parameters' all_gathers in one bucket and
    their gradients' reduce_scatters in another (per bucket key), as torchtitan's per-block manual plans do.
    A gather's block is that of the parameter it gathers (its placeholder); a reduce-scatter's, that of the
    gradient output it feeds. Collectives of activations (TP, expert all_to_all) are left alone."""
    import re

    def block(pname: str) -> int | None:
        m = re.search(r"(?:^|\.)(\d+)\.", pname)  # "3.wq" or "layers.3.attn.wq": block 3
        return int(m.group(1)) if m else None

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if any(ph.name.startswith("tangents_") for ph in placeholders):  # a backward graph: primals_<i> by name
        of_input = {f"primals_{i + 1}": block(nm) for i, nm in enumerate(param_names)}
    else:
        of_input = {ph.name: block(nm) for ph, nm in zip(placeholders, param_names)}
    (outs,) = [n for n in gm.graph.nodes if n.op == "output"][0].args
    of_output = {o.name: block(nm) for o, nm in zip(outs, param_names) if isinstance(o, torch.fx.Node)}

    def source(n):  # the placeholder a gather's input comes from, through single-input ops
        while n.op != "placeholder" and len(n.all_input_nodes) == 1:
            n = n.all_input_nodes[0]
        return of_input.get(n.name)

    def sink(n):  # the gradient output a reduce-scatter feeds, through single-user ops
        while n.name not in of_output and len(n.users) == 1 and next(iter(n.users)).op != "output":
            n = next(iter(n.users))
        return of_output.get(n.name)

    groups: dict[tuple, list[str]] = {}
    for c in g.coll_seq:
        nd = g.nodes[c]
        fx_node = next(n for n in gm.graph.nodes if n.name == nd.name)
        if nd.op == "all_gather":
            b = source(fx_node.args[0])
        elif nd.op == "reduce_scatter":
            b = sink(next(iter(fx_node.users)))
        else:
            b = None
        if b is not None:
            groups.setdefault((b, nd.op, nd.group, nd.bucket_key), []).append(nd.name)
    return [ms for ms in groups.values() if len(ms) >= 2]


def main(names: list[str], out: str | None) -> None:
    names = names or [n for n in CASES if not n.startswith(HELD_OUT)]  # the held-out graphs only when named
    if len(names) > 1:  # one process per case: each needs its own (fake) world size
        import subprocess

        for name in names:
            subprocess.run([sys.executable, os.path.abspath(__file__), name, "--out", out or out_dir(name)],
                           check=True)
        return
    for name in names:
        gm, param_names, t_trace = trace_named(name)
        t0 = time.monotonic()
        g = import_fx(gm, name=name)  # group sizes from the (fake) process groups
        tbb = block_buckets(gm, param_names, g)
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
        gm3, _ = trace(name)
        pre_buckets: list[list[str]] = []
        pb = bucketed(gm3, g, pre_buckets, collective_bucketing=False, pre_bucketing=True)
        pre = None
        if pb is not None:
            r = simulate(pb)
            pre = {"nodes": len(pb.nodes), "makespan_us": r.makespan, "exposed_us": r.exposed,
                   "peak_memory": r.peak_memory, "buckets": pre_buckets}
        t0 = time.monotonic()
        mine = optimize(Problem.of(g, None, "free"), time_limit=ORDER_SECONDS)
        gm4, _ = trace(name)
        opb = overlap_preserving_buckets(gm4, g, mine.names)
        kept = {"order_makespan_us": mine.makespan, "order_seconds": ORDER_SECONDS, "level": "free",
                "buckets": opb, "seconds": time.monotonic() - t0} if opb is not None else None
        path = os.path.join(out or out_dir(name), f"{name}.json.gz")
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump({"graph": graph_to_dict(g), "overlap_scheduler": peer, "bucketed": bucket, "tbb": tbb,
                       "prebucketed": pre, "overlap_preserving": kept, "torch_version": torch.__version__,
                       "seconds": {"trace": t_trace, "import": t_import, "peer": t_peer}}, f)
        c = g.counts()
        print(f"{path}: {c['nodes']} nodes, {c['collective']} collectives; trace {t_trace:.1f} s, "
              f"import {t_import:.2f} s, peer {t_peer:.1f} s", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--out", default=None, help="the folder (default: benchmarks/fx_corpus, or benchmarks/fx_heldout "
                    "for the held-out cases, which are made only when named)")
    a = ap.parse_args()
    main(a.names, a.out)
    sys.exit(0)
