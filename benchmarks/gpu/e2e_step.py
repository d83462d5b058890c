"""A compiled SimpleFSDP training step on real GPUs, under each way of ordering it (#13, benchmarks/results/gpu_runs.md).

    python benchmarks/gpu/e2e_step.py --out DIR [--configs a b_iter b_three c d] [--layers 8 ...]

Per configuration, a fresh pair of processes (one per GPU, NCCL) compiles a
Llama-style decoder whose weights are sharded SimpleFSDP-style (each weight
all_gathered through functional collectives where it is used; reduce_scatter
in backward), forward and backward, and times the step:

- a       no communication reordering (Inductor's default);
- b_iter  Inductor's iterative pair (sink_waits_iterative, reorder_communication_preserving_peak_memory);
- b_three Inductor's older three passes (sink_waits, raise_comms, reorder_compute_for_overlap);
- c       the FX-level OverlapScheduler (aten_distributed_optimizations.enable_overlap_scheduling);
- c_bkt   the same with its bucketing on (collective_bucketing, and FSDP pre-bucketing where the torch has the
          switch): torch's best automatic mode (#32). `nccl_kernel_count` shows whether it bucketed;
- c_lc    c_bkt, then torch's swap of all_gathers to copy-engine ones where its rule allows
          (enable_low_contention_collectives), where the torch has it;
- tbb     transformer-block bucketing as a plan: per block and per kind, its collectives in one bucket (`tbb_buckets`),
          ordered by overlapsat's `optimize`, applied by install_fx(plans=True);
- tbb_torch torch's own TBB, as torchtitan's SimpleFSDP runs it on Inductor: `manual_overlap_bucketing` with one
          plan per block as the post-grad pass, Inductor's reordering passes and buffer reuse off
          (`torch_tbb_pass`);
- titan_auto torchtitan's JIT `auto_bucketing` on Inductor, with its settings (graph_trainer/jit_backend.py): torch's
          `schedule_overlap_bucketing` with collective bucketing as the post-grad pass, overlap dependencies
          inserted, buffer reuse and Inductor's peak-memory reordering off;
- p       overlapsat's plan: buckets and order together (`solve_store(plans=PROFILE)`), applied by
          install_fx(plans=True); since decision 63 within each graph's captured order's peak (the default);
- p_free  the same as p with no budget (`memory_budget="none"`): what p was before decision 63;
- p_mem   the same as p, under a memory budget (`--memory-budget`, as d_mem);
- p_ce    the same as p, with each all_gather the measured copy-engine table offers moved by copy engine where
          that is cheaper (`solve_store(transport=--transport)`, MODEL.md "Transport");
- p_co    the same as p, each bucket issued as one coalesced collective (one NCCL group call on the members' own
          tensors, no copies: `solve_store(bucket_layout="coalesced")`, decision 55);
- p_co_mem, p_co_free  p_co under `--memory-budget` (as p_mem), and with no budget (as p_free);
- d       overlapsat at the FX level: both ranks capture, rank 0 solves the store, both apply;
- d_int   the same, solved with collectives priced at their in-step duration (`--comm-slowdown`);
- d_tie   the same as d, with the plain model's ties broken by the contention model (H200_STEP);
- d_mem   the same as d, under a memory budget (`--memory-budget`, a ratio of each captured graph's peak);
- d_hold  the same as d, each solved order then polished by the partial hold (overlapsat.cost.polish_held:
          lower exposure under the fitted hold, MODEL.md's makespan and peak no worse).
- d_kern  the same as d, each solved order then polished by the contention model with GEMMs priced by size
          (STEP_GEMMS, from run 47's trace: benchmarks/gpu/kernel_contention.py), MODEL.md's figures no worse;
          not faster than d on 2 H200s (run 49), so not adopted.

Each: median step time over CUDA events after warm-up, peak memory, and from
a profiler trace the exposed communication (time an NCCL kernel runs while
no other kernel does) and the kernels' durations when overlapped and alone
(interference as the step issues them). For d, overlapsat's predictions for
the same graphs: the captured order (what a runs at the FX level) and the
solved order, plain and with interference factors. `--device cpu` runs the
same on gloo with a tiny model (a smoke test; no kernel timings).
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import os
import socket
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

if os.environ.get("OVERLAPSAT_LOG"):  # the library's lines at that level too (INFO: what its checks read), on stderr
    import logging

    logging.basicConfig(format="%(message)s")
    logging.getLogger("overlapsat").setLevel(os.environ["OVERLAPSAT_LOG"])

from benchmarks.gpu.run_files import stored_schedules  # noqa: E402
from benchmarks.gpu.titan_models import build_titan, gqa_flop_counts  # noqa: E402
from benchmarks.gpu.trace_stats import analyse_trace  # noqa: E402

CONFIGS = ("a", "b_iter", "b_three", "c", "c_bkt", "c_lc", "d", "d_int", "d_tie", "d_mem", "d_hold", "d_kern", "tbb",
           "tbb_torch", "titan_auto", "p", "p_mem", "p_ce", "p_co", "p_co_mem", "p_co_free", "p_free")
PLANS = ("tbb", "p", "p_mem", "p_ce", "p_co", "p_co_mem", "p_co_free", "p_free")  # stores that hold plans
OURS = ("d", "d_int", "d_tie", "d_mem", "d_hold", "d_kern") + PLANS
BUDGETED = ("d_mem", "p_mem", "p_co_mem")  # solved under --memory-budget
COALESCED = ("p_co", "p_co_mem", "p_co_free")  # each bucket one NCCL group call (decision 55)
# d_kern's contention model, measured on the comparable step (run 47, kernel_contention.py, 2026-11-23): GEMMs
# of 68.7 GFLOP (one wave of a persistent kernel) 1.88 times as long beside NCCL, of 184.7 GFLOP 1.09; other
# compute 1.25 (1.25-1.27 in runs 32 and 47); NCCL 1.36 (H200_STEP)
STEP_GEMMS = ((68.7e9, 1.88), (184.7e9, 1.09))


_TP: dict = {}  # the tensor-parallel group, for the two autograd functions below (module level for dynamo)


def _tp_functions():
    """Megatron's pair for a tensor-parallel block, through functional collectives: `enter` is the identity
    forward and an all_reduce of the gradient backward; `leave` all_reduces the partial sums forward and
    passes the gradient through."""
    import torch
    import torch.distributed._functional_collectives as funcol

    def all_reduce(t):
        return funcol.wait_tensor(funcol.all_reduce(t, "sum", _TP["group"]))

    class Enter(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, g):
            return all_reduce(g)

    class Leave(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return all_reduce(t)

        @staticmethod
        def backward(ctx, g):
            return g

    return Enter.apply, Leave.apply


def _groups(world: int, tp: int):
    """(data-parallel group, tensor-parallel group) of this rank on a (world / tp) x tp mesh; every rank
    creates every group, in the same order, as torch requires."""
    import torch.distributed as dist

    rank, dp_of, tp_of = dist.get_rank(), None, None
    for d in range(world // tp):
        g = dist.new_group([d * tp + t for t in range(tp)])
        tp_of = g if rank // tp == d else tp_of
    for t in range(tp):
        g = dist.new_group([d * tp + t for d in range(world // tp)])
        dp_of = g if rank % tp == t else dp_of
    return dp_of, tp_of


def build(dim: int, heads: int, ffn: int, layers: int, seq: int, world: int, device: str, dtype, tp: int = 1,
          regather: bool = False) -> tuple:
    """The decoder. tp > 1: Megatron tensor parallelism over groups of `tp` ranks (attention heads and the
    FFN split, an all_reduce after each half-block) with SimpleFSDP over the rest; regather: each block in
    a selective-checkpoint region that recomputes its all_gathers, so backward gathers every weight again
    (the issue's baseline). The defaults build the step of runs 1-12."""
    import torch
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_gather_tensor_autograd

    dp = world // tp
    dp_grp = None
    if tp > 1:
        dp_grp, _TP["group"] = _groups(world, tp)
        enter, leave = _tp_functions()
    else:
        def enter(t):
            return t
        leave = enter
    hd = dim // heads
    inv = 1.0 / (10000 ** (torch.arange(0, hd // 2, device=device).float() / (hd // 2)))
    ang = torch.outer(torch.arange(seq, device=device).float(), inv)
    cos, sin = ang.cos()[None, None].to(dtype), ang.sin()[None, None].to(dtype)

    def rope(t):
        a, b = t[..., : hd // 2], t[..., hd // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

    def norm(x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w

    def shard(rows: int, cols: int | None = None):
        shape = (rows // dp,) if cols is None else (rows // dp, cols)
        return torch.nn.Parameter((torch.randn(shape, device=device) * 0.02 + (1.0 if cols is None else 0.0)).to(dtype))

    def gather(p):
        if dp == 1:
            return p
        return all_gather_tensor_autograd(p, 0, dp_grp if dp_grp is not None else dist.group.WORLD)

    lh = heads // tp  # this rank's heads

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wq, self.wk, self.wv = (shard(dim // tp, dim) for _ in range(3))
            self.wo = shard(dim, dim // tp)
            self.w1, self.w3, self.w2 = shard(ffn // tp, dim), shard(ffn // tp, dim), shard(dim, ffn // tp)
            self.n1, self.n2 = shard(dim), shard(dim)

        def body(self, x):
            wq, wk, wv, wo, w1, w3, w2, n1, n2 = (gather(p) for p in (
                self.wq, self.wk, self.wv, self.wo, self.w1, self.w3, self.w2, self.n1, self.n2))
            b, s, _ = x.shape
            h = enter(norm(x, n1))
            q, k, v = ((h @ w.t()).view(b, s, lh, hd).transpose(1, 2) for w in (wq, wk, wv))
            a = torch.nn.functional.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True)
            x = x + leave(a.transpose(1, 2).reshape(b, s, lh * hd) @ wo.t())
            h = enter(norm(x, n2))
            return x + leave((torch.nn.functional.silu(h @ w1.t()) * (h @ w3.t())) @ w2.t())

        def forward(self, x):
            if not regather:
                return self.body(x)
            from functools import partial

            from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

            return checkpoint(self.body, x, use_reentrant=False,
                              context_fn=partial(create_selective_checkpoint_contexts, _regather_policy))

    return torch.nn.Sequential(*[Block() for _ in range(layers)])


def _regather_policy(ctx, op, *args, **kwargs):
    """SimpleFSDP's selective checkpointing: recompute the parameter all_gathers and their waits in
    backward, save everything else. A wait is a parameter's when it waits on a 1-D or 2-D tensor; the
    tensor-parallel all_reduces wait on 3-D activations, which stay saved (recomputing their wait alone
    would wait in backward on a collective of the forward graph)."""
    import torch
    from torch.utils.checkpoint import CheckpointPolicy

    gathers, waits = set(), set()
    for ns in ("_c10d_functional", "_c10d_functional_autograd"):  # the autograd namespace has no wait_tensor
        for name, into in (("all_gather_into_tensor", gathers), ("wait_tensor", waits)):
            packet = getattr(getattr(torch.ops, ns), name, None)
            if packet is not None:
                into.add(packet.default)
    if op in gathers or (op in waits and args and getattr(args[0], "dim", lambda: 3)() <= 2):
        return CheckpointPolicy.MUST_RECOMPUTE
    return CheckpointPolicy.PREFER_SAVE


def _block_stacks(graph) -> dict:
    """Each node's module stack as `manual_overlap_bucketing` reads it, re-written so that a node inside
    Block i sits under "layers.i". Dynamo names the compiled Sequential's children "L['fn'].0" on some
    versions, which torch's graph view cannot split into blocks; torchtitan gives the pass its modules'
    names for the same reason (annotate_module_fqns). Returns what it replaced, for `torch_tbb_pass` to put back."""
    import re

    import torch

    saved = {}
    layer = re.compile(r"layers(?:\.|'\]\._modules\[')\d+(?:'\])?$")
    for n in graph.nodes:
        key = "nn_module_stack" if n.meta.get("nn_module_stack") else "fwd_nn_module_stack"
        stack = n.meta.get(key)
        blocks = [path for path, cls in (stack or {}).values()
                  if getattr(cls, "__name__", "") in ("Block", "TransformerBlock")  # this file's; torchtitan's
                  or layer.search(path)]  # torchtitan's blocks by name, also under --loss-in-graph's wrapper
        digits = re.findall(r"\d+", blocks[-1]) if blocks else []
        if not digits:
            continue
        saved[n] = (key, stack)
        n.meta[key] = {"layers": ("L['self']._modules['layers']", torch.nn.Sequential),
                       "block": (f"L['self']._modules['layers']._modules['{digits[-1]}']", torch.nn.Module)}
    return saved


def torch_tbb_pass(graph, layers: int, sink: list):
    """tbb_torch's post-grad pass: torch's `manual_overlap_bucketing` over one plan per block ("layers.i"),
    with the overlap dependencies torchtitan's Inductor path inserts where this torch has the switch. Appends
    (collective starts before, after, what the pass was given) to `sink`."""
    import inspect

    from torch._inductor.fx_passes.overlap_manual_scheduling import manual_overlap_bucketing

    from overlapsat.torch.agree import collective_sequence  # the collectives a graph issues, waits left out

    before = len(collective_sequence(graph))
    kw = {"module_bucket_plans": [f"layers.{i}" for i in range(layers)]}
    if "insert_overlap_deps" in inspect.signature(manual_overlap_bucketing).parameters:
        kw["insert_overlap_deps"] = True
    saved = _block_stacks(graph)
    blocks = len({n.meta[key]["block"][0] for n, (key, _) in saved.items()})
    try:
        manual_overlap_bucketing(graph.owning_module, **kw)
    finally:
        for n, (key, stack) in saved.items():
            n.meta[key] = stack
    sink.append({"collectives_before": before, "collectives_after": len(collective_sequence(graph)), "blocks_seen": blocks,
                 "kwargs": sorted(kw), "graph": graph_peak(graph)})
    return graph


def graph_peak(graph) -> dict:
    """MODEL.md's peak of an FX graph in its own order (what torch's passes left it in), with its inputs: the
    prediction for a configuration whose graphs overlapsat neither stores nor schedules (torch's)."""
    from overlapsat import simulate
    from overlapsat.torch.fx import import_fx

    try:
        g = import_fx(inline_control_deps(graph))
        if os.environ.get("OSAT_SAVE_TORCH_GRAPHS"):  # for offline probes (probes/inline_probe.py --graph)
            from overlapsat import save_graph

            save_graph(g, os.path.join(os.environ["OSAT_SAVE_TORCH_GRAPHS"], f"g{os.getpid()}_{len(g)}.graph.json"))
        return {"nodes": len(g), "collectives": len(g.coll_seq), "peak_bytes": simulate(g).peak_memory,
                "primals_bytes": g.meta.get("primals_bytes")}
    except Exception as e:  # noqa: BLE001 - the timings stand without it
        if os.environ.get("OSAT_DUMP_FAILED"):
            with open(os.path.join(os.environ["OSAT_DUMP_FAILED"], f"g{os.getpid()}_{len(graph.nodes)}.txt"), "w") as f:
                f.write(str(graph))
        return {"error": f"{type(e).__name__}: {e}"[:500]}


def inline_control_deps(graph):
    """A copy of `graph` with each of torch's `control_deps` wrappers (its scheduler's ordering dependencies) put
    back as the operation it wraps: the order stays, and the FX importer reads the collectives again."""
    import torch.fx as fx

    try:
        from torch._inductor.fx_passes.control_dependencies import control_deps
    except ImportError:  # a torch without them has none to inline
        return graph
    gm = graph.owning_module
    out = fx.Graph(owning_module=gm)
    env: dict = {}
    for n in graph.nodes:
        if n.op == "call_function" and n.target is control_deps:
            sub = getattr(gm, n.args[1].target)
            places = [m for m in sub.graph.nodes if m.op == "placeholder"]
            body = next(m for m in sub.graph.nodes if m.op == "call_function")
            bind = {ph: env[a] if isinstance(a, fx.Node) else a for ph, a in zip(places, n.args[2:])}
            args, kwargs = fx.node.map_arg((body.args, body.kwargs), bind.__getitem__)
            new = out.create_node("call_function", body.target, args, kwargs, name=n.name)  # (deduplicated)
            new.meta = dict(n.meta)
            env[n] = new
        else:
            env[n] = out.node_copy(n, lambda m: env[m])
    return out


def peek_overlap_scheduling(sink: list) -> None:
    """Record each graph's peak as torch's overlap scheduler leaves it (c, c_bkt, c_lc, titan_auto): the pass is looked up
    when post-grad runs, so wrapping the module's function is enough."""
    import torch._inductor.fx_passes.overlap_scheduling as osched
    import torch._inductor.fx_passes.post_grad as post_grad

    name = "schedule_overlap_bucketing_from_inductor_configs"
    inner = getattr(osched, name, None)
    if inner is None:  # a torch without it: no prediction, said so
        sink.append({"error": f"this torch has no overlap_scheduling.{name}"})
        return

    def wrapped(gm, *args, **kwargs):
        out = inner(gm, *args, **kwargs)
        sink.append(graph_peak((out if out is not None else gm).graph))
        return out

    setattr(osched, name, wrapped)
    if hasattr(post_grad, name):  # where post-grad imported it at module level
        setattr(post_grad, name, wrapped)


def set_config(cfg: str, gpu: bool, layers: int = 8, sink: list | None = None) -> dict:
    """Inductor's settings for `cfg`; what was set, by name (a switch this torch lacks is left out and named
    under "missing"). tbb_torch: `torch_tbb_pass` over `layers` blocks, reporting into `sink`."""
    import functools

    import torch._inductor.config as icfg

    done: dict = {}
    if cfg == "tbb_torch":  # torchtitan's Inductor path for transformer_block_bucketing
        icfg.reorder_for_peak_memory = False
        icfg.allow_buffer_reuse = False
        icfg.post_grad_custom_post_pass = functools.partial(torch_tbb_pass, layers=layers,
                                                            sink=sink if sink is not None else [])
        done.update(reorder_for_peak_memory=False, allow_buffer_reuse=False,
                    post_grad_custom_post_pass="manual_overlap_bucketing")
        if not gpu:
            _cpu_estimates(icfg)

    if cfg == "titan_auto":  # torchtitan's JIT "auto_bucketing" on Inductor (graph_trainer/jit_backend.py), as set there
        import torch._inductor.fx_passes.overlap_scheduling as osched

        gqa_flop_counts()

        dist_opts = icfg.aten_distributed_optimizations
        dist_opts.collective_bucketing = True
        dist_opts.insert_overlap_deps = True
        icfg.allow_buffer_reuse = False
        icfg.reorder_for_peak_memory = False

        def auto_bucketing(graph):  # looked up when it runs: `peek_overlap_scheduling` records what it leaves
            return osched.schedule_overlap_bucketing_from_inductor_configs(graph.owning_module)

        icfg.post_grad_custom_post_pass = auto_bucketing
        done.update(collective_bucketing=True, insert_overlap_deps=True, allow_buffer_reuse=False,
                    reorder_for_peak_memory=False, post_grad_custom_post_pass="schedule_overlap_bucketing")
        if not gpu:
            _cpu_estimates(icfg)
    icfg.reorder_for_compute_comm_overlap = cfg in ("b_iter", "b_three")
    if cfg == "b_iter":
        icfg.reorder_for_compute_comm_overlap_passes = ["sink_waits_iterative",
                                                        "reorder_communication_preserving_peak_memory"]
    elif cfg == "b_three":
        icfg.reorder_for_compute_comm_overlap_passes = ["sink_waits", "raise_comms", "reorder_compute_for_overlap"]
    if cfg in ("c", "c_bkt", "c_lc"):
        dist_opts = icfg.aten_distributed_optimizations
        want = {"enable_overlap_scheduling": True}
        if cfg in ("c_bkt", "c_lc"):
            want.update(collective_bucketing=True, pre_bucketing_fsdp_collectives=True)
        if cfg == "c_lc":
            want["enable_low_contention_collectives"] = True
        if not gpu:
            _cpu_estimates(icfg)
        for k, v in want.items():
            if hasattr(dist_opts, k):
                setattr(dist_opts, k, v)
                done[k] = v
            else:
                done.setdefault("missing", []).append(k)
    return done


def _cpu_estimates(icfg) -> None:
    """The CPU smoke test: no benchmarking, and no Triton to read a GPU's bandwidth from."""
    import torch._inductor.utils as iu

    dist_opts = icfg.aten_distributed_optimizations
    for k, v in (("compute_estimator", "analytical"), ("enable_fusion_regions", False)):
        if hasattr(dist_opts, k):
            setattr(dist_opts, k, v)
    iu.get_gpu_dram_gbps = lambda: 3350.0  # an H100's, for torch's roofline estimates only
    try:  # where torch's runtime estimation holds its own reference (reached outside Inductor's lowering)
        import torch.utils._runtime_estimation as rt

        if hasattr(rt, "get_gpu_dram_gbps"):
            rt.get_gpu_dram_gbps = iu.get_gpu_dram_gbps
    except ImportError:
        pass


def worker(rank: int, world: int, cfg: str, a: argparse.Namespace, port: int, store: str, out: str) -> None:
    import torch
    import torch.distributed as dist

    gpu = a.device == "cuda"
    if os.environ.get("OSAT_STACKS_EVERY") or os.environ.get("OSAT_WORKER_LIMIT"):  # a run that stalls says
        import faulthandler  # where (every rank's stacks on stderr) and, given a limit, ends there
        import sys

        limit = os.environ.get("OSAT_WORKER_LIMIT")
        faulthandler.dump_traceback_later(float(limit or os.environ["OSAT_STACKS_EVERY"]), repeat=not limit,
                                          file=sys.stderr, exit=bool(limit))
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"ind_{cfg}_{rank}_")
    if gpu:
        torch.cuda.set_device(rank)
    if a.fake:  # --fake: this one process is rank 0 of `world`; its collectives move nothing
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    else:
        dist.init_process_group("nccl" if gpu else "gloo", rank=rank, world_size=world)
    # NCCL's first barrier caches a 1-byte tensor (one 512-B block) for the process group's life
    # (benchmarks/results/gpu_2026-12-01_barrier): only the configurations that capture and solve a store called
    # barrier before their timed steps, so their peaks read 512 B above `a`'s. Every configuration holds it now.
    dist.barrier()
    import torch._inductor.config as icfg

    icfg.force_disable_caches = True
    if a.no_buffer_reuse:  # Inductor's wrapper then frees each buffer at its last use (after runs 34-38); for
        icfg.allow_buffer_reuse = False  # overlapsat's configurations install_fx(buffer_reuse=False) sets it too
    if gpu and a.blas_lt:  # cuBLASLt for every matmul: the only path that honours an SM carveout
        torch.backends.cuda.preferred_blas_library("cublaslt")
    if gpu and a.sm_carveout:  # GEMMs planned for the SMs NCCL leaves them (after run 49, benchmarks/results/gpu_runs.md)
        torch._C._set_sm_carveout_experimental(a.sm_carveout)
    device = f"cuda:{rank}" if gpu else "cpu"
    dtype = torch.bfloat16 if gpu else torch.float32
    torch.manual_seed(0)
    if a.titan:
        model, x = build_titan(a.titan, a.layers, a.seq, world, device)
    else:
        model = build(a.dim, a.heads, a.ffn, a.layers, a.seq, world, device, dtype, a.tp, a.regather)
        x = torch.randn(1, a.seq, a.dim, device=device, dtype=dtype)
    scored = scored_model(model) if a.loss_in_graph else model  # what torch.compile sees

    def loss_of(f, inp):
        return f(inp) if a.loss_in_graph else f(inp).float().pow(2).mean()

    tbb_passes: list = []  # tbb_torch: what torch's pass did to each graph
    res: dict = {"config": cfg, "rank": rank, "inductor_settings": set_config(cfg, gpu, a.layers, tbb_passes),
                 "torch_tbb": tbb_passes}
    if cfg in ("c", "c_bkt", "c_lc", "titan_auto"):
        res["torch_graphs"] = []  # each graph's peak as torch's scheduler leaves it (the prediction)
        peek_overlap_scheduling(res["torch_graphs"])
    applied: list = []
    if cfg in OURS:
        from overlapsat.store import solve_store
        from overlapsat.torch.fx_apply import install_fx

        slow = a.comm_slowdown if cfg == "d_int" else 1.0
        store = os.path.join(store, cfg)
        install_fx("capture", store, profile=a.profile, comm_slowdown=slow, collective_order=a.collective_order,
                   inline=a.fx_inline)
        t0 = time.monotonic()
        f = torch.compile(scored)
        loss_of(f, x).backward()
        res["capture_s"] = time.monotonic() - t0
        del f  # the capture compile's module: nothing of it may stay allocated into the timed steps
        import gc

        gc.collect()
        if gpu:
            res["allocated_after_capture_bytes"] = torch.cuda.memory_allocated()
        dist.barrier()
        if rank == 0 and not a.store_from:  # --store-from: the schedules of an earlier run, applied as they are
            t0 = time.monotonic()
            from overlapsat.cost import H200_STEP

            tie = {"interference": H200_STEP} if cfg == "d_tie" else {}
            if cfg in BUDGETED or (cfg in PLANS and a.plan_budget is not None):
                ratio = a.memory_budget if cfg in BUDGETED else a.plan_budget
                tie = {"memory_budget": f"{ratio!r}x"}  # a ratio of the captured order's peak (decision 8)
            if cfg == "tbb":
                res["solved"] = tbb_store(store, a.collective_order, a.profile, a.solve_s, len(PARAMS_PER_BLOCK),
                                          tie.get("memory_budget"))
            else:
                if cfg in PLANS:  # tbb is solved above
                    tie["plans"] = a.profile
                if cfg in COALESCED:
                    tie["bucket_layout"] = "coalesced"
                if cfg in ("p_free", "p_co_free"):
                    tie["memory_budget"] = "none"
                if cfg == "p_ce":
                    tie["transport"] = a.transport
                outs = solve_store(store, time_limit=a.solve_s, collective_order=a.collective_order, **tie)
                res["solved"] = [o.as_dict() for o in outs]
            if cfg in ("d_hold", "d_kern"):
                res["hold_polished" if cfg == "d_hold" else "kern_polished"] = polish_store(store, a.collective_order,
                                                                                          cfg)
            res["solve_s"] = time.monotonic() - t0
        dist.barrier()
        p = install_fx("apply", store, profile=a.profile, pin=a.pin, comm_slowdown=slow,
                       collective_order=a.collective_order, buffer_reuse=not a.no_buffer_reuse, plans=cfg in PLANS,
                       inline=a.fx_inline)
        p.on_apply = lambda g, order: applied.append(len(order))
        if rank == 0:  # Inductor's peak after fusion, per graph (after run 33),
            # then the library's own check (decisions.md 21), which install_fx put there
            res["after_fusion_peaks"] = []

            keep = os.path.join(out, f"after_fusion_{cfg}") if a.snapshot else None

            def hook(nodes, prev=icfg._post_fusion_custom_pass, sink=res["after_fusion_peaks"]):
                out = prev(nodes) if prev is not None else nodes  # overlapsat's check first: what is emitted
                after_fusion(out, sink, keep)
                return out

            icfg._post_fusion_custom_pass = hook
        torch._dynamo.reset()
        for prm in model.parameters():
            prm.grad = None
    elif rank == 0:  # the same reading for the configurations without a store (torch's, `a`): their prediction
        res["after_fusion_peaks"] = []

        def hook(nodes, prev=icfg._post_fusion_custom_pass, sink=res["after_fusion_peaks"]):
            out = prev(nodes) if prev is not None else nodes
            after_fusion(emitted_order(out), sink)  # read on the order Inductor's re-sorting by memory will emit
            return out

        icfg._post_fusion_custom_pass = hook
        if icfg.post_grad_custom_post_pass is None:  # `a`: no FX pass binds routed sizes (decision 89), so bind
            icfg.post_grad_custom_post_pass = bind_routed_sizes
    compiled = torch.compile(scored)

    def step():
        loss = loss_of(compiled, x)
        loss.backward()
        for prm in model.parameters():
            prm.grad = None

    t0 = time.monotonic()
    for _ in range(a.warmup):
        step()
    res["resolved"] = []
    rounds_apply = (cfg in ("p", "p_co", "p_ce") and a.plan_budget is None) or cfg in ("p_mem", "p_co_mem")
    for _ in range(a.resolve_rounds if rounds_apply and not a.store_from else 0):
        # decisions 82 and 86: a plan found over its budget after fusion (the default, or --memory-budget's ratio
        # for p_mem and p_co_mem) is set aside; solve-cache solves it again under a tighter FX budget, and the step
        # compiles again (what a user's next run does)
        stale = [0]
        if rank == 0:
            from overlapsat.io import load_graph
            from overlapsat.store import OVER, graph_path, recorded, solve_store, usable_stored

            stale = [sum(usable_stored(store, fp, load_graph(graph_path(store, fp)),
                                       a.collective_order, plans=True)[1].startswith(OVER) for fp in recorded(store))]
        dist.broadcast_object_list(stale, src=0)
        if not stale[0]:
            break
        if rank == 0:
            tie = {"plans": a.profile, **({"bucket_layout": "coalesced"} if cfg in COALESCED else {}),
                   **({"memory_budget": f"{a.memory_budget!r}x"} if cfg in BUDGETED else {})}  # decision 86
            res["resolved"].append([o.as_dict() for o in solve_store(store, time_limit=a.solve_s,
                                                                     collective_order=a.collective_order, **tie)])
            stale = [sum(o["outcome"] == "replaced_over_budget" for o in res["resolved"][-1])]
        dist.broadcast_object_list(stale, src=0)
        dist.barrier()
        torch._dynamo.reset()  # compiled again: a plan set aside leaves its graph in the captured order
        applied.clear()
        compiled = torch.compile(scored)
        for _ in range(a.warmup):
            step()
        if not stale[0]:  # nothing was solved again (no plan fits the tighter budget): no more rounds
            break
    icfg._post_fusion_custom_pass = None
    if gpu:
        torch.cuda.synchronize()
    res["compile_and_warmup_s"] = time.monotonic() - t0
    res["applied_graphs"] = applied
    if gpu:
        res["allocated_before_steps_bytes"] = torch.cuda.memory_allocated()  # what the peak starts from
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(a.steps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        res["step_ms_median"] = statistics.median(times)
        res["step_ms_all"] = times
        res["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
        try:
            res["memory"] = memory_phases(compiled, x, model, a.loss_in_graph)
        except Exception as e:  # noqa: BLE001 - the step timings stand without it
            res["memory"] = {"error": f"{type(e).__name__}: {e}"}
        if a.snapshot:  # every rank runs the step (its collectives need the peer); rank 0 keeps the history
            try:
                res["snapshot"] = memory_snapshot(step, os.path.join(out, f"snapshot_{cfg}"), rank == 0)
            except Exception as e:  # noqa: BLE001 - the step timings stand without it
                res["snapshot"] = {"error": f"{type(e).__name__}: {e}"}
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.prof_warmup + a.prof_steps):
                step()
            torch.cuda.synchronize()
        tr = os.path.join(tempfile.mkdtemp(), "trace.json")
        prof.export_chrome_trace(tr)
        try:
            res["profile"] = analyse_trace(tr, a.prof_warmup + a.prof_steps, skip=a.prof_warmup)
        except Exception as e:  # noqa: BLE001 - the step timings stand without it
            res["profile"] = {"error": f"{type(e).__name__}: {e}"}
        if (rank == 0 or a.trace_all_ranks) and cfg in a.keep_traces:  # the same host clock on every rank
            name = f"trace_{cfg}.json.gz" if rank == 0 else f"trace_{cfg}_rank{rank}.json.gz"
            with open(tr, "rb") as fi, gzip.open(os.path.join(out, name), "wb") as fo:
                fo.write(fi.read())
    else:
        t0 = time.monotonic()
        for _ in range(a.steps):
            step()
        res["step_ms_median"] = 1e3 * (time.monotonic() - t0) / a.steps
    ref = model(x).float().pow(2).mean().item()  # eager loss of the same weights: the compiled one must match
    res["loss_eager"] = ref
    res["loss_compiled"] = loss_of(compiled, x).item()
    with open(os.path.join(out, f"res_{cfg}_{rank}.json"), "w", encoding="utf-8") as fo:
        json.dump(res, fo)
    dist.barrier()
    dist.destroy_process_group()


def scored_model(model):
    """--loss-in-graph: the model and its loss as one module, so that torch.compile traces the loss and its
    backward into the step's two graphs and the whole step's memory is the graphs' (the loss otherwise runs
    eagerly, holding fp32 logit-sized tensors that no captured graph sees)."""
    import torch

    class Scored(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, inp):
            return self.inner(inp).float().pow(2).mean()

    return Scored(model)


def bind_routed_sizes(gm) -> None:
    """A post-grad pass that changes nothing: it binds the graph's routed sizes at balanced routing (decision 89),
    as the FX pass's import does, so that the reading after fusion of a configuration without that pass (`a`)
    prices them alike."""
    from overlapsat.torch.fx import bind_routed_sizes as bind

    try:
        bind(gm if hasattr(gm, "nodes") else gm.graph)
    except Exception:  # noqa: BLE001 - a measurement aid: the compile goes on unbound
        pass


def emitted_order(nodes):
    """For a reading only: the order Inductor will emit `nodes` in where its `reorder_for_peak_memory` is on (it
    runs after the post-fusion pass; decision 111), its planning info left as it was; else `nodes`."""
    import torch._inductor.config as icfg

    from overlapsat.torch.after_fusion import inductor_memory_order, planning_info_restored

    if not icfg.reorder_for_peak_memory:
        return nodes
    try:
        with planning_info_restored(nodes):
            return inductor_memory_order(nodes)
    except Exception:  # noqa: BLE001 - read as fused
        return nodes


def after_fusion(nodes, sink: list, save_dir: str | None = None):
    """Inductor's `_post_fusion_custom_pass`: the peak of its nodes after fusion, in the order it will emit them
    (scheduler-level import), appended to `sink` as (collectives, peak bytes); the nodes go on unchanged.
    save_dir: also keep the imported graph there (`after_fusion_<collectives>.graph.json`; its nodes and
    buffers carry Inductor's names, as the generated code does), for a memory snapshot to be compared with."""
    from overlapsat import save_graph, simulate
    from overlapsat.torch.after_fusion import plan_memory, planning_info_restored
    from overlapsat.torch.importer import import_snodes
    from overlapsat.torch.routed import inductor_sizes_bound

    try:  # a measurement: it must never cost the compile, nor change it (planning info restored after)
        with planning_info_restored(nodes), inductor_sizes_bound():  # routed sizes as bound (decision 89)
            plan_memory(nodes)  # the sizes and successors the importer reads (Inductor's memory planning)
            g = import_snodes(nodes, durations=lambda _nd: 1.0, held_gradients=True)
        sink.append((len(g.coll_seq), simulate(g).peak_memory))
        if save_dir is not None:
            os.makedirs(save_dir, exist_ok=True)
            save_graph(g, os.path.join(save_dir, f"after_fusion_{len(g.coll_seq)}.graph.json"))
    except Exception as e:  # noqa: BLE001
        sink.append(("error", f"{type(e).__name__}: {e}"))
    return nodes


PARAMS_PER_BLOCK = ("wq", "wk", "wv", "wo", "w1", "w3", "w2", "n1", "n2")  # Block's parameters, as it gathers them


def tbb_buckets(g, per_block: int) -> list[list[str]]:
    """TBB on a captured graph of this step: per bucket key (kind, group, dtype, reduce op), its collectives in
    the graph's own order cut into runs of `per_block`, one run per transformer block. Each Block gathers its
    parameters together (`Block.body`) and backward reduce-scatters one block's gradients before the next's, so a
    run is one block's; other kinds (the tensor-parallel all_reduces), and a key whose count is not a multiple of
    `per_block`, are left unbucketed. A graph's runs are checked for legality by the caller."""
    by_key: dict = {}
    for c in g.coll_seq:
        nd = g.nodes[c]
        if nd.op in ("all_gather", "reduce_scatter"):
            by_key.setdefault((nd.op, nd.group, nd.bucket_key), []).append(nd.name)
    out = []
    for names in by_key.values():
        if len(names) % per_block == 0:
            out += [names[i: i + per_block] for i in range(0, len(names), per_block)]
    return out


def legal_tbb(relaxed, per_block: int) -> tuple[list, int]:
    """The legal buckets of `tbb_buckets` on a problem's relaxed graph, and how many runs it made."""
    from overlapsat.plan import Bucket, bucket_problems

    runs = [Bucket(tuple(r)) for r in tbb_buckets(relaxed, per_block)]
    return [b for b in runs if not bucket_problems(relaxed, [b])], len(runs)


def tbb_store(store: str, collective_order: str, profile: str, time_limit: float, per_block: int,
              memory_budget=None) -> list[dict]:
    """The TBB plan of every captured graph: its block buckets (`tbb_buckets`, the legal ones), ordered by
    `optimize` on the bucketed graph (priced by `profile`), saved as the graph's plan."""
    from overlapsat import Problem, load_graph, optimize, save_schedule
    from overlapsat.cost import cost_model
    from overlapsat.plan import materialize
    from overlapsat.store import graph_path, recorded, schedule_path

    price = cost_model(profile).duration
    out = []
    for fp in recorded(store):
        g = load_graph(graph_path(store, fp))
        prob = Problem.of(g, memory_budget, collective_order)
        legal, runs = legal_tbb(prob.relaxed, per_block)
        r = optimize(prob.on(materialize(prob.relaxed, legal, price)), time_limit=time_limit)
        save_schedule(schedule_path(store, fp), g, [r.graph.names[i] for i in r.order], buckets=legal,
                      metrics=r.summary())
        out.append({"fingerprint": fp, "buckets": len(legal), "runs": runs, "status": r.status.value,
                    "makespan_us": r.makespan, "peak_bytes": r.peak_memory})
    return out


def polish_store(store: str, collective_order: str, cfg: str = "d_hold") -> list[dict]:
    """d_hold: replace each stored schedule by its partial-hold polish; d_kern: by its polish under the
    contention model with GEMMs priced by size (STEP_GEMMS). What each graph's figures became."""
    from overlapsat import load_graph, save_schedule
    from overlapsat.cost import H200_STEP, Interference, polish_contended, polish_held

    kern = Interference(1.25, H200_STEP.comm_slowdown, STEP_GEMMS)
    from overlapsat.store import graph_path, recorded, schedule_path, usable_schedule

    out = []
    for fp in recorded(store):
        g = load_graph(graph_path(store, fp))
        order, why = usable_schedule(store, fp, g, collective_order)
        if order is None:
            out.append({"fingerprint": fp, "skipped": why})
            continue
        if cfg == "d_kern":
            p = polish_contended(g, order, kern, collective_order=collective_order, max_evaluations=20000)
            out.append({"fingerprint": fp, "contended_us": [p.contended_before, p.contended_after], "moves": p.moves})
        else:
            p = polish_held(g, order, collective_order=collective_order)
            out.append({"fingerprint": fp, "hold_exposed_us": [p.contended_before, p.contended_after],
                        "moves": p.moves})
        save_schedule(schedule_path(store, fp), g, [g.names[i] for i in p.order])
    return out


def memory_phases(compiled, x, model, loss_in_graph: bool = False) -> dict:
    """One more step, its allocator peaks split by phase (after run 33 overshot its budget at `free`,
    benchmarks/results/gpu_runs.md): the forward graph's peak, the whole step's, and the allocator's own peak figures,
    `requested_bytes` (what the kernels asked for, before the allocator rounds a block up or leaves it unsplit)
    beside `allocated_bytes` (what max_memory_allocated reads), so a gap between them is the allocator's and a
    gap between requested and predicted is the graph's."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    loss = compiled(x) if loss_in_graph else compiled(x).float().pow(2).mean()
    torch.cuda.synchronize()
    out = {"forward_peak_bytes": torch.cuda.max_memory_allocated()}
    loss.backward()
    torch.cuda.synchronize()
    st = torch.cuda.memory_stats()
    out.update({k.replace(".all.", "_"): st.get(k) for k in ("requested_bytes.all.peak", "allocated_bytes.all.peak",
                                                             "active_bytes.all.peak", "reserved_bytes.all.peak")})
    out["step_peak_bytes"] = torch.cuda.max_memory_allocated()
    for prm in model.parameters():
        prm.grad = None
    return out


def memory_snapshot(step, out: str, keep: bool = True) -> dict:
    """One more `step()` (forward, backward, gradients dropped) under the allocator's history (after run
    34's overshoot: the rule fixed in benchmarks/results/gpu_runs.md asks for the allocator's tensors against the
    importer's). Kept compact: each event as (action, address, size, where), `where` being the generated
    module and line that asked for the block (the first frame in Inductor's cache folder), else the first
    frame outside torch; and every generated module with a `call`, so `memory_snapshot.py` can name each
    block by its Inductor buffer."""
    import shutil

    import torch

    if not keep:  # another rank: the same step, so that rank 0's collectives meet their peers (runs 35-36 hung
        step()  # when only rank 0 ran it)
        torch.cuda.synchronize()
        return {}
    cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    os.makedirs(out, exist_ok=True)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history("all", context="alloc", stacks="python", max_entries=200000)
    try:
        step()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(None)
    dev = torch.cuda.current_device()
    events = []
    for ev in snap["device_traces"][dev]:
        where = "-"
        for fr in ev.get("frames", []):
            fn = fr.get("filename", "")
            if fn.startswith(cache):
                where = f"{os.path.basename(fn)}:{fr.get('line')}"
                break
            if where == "-" and "/torch/" not in fn and fn:
                where = f"{os.path.basename(fn)}:{fr.get('line')}:{fr.get('name')}"
        events.append([ev["action"], ev.get("addr", 0), ev.get("size", 0), where])
    with lzma.open(os.path.join(out, "events.json.xz"), "wt", encoding="utf-8") as fo:
        json.dump({"base_allocated_bytes": base, "events": events}, fo)
    kept = []
    for root, _, files in os.walk(cache):
        for f in files:
            path = os.path.join(root, f)
            if f.endswith(".py"):
                with open(path, encoding="utf-8", errors="replace") as fi:
                    if "def call(" not in fi.read():
                        continue
                shutil.copy(path, os.path.join(out, f))
                kept.append(f)
    return {"base_allocated_bytes": base, "events": len(events), "modules": sorted(kept)}


def predict(store: str, collective_order: str = "group", profile: str = "h200", transport: str = "h100") -> dict:
    """overlapsat's figures for the captured graphs: their captured order (a) and the solved one (d), whose
    schedule is read at the level it was solved at (a `free` one is invalid at `group`; runs 24 and 26 were
    predicted after the run for that reason, `--predict`). A plan (tbb, p) is scored on its bucketed graph,
    its merged collectives priced by `profile`'s cost model; a plan with copy-engine transports (p_ce) by the
    `transport` table too, and its contended walk slows compute beside them by the table's share."""
    from overlapsat import simulate
    from overlapsat.cost import H200_HOLD, cost_model, simulate_held
    from overlapsat.cost.interference import (
        H200_NVLINK,
        H200_STEP,
        Interference,
        simulate_contended,
        simulate_with_interference,
    )
    from overlapsat.plan import laid_out, materialize

    out: dict = {"graphs": []}
    for fp, g0, sched, _why in stored_schedules(store, collective_order):
        order = sched.order if sched is not None else None
        row = {"file": fp + ".graph.json", "nodes": len(g0), "collectives": len(g0.coll_seq), "compute_us": g0.compute_total}
        bucketed, ce = None, {}
        if sched is not None and (sched.buckets or sched.transports):
            price, base = cost_model(profile).duration, g0
            if sched.transports:
                from overlapsat.cost.transport import copy_engine

                table = copy_engine(transport)
                group = table.group_of(g0)
                price, base = table.pricing(price, group), table.repriced(g0, group)
                ce = {"copy_engine": sched.transports, "copy_engine_share": table.contention_share}
                row["copy_engine"] = len(sched.transports)
            bucketed = materialize(base.relaxed(collective_order), sched.plan.buckets, laid_out(price, sched.layout))
            row["buckets"] = len(sched.buckets)
            row["collectives_after_buckets"] = len(bucketed.coll_seq)
        for label, o in (("captured", None), ("solved", order)):
            if label == "solved" and o is None:
                continue
            g = bucketed if label == "solved" and bucketed is not None else g0
            r = simulate(g, o)
            row[label] = {"makespan_us": r.makespan, "exposed_us": r.exposed, "peak_bytes": r.peak_memory}
            for nm, inter in (("nvlink_pre_enqueued", H200_NVLINK), ("issue_alternating", Interference(1.22, 1.47))):
                ri = simulate_with_interference(g, o, inter)
                row[label][f"makespan_with_{nm}_us"] = ri.makespan
                row[label][f"exposed_with_{nm}_us"] = ri.exposed
            row[label]["boundary_exposed_us"] = simulate_held(g, o, 1.0).exposed  # the transfer-start rule, runs 19-26
            row[label]["hold_exposed_us"] = simulate_held(g, o, H200_HOLD).exposed  # the partial hold since run 27
            rc = simulate_contended(g, o, H200_STEP, **(ce if label == "solved" else {}))  # fitted 2026-11-22
            row[label].update(contended_makespan_us=rc.makespan, contended_exposed_us=rc.exposed,
                              contended_compute_us=rc.compute_busy, contended_comm_us=rc.comm_busy)
        row["primals_bytes"] = g0.meta.get("primals_bytes")
        out["graphs"].append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks per group (Megatron; FSDP over the rest)")
    ap.add_argument("--regather", action="store_true", help="re-gather every weight in backward (selective checkpointing)")
    ap.add_argument("--titan", metavar="FLAVOR", help="torchtitan's own Llama3 of this flavor (e.g. 8B; --layers blocks), or "
                    "its DeepSeek-V3 with experts over every rank (dsv3-FLAVOR, e.g. dsv3-16B; torchtitan 0.2), "
                    "under its SimpleFSDP instead of this file's decoder (--dim/--heads/--ffn/--tp/--regather unused)")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--ffn", type=int, default=11008)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--prof-steps", type=int, default=3)
    ap.add_argument("--prof-warmup", type=int, default=1,
                    help="profiled steps before those measured after warm-up (the first waits for the profiler)")
    ap.add_argument("--solve-s", type=float, default=20.0)
    ap.add_argument("--profile", default="h200")
    ap.add_argument("--pin", default="compute")
    ap.add_argument("--collective-order", default="group", choices=("group", "chain", "free"),
                    help="chain: one issue order over all groups, as Inductor's (for several process groups)")
    ap.add_argument("--comm-slowdown", type=float, default=1.5)
    ap.add_argument("--plan-budget", type=float, default=None,
                    help="tbb, p: each graph's peak at most this ratio of its captured order's peak "
                         "(p_mem and p_co_mem take --memory-budget)")
    ap.add_argument("--memory-budget", type=float, default=1.1,
                    help="d_mem, p_mem, p_co_mem: each graph's peak at most this ratio of its captured order's peak")
    ap.add_argument("--transport", default="h100",
                    help="p_ce: the copy-engine table (a built-in name, or a transport.json of this machine)")
    ap.add_argument("--blas-lt", action="store_true", help="matmuls through cuBLASLt (preferred_blas_library)")
    ap.add_argument("--sm-carveout", type=int, default=0, metavar="SMS",
                    help="with --blas-lt: cuBLASLt plans each GEMM for this many SMs fewer (NCCL takes 24 here)")
    ap.add_argument("--store-from", metavar="TAR",
                    help="an earlier run's store.tar.gz: apply its schedules instead of solving (the same orders)")
    ap.add_argument("--resolve-rounds", type=int, default=0,
                    help="plans under the default budget: up to this many times, solve again the graphs whose plan "
                         "went over its budget after fusion, and compile again (decision 82)")
    ap.add_argument("--fx-inline", action="store_true",
                    help="capture and apply with install_fx(inline=True): fused pointwise ops hold no FX memory")
    ap.add_argument("--loss-in-graph", action="store_true",
                    help="compile the loss with the model (its backward joins the backward graph)")
    ap.add_argument("--snapshot", action="store_true",
                    help="rank 0: one more step under the allocator's history, and the imported graphs after fusion")
    ap.add_argument("--no-buffer-reuse", action="store_true",
                    help="Inductor's allow_buffer_reuse off: no freed buffer held until a later one takes it over")
    ap.add_argument("--keep-traces", nargs="*", default=["d"])
    ap.add_argument("--fake", action="store_true",
                    help="one process, rank 0 of --world on torch's fake process group (one GPU): its tensors and "
                         "the caching allocator's peak as rank 0 holds them, its compute alone (the collectives "
                         "move nothing, so its step times are the compute floor, not a step on NCCL)")
    ap.add_argument("--trace-all-ranks", action="store_true",
                    help="keep every rank's trace of --keep-traces, not rank 0's alone (waits between ranks, run 57)")
    ap.add_argument("--predict", metavar="STORE_DIR",
                    help="print the predictions for one configuration's stored graphs and schedules "
                         "(at --collective-order) and stop")
    ap.add_argument("--analyse", nargs=2, metavar=("TRACE", "STEPS"),
                    help="print the analysis of a kept profiler trace (.json, .json.gz or .json.xz) and stop")
    a = ap.parse_args()
    if a.analyse:
        path, steps = a.analyse
        print(json.dumps(analyse_trace(path, int(steps), skip=a.prof_warmup), indent=1))
        return
    if a.predict:
        print(json.dumps(predict(a.predict, a.collective_order, a.profile), indent=1))
        return
    if not a.out:
        ap.error("--out is required")
    if a.sm_carveout and not a.blas_lt:
        ap.error("--sm-carveout needs --blas-lt: only cuBLASLt honours it")
    if not 0 <= a.sm_carveout < 132:
        ap.error(f"--sm-carveout: between 0 and the GPU's SM count, got {a.sm_carveout}")
    os.makedirs(a.out, exist_ok=True)
    import torch
    import torch.multiprocessing as mp

    meta = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "args": vars(a),
            "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}}  # run 88 varies them
    if a.device == "cuda":
        meta["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        meta["gpu"] = torch.cuda.get_device_name(0)
    print(json.dumps(meta), flush=True)
    store = tempfile.mkdtemp(prefix="osat_store_")
    if a.store_from:
        import tarfile

        with tarfile.open(a.store_from) as t:  # members store/<configuration>/<file>
            for m in t.getmembers():
                parts = m.name.split("/")
                if m.isfile() and len(parts) == 3 and parts[0] == "store":
                    os.makedirs(os.path.join(store, parts[1]), exist_ok=True)
                    with t.extractfile(m) as fi, open(os.path.join(store, parts[1], parts[2]), "wb") as fo:
                        fo.write(fi.read())
    results: dict = {"meta": meta, "configs": {}}
    for cfg in a.configs:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        t0 = time.monotonic()
        try:
            procs = 1 if a.fake else a.world
            mp.spawn(worker, args=(a.world, cfg, a, port, store, a.out), nprocs=procs, join=True)
            rows = [json.load(open(os.path.join(a.out, f"res_{cfg}_{r}.json"), encoding="utf-8"))
                    for r in range(procs)]
            for r in range(procs):
                os.remove(os.path.join(a.out, f"res_{cfg}_{r}.json"))
            results["configs"][cfg] = {"wall_s": time.monotonic() - t0, "ranks": rows}
        except Exception as e:  # noqa: BLE001 - the other configurations still run
            results["configs"][cfg] = {"error": f"{type(e).__name__}: {e}"[-3000:]}
        r0 = results["configs"][cfg].get("ranks", [{}])[0]
        print(cfg, json.dumps({k: r0.get(k) for k in ("step_ms_median", "peak_memory_bytes", "applied_graphs",
                                                       "loss_eager", "loss_compiled")}),
              json.dumps(r0.get("profile", {}))[:600], results["configs"][cfg].get("error", ""), flush=True)
        if cfg in OURS and os.path.isdir(os.path.join(store, cfg)):
            # predicted right away, so a run cut short still keeps the store and the prediction
            key = "prediction" if cfg == "d" else f"prediction_{cfg}"  # d_int: on its stretched graphs
            try:
                results[key] = predict(os.path.join(store, cfg), a.collective_order, a.profile, a.transport)
            except Exception as e:  # noqa: BLE001 - the timings stand without it
                results[key] = {"error": f"{type(e).__name__}: {e}"}
            import tarfile

            with tarfile.open(os.path.join(a.out, "store.tar.gz"), "w:gz") as t:
                t.add(store, arcname="store")
            print(key, json.dumps(results[key])[:3000], flush=True)
        with open(os.path.join(a.out, "results.json"), "w", encoding="utf-8") as fo:
            json.dump(results, fo, indent=1)


if __name__ == "__main__":
    main()
