"""Energetic reasoning over the memory cumulative: does it tighten the bound over every plan, or prove sooner?

    python benchmarks/bench_energetic.py > benchmarks/results/bench_energetic_2026-12-03.md

Two parts (issue #50, "bounds under the budget").

1. CP-SAT's own energetic reasoning on the whole model of the relaxation over every bucketing (the lift of the bound,
   decision 65): `optimize` on each bundled example's relaxation at level free, deterministic, `--work` reference
   seconds, under the input order's peak and with no budget, with CP-SAT's defaults (what the library runs), with
   its overload checker and timetable edge finding on the cumulative, with `linearization_level 2` (its LP gets
   the cumulative's energy cuts), and with both. Bound, order, wall and deterministic seconds.
2. The analytical overlap bound under a budget (decision 71) with and without the per-kernel knapsack: the
   transfers beside one kernel are in flight together at its step, so their outputs must fit there together.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import time
from collections.abc import Callable
from typing import Any

from overlapsat import (
    Graph,
    InfeasibleBudgetError,
    NoValidOrderError,
    Problem,
    SolveParams,
    graph_from_dict,
    load_graph,
    optimize,
    peak_memory,
)
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.solver import cpsat
from overlapsat.solver.memory_bound import overlap_capacity_bound, peak_floor
from overlapsat.solver.plan_bound import analytical_over_bucketings

EXAMPLES = ("tp_small", "fsdp_small", "ddp_small", "moe_small", "fsdp_medium", "tp_large")


def _energetic(p: Any) -> None:
    p.use_overload_checker_in_cumulative = True
    p.use_timetable_edge_finding_in_cumulative = True


def _lin2(p: Any) -> None:
    p.linearization_level = 2


def _both(p: Any) -> None:
    _energetic(p)
    _lin2(p)


CONFIGS: dict[str, Callable[[Any], None] | None] = {"default": None, "energetic": _energetic, "lin2": _lin2,
                                                     "both": _both}


def part1(work: float) -> list[str]:
    real = cpsat.without_lp_dives
    out = ["| example | budget | CP-SAT setting | order (us) | bound (us) | gap (makespan) | status | wall s | det s |",
           "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    price = cost_model("h200")
    for name in EXAMPLES:
        g = load_graph(bundled(name)).reprice(price)
        pb = Problem.of(g).with_default_budget()
        rg = analytical_over_bucketings(pb, price.duration)[0]
        for label, budget in (("input order's peak", pb.budget), ("none", None)):
            for cname, extra in CONFIGS.items():
                def patched(p: Any, has_memory: bool, extra=extra) -> None:
                    real(p, has_memory)
                    if extra is not None:
                        extra(p)
                cpsat.without_lp_dives = patched
                t = time.monotonic()
                try:
                    r = optimize(Problem(rg, budget, "free"), SolveParams(time_limit=900, work_limit=work,
                                                                          collective_order="free"))
                    wall = time.monotonic() - t
                    cp = r.stats.phases
                    out.append(f"| {name} | {label} | {cname} | {r.makespan:,.1f} | {r.bound:,.1f} | "
                               f"{100 * (r.makespan - r.bound) / r.makespan:.2f} % | {r.status.value} | {wall:.1f} | "
                               f"{cp.get('deterministic_s', float('nan')):.2f} |")
                except (InfeasibleBudgetError, NoValidOrderError) as e:
                    out.append(f"| {name} | {label} | {cname} | - | - | - | {type(e).__name__} | "
                               f"{time.monotonic() - t:.1f} | - |")
                finally:
                    cpsat.without_lp_dives = real
                print(out[-1], flush=True)
    return out


def _corpus() -> list[tuple[str, Graph, int, tuple[float, ...]]]:
    out = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fx_corpus", "*.json.gz"))):
        g = graph_from_dict(json.load(gzip.open(path))["graph"]).relaxed("free")
        out.append((os.path.basename(path).removesuffix(".json.gz"), g, peak_memory(g), (1.0,)))
    return out


def part2(corpus: bool) -> list[str]:
    """On the bundled examples' relaxations at 1.0-0.7 of the input order's peak, and (`corpus`) on the FX corpus's
    graphs at their input order's peak (below it their memory floor proves most budgets unreachable)."""
    out = ["| graph | budget | overlap bound (pairs) | with the knapsack | s (pairs) | s (knapsack) |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    price = cost_model("h200")
    cases = []
    for name in EXAMPLES:
        g = load_graph(bundled(name)).reprice(price)
        pb = Problem.of(g).with_default_budget()
        cases.append((name, analytical_over_bucketings(pb, price.duration)[0], pb.budget, (1.0, 0.9, 0.8, 0.7)))
    for name, rg, peak, ratios in cases + (_corpus() if corpus else []):
        for ratio in ratios:
            budget = int(peak * ratio)
            if budget < peak_floor(rg)[0]:
                out.append(f"| {name} | {ratio:g} x | below the memory floor | | | |")
                print(out[-1], flush=True)
                continue
            t = time.monotonic()
            a = overlap_capacity_bound(rg, budget, together=False)
            t1 = time.monotonic() - t
            t = time.monotonic()
            b = overlap_capacity_bound(rg, budget, together=True)
            t2 = time.monotonic() - t
            out.append(f"| {name} | {ratio:g} x | {a:,.1f} | {b:,.1f} | {t1:.2f} | {t2:.2f} |")
            print(out[-1], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=float, default=10.0)
    ap.add_argument("--part", type=int, choices=(1, 2))
    ap.add_argument("--corpus", action="store_true", help="part 2 on the FX corpus too")
    a = ap.parse_args()
    if a.part in (None, 2):
        part2(a.corpus)
    if a.part in (None, 1):
        part1(a.work)


if __name__ == "__main__":
    main()
