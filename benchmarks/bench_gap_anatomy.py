"""Where a budgeted plan's gap to its bound lies, on one FX graph (the held-out TP-4 graph's 5.8 % by default).

    python benchmarks/bench_gap_anatomy.py [--graph NAME] [--corpus DIR] [--time-limit 10] [--out FILE]

Under torch bucketed's peak as the budget (deterministic, level free, h200 prices), it writes:
  - each collective key's count and transfer time (duration, launch and wait) as priced unbucketed and as the
    relaxation over every bucketing prices it, beside the kernels' total: what the bound is made of;
  - the best unbucketed order, and the plan (`optimize_plan`): makespan, bound, the relaxation's reach (its best
    order within the budget), and the buckets per key; and the plan with no budget, its peak and buckets;
  - the buckets the budget leaves room for (`solver/room.py`) on the plan's own order of its bucketed graph, at
    three caps: what adding them costs, read on that order and ordered again (`optimize`).
A gap that only a tighter relaxation closes shows as a relaxation that prices merges the plan cannot use.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time

from overlapsat import Problem, optimize
from overlapsat.cost import cost_model
from overlapsat.evaluate import evaluate
from overlapsat.graph import NodeKind
from overlapsat.io import graph_from_dict
from overlapsat.plan import any_bucketing_relaxation, materialize
from overlapsat.solver.plan_search import optimize_plan
from overlapsat.solver.room import Checks, room_buckets

HERE = os.path.dirname(os.path.abspath(__file__))
CAPS_MB = (100, 250, 1000)


def transfer_table(problem: Problem, price) -> tuple[list[str], float]:
    """Rows per collective key (op, group): count, bytes, transfer ms unbucketed and relaxed; and the kernels' ms."""
    g = problem.relaxed
    rg, _ = any_bucketing_relaxation(g, price, problem.bucket_cap)
    rows: dict[tuple, list[float]] = {}
    for v, nd in enumerate(g.nodes):
        if nd.kind is not NodeKind.COLLECTIVE:
            continue
        w = g.waits_of[v][0] if g.waits_of[v] else None
        own = nd.duration + nd.launch + (g.nodes[w].duration if w is not None else 0.0)
        relaxed = rg.nodes[v].duration + rg.nodes[v].launch + (rg.nodes[w].duration if w is not None else 0.0)
        r = rows.setdefault((nd.op, nd.group), [0, 0, 0.0, 0.0])
        r[0] += 1
        r[1] += int(nd.nbytes)
        r[2] += own
        r[3] += relaxed
    kernels = sum(nd.duration for nd in g.nodes if nd.kind is NodeKind.COMPUTE)
    out = ["| key (op, group) | collectives | GiB | transfer ms, unbucketed | transfer ms, relaxation |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for (op, group), (n, b, own, relaxed) in sorted(rows.items()):
        out.append(f"| {op}, {group} | {n} | {b / 2**30:.2f} | {own / 1e3:.2f} | {relaxed / 1e3:.2f} |")
    return out, kernels


def buckets_text(p: Problem, plan) -> str:
    """A plan's buckets as their members' counts, largest first, by the op of their key."""
    per_key: dict[str, list[int]] = {}
    for b in plan.buckets:
        per_key.setdefault(p.relaxed.node(b.members[0]).op, []).append(len(b.members))
    return "; ".join(f"{op} {sorted(ns, reverse=True)}" for op, ns in sorted(per_key.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="heldout_llama3_8b_2d_L16_tp4_w128_bwd")
    ap.add_argument("--corpus", default=os.path.join(HERE, "fx_heldout"))
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    with gzip.open(os.path.join(a.corpus, a.graph + ".json.gz"), "rt", encoding="utf-8") as f:
        d = json.load(f)
    price = cost_model("h200").duration
    budget = int(d["bucketed"]["peak_memory"])
    p = Problem.of(graph_from_dict(d["graph"]), budget, "free")
    lines = [f"Graph `{a.graph}` ({len(p.relaxed.nodes):,} nodes), budget torch bucketed's peak ({budget:,} B), "
             f"level free, deterministic, {a.time_limit:g} s per solve, h200 prices, makespans in ms.", ""]
    table, kernels = transfer_table(p, price)
    lines += table + ["", f"Kernels' total: {kernels / 1e3:.2f} ms.", ""]

    t = time.monotonic()
    order = optimize(p, time_limit=a.time_limit)
    lines.append(f"Best unbucketed order: {order.makespan / 1e3:.2f} ms (bound {order.bound / 1e3:.2f}), "
                 f"{time.monotonic() - t:.1f} s.")
    t = time.monotonic()
    plan = optimize_plan(p, price, time_limit=a.time_limit, unbucketed=order,
                         extra_orders={"torch OverlapScheduler": d["overlap_scheduler"]})
    reach = plan.stats["plan"].get("relaxation_reach_us")
    lines.append(f"Plan: {plan.makespan / 1e3:.2f} ms, bound {plan.bound / 1e3:.2f}, gap {100 * plan.gap:.1f} %, "
                 f"relaxation's reach {reach / 1e3 if reach else float('nan'):.2f}, peak {plan.peak_memory:,} B, "
                 f"{time.monotonic() - t:.1f} s; buckets (members each): {buckets_text(p, plan)}.")
    free = optimize_plan(Problem.of(p.graph, "none", "free"), price, time_limit=a.time_limit,
                         extra_orders={"torch OverlapScheduler": d["overlap_scheduler"]})
    lines.append(f"Plan with no budget: {free.makespan / 1e3:.2f} ms, peak {free.peak_memory:,} B; buckets (members "
                 f"each): {buckets_text(p, free)}.")
    lines += ["", "Buckets the budget leaves room for, added on the plan's order of its bucketed graph:", "",
              "| cap MB | buckets added | of them reduce_scatter | on the plan's order | ordered again |",
              "| ---: | ---: | ---: | ---: | ---: |"]
    h = materialize(p.relaxed, list(plan.buckets), price)
    ph = Problem(h, budget, "free")
    on_h = [h.index[nm] for nm in plan.names]
    for cap in CAPS_MB:
        room = room_buckets(ph, h, on_h, price, cap * 2**20, Checks(10))
        if room is None:
            lines.append(f"| {cap} | 0 | 0 | - | - |")
            continue
        read = evaluate(ph.on(room.graph), "room", room.graph.order_indices(room.order))
        again = optimize(ph.on(room.graph), time_limit=a.time_limit, extra_orders={"room": room.order})
        rs = sum(1 for b in room.buckets if h.node(b.members[0]).op == "reduce_scatter")
        lines.append(f"| {cap} | {len(room.buckets)} | {rs} | {read.makespan / 1e3:.2f} | {again.makespan / 1e3:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
