"""Decision 113: how much of each plan's gap the bound's relaxation can close at all.

    python benchmarks/bench_reach.py > benchmarks/results/bench_reach_2026-12-03.md

`optimize_plan` on every bundled example under its default budget (the input order's peak), deterministic, h200
prices, at 10 and 60 s: the plan, its bound over every plan, and the relaxation's reach (the best order of the
relaxation over every bucketing found within the budget, where it was ordered: no bound from it passes that), with
the share of the makespan above the reach, and the chosen bucketing's own bound over its orders.

`--part 2`: where `fsdp_medium`'s gap under its default budget comes from. Each solved by `optimize` for 60
reference seconds of work (deterministic): the relaxation over every bucketing at level free (its best order is its
reach), the graph with no bucket at level group (the plan's level), and two bucketings by hand at level group: the
backward gathers in pairs (from layer 8 down) and the reduce-scatters in pairs (from layer 15 down).

`--part 3`: how much of each example's reach is the collective order. The relaxation over every bucketing under the
input order's peak, ordered by `optimize` for 20 reference seconds (deterministic) at level free (what the bound
orders) and at level group, and the graph with no bucket at level free. At level group the relaxation is no bound
over every plan (a bucket takes its first member's place, so its other members may pass collectives between), only
over the plans whose buckets keep each group's collective sequence.
"""

from __future__ import annotations

import sys
import time

from overlapsat import InfeasibleBudgetError, NoValidOrderError, Problem, SolveParams, load_graph, materialize, optimize
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.plan import Bucket
from overlapsat.solver.plan_bound import analytical_over_bucketings
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


def where_the_gap_is() -> list[str]:
    price = cost_model("h200")
    g = load_graph(bundled("fsdp_medium")).reprice(price)
    pb = Problem.of(g).with_default_budget()
    rg = analytical_over_bucketings(pb, price.duration)[0]
    pairs_ag = tuple(Bucket((f"L{k}_b_ag", f"L{k - 1}_b_ag")) for k in range(8, 0, -2))
    pairs_rs = tuple(Bucket((f"L{k}_rs", f"L{k - 1}_rs")) for k in range(15, 0, -2))
    cases = [("the relaxation over every bucketing", rg, "free"), ("no bucket", pb.relaxed, "group"),
             ("backward gathers in pairs", materialize(pb.relaxed, pairs_ag, price.duration), "group"),
             ("reduce-scatters in pairs", materialize(pb.relaxed, pairs_rs, price.duration), "group")]
    out = []
    for what, graph, level in cases:
        t = time.monotonic()
        try:
            r = optimize(Problem(graph, pb.budget, level), SolveParams(time_limit=600, work_limit=60,
                                                                      collective_order=level))
            got = f"{r.makespan:,.1f} | {r.bound:,.1f} | {r.status.value}"
        except (InfeasibleBudgetError, NoValidOrderError) as e:
            got = f"- | - | {type(e).__name__}"
        out.append(f"| {what} | {level} | {got} | {time.monotonic() - t:.1f} |")
    return out


def levels(name: str, work: float = 20.0) -> str:
    """One row of part 3: the relaxation at level free and at level group, and the unbucketed graph at free."""
    price = cost_model("h200")
    pb = Problem.of(load_graph(bundled(name)).reprice(price)).with_default_budget()
    rg = analytical_over_bucketings(pb, price.duration)[0]
    cells = []
    for graph, level in ((rg, "free"), (rg, "group"), (pb.relaxed, "free")):
        r = optimize(Problem(graph, pb.budget, level), SolveParams(time_limit=600, work_limit=work,
                                                                  collective_order=level))
        cells.append(f"{r.makespan:,.1f} | {r.bound:,.1f}")
    return f"| {name} | {len(rg.nodes):,} | " + " | ".join(cells) + " |"


if __name__ == "__main__" and sys.argv[1:] == ["--part", "3"]:
    print("The relaxation over every bucketing under the input order's peak, and the graph with no bucket, each "
          "ordered by `optimize` for 20 reference s of work (deterministic, h200 prices); makespan and bound, us:\n")
    print("| graph | nodes | relaxation at free | its bound | relaxation at group | its bound | no bucket at free | "
          "its bound |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in ("tp_small", "fsdp_small", "ddp_small", "fsdp_medium", "tp_large"):
        print(levels(name), flush=True)
elif __name__ == "__main__" and sys.argv[1:] == ["--part", "2"]:
    print("\n`fsdp_medium` under its input order's peak: where the gap comes from (`optimize`, 60 reference s of "
          "work each):\n")
    print("| what is ordered | level | makespan us | bound us | status | wall s |")
    print("| --- | --- | ---: | ---: | --- | ---: |")
    for line in where_the_gap_is():
        print(line, flush=True)
elif __name__ == "__main__":
    print("`optimize_plan` on the bundled examples under the input order's peak (deterministic, h200 prices, "
          "level group):\n")
    print("| graph | nodes | limit s | wall s | cut by the clock | buckets | makespan us | bound us | gap | "
          "relaxation's reach us | makespan above the reach | chosen bucketing's own bound us |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for limit in LIMITS:
        for name in EXAMPLES:
            print(row(name, limit), flush=True)
