"""Decision 113: how much of each plan's gap the bound's relaxation can close at all.

    python benchmarks/bench_reach.py > benchmarks/results/bench_reach_2026-12-03.md

`optimize_plan` on every bundled example under its default budget (the input order's peak), deterministic, h200
prices, at 10 and 60 s: the plan, its bound over every plan, and the relaxation's reach (the best order of the
relaxation over every bucketing found within the budget, where it was ordered: no bound from it passes that), with
the share of the makespan above the reach, and the chosen bucketing's own bound over its orders.
"""

from __future__ import annotations

import time

from overlapsat import Problem, SolveParams, load_graph
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.solver.plan_search import optimize_plan

EXAMPLES = ("tp_small", "fsdp_small", "ddp_small", "moe_small", "fsdp_medium", "tp_large")
LIMITS = (10.0, 60.0)


def row(name: str, limit: float) -> str:
    price = cost_model("h200")
    g = load_graph(bundled(name)).reprice(price)
    t = time.monotonic()
    r = optimize_plan(Problem.of(g), price.duration, SolveParams(time_limit=limit))
    wall = time.monotonic() - t
    info = r.plan_info
    reach = info.relaxation_reach_us
    above = f"{100 * (r.makespan - reach) / r.makespan:.1f} %" if reach is not None and reach < r.makespan else "-"
    return (f"| {name} | {len(g.nodes):,} | {limit:g} | {wall:.1f} | {'yes' if r.cut_by_wall_clock else 'no'} | "
            f"{len(r.buckets)} | {r.makespan:,.1f} | {r.bound:,.1f} | {100 * r.gap:.1f} % | "
            f"{f'{reach:,.1f}' if reach is not None else '-'} | {above} | {info.bucketing_bound_us:,.1f} |")


if __name__ == "__main__":
    print("`optimize_plan` on the bundled examples under the input order's peak (deterministic, h200 prices, "
          "level group):\n")
    print("| graph | nodes | limit s | wall s | cut by the clock | buckets | makespan us | bound us | gap | "
          "relaxation's reach us | makespan above the reach | chosen bucketing's own bound us |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for limit in LIMITS:
        for name in EXAMPLES:
            print(row(name, limit), flush=True)
