"""overlapsat against torchtitan's EP overlap pass and its bucketing, on the graph they schedule (#51, CPU).

torchtitan's `ep_overlap_schedule_pass` reorders a traced step whose MoE blocks were split into two chunks, so
that one chunk's token exchange (all_to_all) runs beside the other chunk's compute. This script builds that
step as torchtitan does, on 2 gloo ranks: its DeepSeek-V3 debug model (SDPA attention), experts over an
expert-parallel group of both ranks, its SimpleFSDP, its eager EP chunking of every MoE block
(`EpOverlapConfig(strategy="eager", chunk_dim="batch", module_fqn="layers.*.moe")`), traced by graph_trainer's
`minimal_fx_tracer`, then torchtitan's own pass list for that config (`compile_time_passes`, without Inductor).
The graph is recorded just before torchtitan's bucketing pass, where overlapsat's pass sits (`overlapsat.torch.
titan`), and so are three torchtitan configurations of it: its EP overlap schedule alone, its transformer-block
bucketing alone, and both (its pipeline as the config asks). Each is run on both ranks and compared with eager,
bit for bit. torch's manual scheduler, inside the bucketing pass, reads overlapsat's durations as its roofline
(there is no GPU to measure), as overlapsat's peer rows do.

    python benchmarks/titan_ep_overlap.py capture RAW.json.gz     # the graphs (h200 prices) and orders
    python benchmarks/titan_ep_overlap.py solve RAW.json.gz [--time-limit S]   # the table, in markdown

`solve` gives the simulator's figures for each, at the `free` level (torchtitan's passes reorder the
collectives of a process group, which every rank does alike), and overlapsat's order and plan of the recorded
graph within the peak of torchtitan's fastest configuration.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import sys
import tempfile
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

BUCKETING = "joint_transformer_block_bucketing_reordering_pass"
EP_SCHEDULE = "ep_overlap_schedule_pass"
OVERLAPSAT_PASS = "overlapsat pass (plan applied on both ranks)"
PLAN_S = 30.0  # the offline plan's time limit
CONFIG = {"model": "deepseek_v3 debugmodel (attn_backend sdpa)", "ranks": 2, "ep": 2, "dp_shard": 2,
          "batch": 2, "seq": 32, "chunking": "eager, chunk_dim batch, layers.*.moe", "profile": "h200"}


def titan_step(rank: int, world: int, name: str = "dsv3", seq: int = 32, compile_config: Any = None) -> Any:
    """torchtitan's Llama3 or DeepSeek-V3 ("dsv3": experts over an EP group of every rank) debug model, SDPA
    attention, under its SimpleFSDP on the CPU, with `compile_config`'s eager EP chunking where it asks for it;
    one rank's batch (2 x `seq` tokens) and its training step (loss and every gradient). Run inside a gloo process
    group. Shared with the torchtitan test's ranks (tests/torch/titan_ranks.py)."""
    import torch
    from torchtitan.config.configs import TrainingConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed.utils import set_spmd_backend
    from torchtitan.experiments.graph_trainer.common_utils import apply_simple_fsdp

    set_spmd_backend("partial_dtensor")  # DTensor meshes (the EP dispatcher reads its mesh so)
    torch.manual_seed(0)
    if name == "dsv3":
        from torchtitan.experiments.graph_trainer.deepseek_v3 import model_registry
        from torchtitan.experiments.graph_trainer.deepseek_v3.parallelize import annotate_deepseekv3
        from torchtitan.models.deepseek_v3.sharding import set_deepseek_v3_sharding_config

        cfg = model_registry("debugmodel", attn_backend="sdpa").model
        set_deepseek_v3_sharding_config(cfg, enable_sp=False, enable_ep=True)
    else:
        from torchtitan.experiments.graph_trainer.llama3 import model_registry

        cfg = model_registry("debugmodel", attn_backend="sdpa").model
    with torch.device("meta"):
        model = cfg.build()
    model.to_empty(device="cpu")
    model.init_weights()
    with patch("torchtitan.distributed.parallel_dims.device_type", "cpu"):
        dims = ParallelDims(dp_replicate=1, dp_shard=world, cp=1, tp=1, pp=1, ep=world if name == "dsv3" else 1,
                            world_size=world, spmd_backend="partial_dtensor")
        if name == "dsv3":
            dims.build_mesh()
            annotate_deepseekv3(model)
            model.parallelize(dims)
        model = apply_simple_fsdp(model, parallel_dims=dims, training=TrainingConfig(
            mixed_precision_param="float32", mixed_precision_reduce="float32"))
    if compile_config is not None:
        from torchtitan.experiments.graph_trainer.ep_eager_chunk import maybe_apply_ep_overlap_eager_chunking

        maybe_apply_ep_overlap_eager_chunking(model, compile_config)
    gen = torch.Generator().manual_seed(1 + rank)
    tokens = torch.randint(0, cfg.vocab_size, (2, seq), generator=gen)
    labels = torch.randint(0, cfg.vocab_size, (2, seq), generator=gen)

    def step(tokens, labels):
        pred = model(tokens)
        loss = torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten())
        params = [p for _, p in model.named_parameters(remove_duplicate=False) if p.requires_grad]
        return [loss, *torch.autograd.grad(loss, params)]

    return SimpleNamespace(cfg=cfg, model=model, dims=dims, step=step, tokens=tokens, labels=labels)


def local(t: Any) -> Any:
    """A DTensor's local shard (what eager and the traced step are compared on), else the tensor."""
    return t.to_local() if hasattr(t, "to_local") else t


def _rank(rank: int, world: int, init: str, out: str, store: str) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    import torchtitan
    from torchtitan.experiments.graph_trainer.configs import (
        MOE_BLOCK_FQN,
        EpOverlapConfig,
        GraphTrainerCompileConfig,
    )
    from torchtitan.experiments.graph_trainer.make_fx_tracer import minimal_fx_tracer, run_traced
    from torchtitan.experiments.graph_trainer.passes import _get_pass_name, compile_time_passes

    from overlapsat import solve_store
    from overlapsat.io import graph_from_dict, graph_to_dict
    from overlapsat.torch.fx import import_fx
    from overlapsat.torch.fx_peer import on_overlapsat_terms
    from overlapsat.torch.titan import TitanPass

    cc = GraphTrainerCompileConfig(enable=True, ep_overlap=EpOverlapConfig(
        enabled=True, chunk_dim="batch", strategy="eager", module_fqn=MOE_BLOCK_FQN))
    built = titan_step(rank, world, "dsv3", CONFIG["seq"], cc)
    cfg, model, dims, step, tokens, labels = built.cfg, built.model, built.dims, built.step, built.tokens, built.labels
    eager = [local(t) for t in step(tokens, labels)]
    traced = minimal_fx_tracer(step, module=model)(tokens, labels)
    config = SimpleNamespace(model_spec=SimpleNamespace(model=cfg), loss=None, compile=cc, parallelism=SimpleNamespace(
        expert_parallel_degree=world, data_parallel_shard_degree=world, context_parallel_degree=1,
        tensor_parallel_degree=1, fsdp_reshard_after_forward="default", pipeline_parallel_degree=1))
    passes = compile_time_passes(traced, config, parallel_dims=dims, include_inductor=False)
    names = [_get_pass_name(p) for p in passes]
    at = names.index(BUCKETING)
    gm = traced.gm
    for p in passes[:at]:  # torchtitan's normalization, remat and EP process-group passes
        gm = p(gm, traced.example_inputs)
    g = import_fx(gm, name="dsv3_debug_ep2_chunked", profile=CONFIG["profile"])
    dur = {nd.name: nd.duration / 1e3 for nd in g.nodes}  # ms, torch's roofline unit

    def bucketed(m):
        with on_overlapsat_terms(dur):
            return passes[at](m, traced.example_inputs)

    def ep(m):
        return passes[names.index(EP_SCHEDULE)](m, traced.example_inputs)

    row: dict[str, Any] = {"rank": rank, "bitwise": {}, "graphs": {}, "passes": names}

    def finish(name: str, m: Any) -> None:  # torchtitan's passes after its EP schedule, then one step against eager
        for p in passes[names.index(EP_SCHEDULE) + 1:]:
            m = p(m, traced.example_inputs)
        traced.gm = m
        got = [local(t) for t in run_traced(traced, module=model)(tokens, labels)]
        row["bitwise"][name] = len(got) == len(eager) and all(torch.equal(a, b) for a, b in zip(got, eager))
        if rank == 0:
            row["graphs"][name] = graph_to_dict(import_fx(m, name=name, profile=CONFIG["profile"]))

    for name, run in (("torchtitan ep_overlap", ep), ("torchtitan block bucketing", bucketed),
                      ("torchtitan block bucketing + ep_overlap", lambda m: ep(bucketed(m)))):
        finish(name, run(copy.deepcopy(gm)))
    # overlapsat's pass where torchtitan's bucketing sits: recorded on both ranks, a plan made offline (rank 0,
    # within the peak of torchtitan's fastest configuration), applied on both ranks after they agree
    TitanPass(store, mode="capture", agree_timeout=300)(copy.deepcopy(gm))
    dist.barrier()
    if rank == 0:
        judged = {nm: own(graph_from_dict(d)) for nm, d in row["graphs"].items()}
        budget = min(judged.values(), key=lambda r: r.makespan).peak_memory
        outcome = solve_store(store, plans=CONFIG["profile"], time_limit=PLAN_S, memory_budget=budget)
        row["overlapsat_solve"] = [o.outcome for o in outcome]
    dist.barrier()
    finish(OVERLAPSAT_PASS, TitanPass(store, mode="apply", agree_timeout=300)(copy.deepcopy(gm)))
    if rank == 0:
        row.update(graph=graph_to_dict(g), torchtitan=torchtitan.__version__, torch=torch.__version__)
    with open(f"{out}.{rank}", "w", encoding="utf-8") as f:
        json.dump(row, f)
    dist.destroy_process_group()


def own(h: Any) -> Any:
    """A graph's own order, judged at `free` (torchtitan's passes reorder one process group's collectives)."""
    from overlapsat import Problem, evaluate

    p = Problem.of(h, None, "free")
    return evaluate(p.on(p.relaxed), h.name, list(range(len(h.nodes))))


def capture(path: str) -> None:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/rank"
        mp.spawn(_rank, args=(2, f"file://{tmp}/init", out, f"{tmp}/store"), nprocs=2)
        rows = [json.load(open(f"{out}.{r}", encoding="utf-8")) for r in range(2)]
    first = rows[0]
    applied = first["graphs"].pop(OVERLAPSAT_PASS)
    raw = {"config": CONFIG, "torchtitan": first["torchtitan"], "torch": first["torch"], "passes": first["passes"],
           "graph": first["graph"], "torchtitan_graphs": first["graphs"], "overlapsat_applied": applied,
           "overlapsat_solve": first["overlapsat_solve"],
           "bitwise_equal_to_eager": {k: all(r["bitwise"][k] for r in rows) for k in first["bitwise"]}}
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(raw, f)
    print(f"{path}: {len(first['graph']['nodes'])} nodes; bitwise equal to eager on both ranks: "
          f"{raw['bitwise_equal_to_eager']}")


def solve(path: str, time_limit: float, work: float | None = None) -> str:
    """The markdown table of the raw file: the recorded graph's order, torchtitan's three configurations (each
    its own graph and order), and overlapsat's order and plan of the recorded graph within the peak of
    torchtitan's fastest."""
    from overlapsat import Problem, optimize, optimize_plan
    from overlapsat.cost import cost_model
    from overlapsat.io import graph_from_dict

    raw = json.load(gzip.open(path, "rt", encoding="utf-8"))
    g = graph_from_dict(raw["graph"])

    theirs = {name: (graph_from_dict(d), own(graph_from_dict(d))) for name, d in raw["torchtitan_graphs"].items()}
    name, (_, fastest) = min(theirs.items(), key=lambda kv: kv[1][1].makespan)
    budget = fastest.peak_memory
    ep = list(theirs["torchtitan ep_overlap"][0].names)  # the recorded graph's nodes, in torchtitan's EP order
    order = optimize(Problem.of(g, budget, "free"), time_limit=time_limit, work_limit=work,
                     extra_orders={"torchtitan ep_overlap": ep})
    plan = optimize_plan(Problem.of(g, budget, "free"), cost_model(raw["config"]["profile"]).duration,
                         time_limit=time_limit, work_limit=work, unbucketed=order)
    kinds: dict[str, int] = {}
    for c in g.coll_seq:
        kinds[g.nodes[c].op] = kinds.get(g.nodes[c].op, 0) + 1
    bitwise = raw["bitwise_equal_to_eager"]
    out = [f"Graph `{g.name}` (before torchtitan's bucketing pass): {len(g.nodes):,} nodes, "
           + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
           + f"; compute {g.compute_total / 1e3:.3f} ms, communication {g.comm_total / 1e3:.3f} ms (h200 prices). "
           f"torch {raw['torch']}, torchtitan {raw['torchtitan']}; level `free`; overlapsat deterministic, "
           f"time limit {time_limit:g} s per solve, within the peak of torchtitan's fastest ({name}).", "",
           "| configuration | collectives | makespan ms | exposed ms | peak MiB | vs torchtitan's fastest | "
           "bitwise equal to eager |",
           "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    rows = [("no overlap pass (the recorded order)", len(g.coll_seq), own(g), "-")]
    rows += [(nm, len(h.coll_seq), r, "yes" if bitwise[nm] else "no") for nm, (h, r) in theirs.items()]
    if "overlapsat_applied" in raw:  # the pass as a torchtitan user runs it: its plan applied, one step on the ranks
        h = graph_from_dict(raw["overlapsat_applied"])
        rows.append((f"{OVERLAPSAT_PASS}, offline plan of {PLAN_S:g} s", len(h.coll_seq), own(h),
                     "yes" if bitwise[OVERLAPSAT_PASS] else "no"))
    def cut(r):  # a deterministic search the clock ended says so: another machine may find another answer
        return ", cut by the clock" if r.cut_by_wall_clock else ""

    rows += [(f"overlapsat order ({order.status.value}{cut(order)})", len(g.coll_seq), order.best, "-"),
             (f"overlapsat plan, {len(plan.buckets)} buckets ({plan.status.value}{cut(plan)})",
              len(plan.bucketed.coll_seq), plan.best, "-")]
    for nm, n, r, bw in rows:
        out.append(f"| {nm} | {n} | {r.makespan / 1e3:.3f} | {r.exposed / 1e3:.3f} | {r.peak_memory / 2**20:.1f} | "
                   f"{100 * (r.makespan / fastest.makespan - 1):+.1f} % | {bw} |")
    out += ["", f"Bounds within that peak: {order.bound / 1e3:.3f} ms over every order of the recorded graph, "
            f"{plan.bound / 1e3:.3f} ms over every plan (bucketing and order)."]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("capture", "solve"))
    ap.add_argument("raw")
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--work", type=float, default=None, help="deterministic work per solve (default 0.5 x the limit)")
    a = ap.parse_args()
    if a.what == "capture":
        capture(a.raw)
    else:
        print(solve(a.raw, a.time_limit, a.work))


if __name__ == "__main__":
    sys.exit(main())
