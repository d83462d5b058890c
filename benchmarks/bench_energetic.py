"""Energetic reasoning over the memory cumulative: does it tighten the bound over every plan, or prove sooner?

    python benchmarks/bench_energetic.py > benchmarks/results/bench_energetic_2026-12-03.md

Issue #50, "bounds under the budget": CP-SAT's own energetic reasoning on the whole model of the relaxation over
every bucketing (the lift of the bound, decision 65). `optimize` on each bundled example's relaxation at level free,
deterministic, `--work` reference seconds, under the input order's peak and with no budget: with CP-SAT's defaults
(what the library runs), with its overload checker and timetable edge finding on the cumulative, with
`linearization_level 2` (its LP gets the cumulative's energy cuts), and with both. Bound, order, wall and
deterministic seconds. `--part 2`: the whole model of each bundled graph itself at level group (what `optimize`
runs), with CP-SAT's defaults and with `linearization_level 2`. The per-kernel knapsack in the analytical overlap
bound was measured at commit 54601cb (`--part 2` there) and not kept (the raw file says why).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from overlapsat import (
    InfeasibleBudgetError,
    NoValidOrderError,
    Problem,
    SolveParams,
    load_graph,
    optimize,
)
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.solver import cpsat
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


@contextmanager
def cpsat_setting(extra: Callable[[Any], None] | None) -> Iterator[None]:
    """Within it, every whole-model CP-SAT solve gets `extra(parameters)` after the library's own settings (the
    hook is `cpsat.without_lp_dives`, which the whole model's solve calls on its parameters)."""
    real = cpsat.without_lp_dives

    def patched(p: Any, has_memory: bool) -> None:
        real(p, has_memory)
        if extra is not None:
            extra(p)

    cpsat.without_lp_dives = patched
    try:
        yield
    finally:
        cpsat.without_lp_dives = real


def part1(work: float) -> list[str]:
    out = ["| example | budget | CP-SAT setting | order (us) | bound (us) | gap (makespan) | status | wall s | det s |",
           "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    print("\n".join(out), flush=True)
    price = cost_model("h200")
    for name in EXAMPLES:
        g = load_graph(bundled(name)).reprice(price)
        pb = Problem.of(g).with_default_budget()
        rg = analytical_over_bucketings(pb, price.duration)[0]
        for label, budget in (("input order's peak", pb.budget), ("none", None)):
            for cname, extra in CONFIGS.items():
                t = time.monotonic()
                try:
                    with cpsat_setting(extra):
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
                print(out[-1], flush=True)
    return out


def part2(work: float) -> list[str]:
    """The whole model of each bundled graph itself (no bucket) at level group, as `optimize` runs it by default,
    with CP-SAT's defaults and with `linearization_level 2`."""
    out = ["| example | budget | linearization level | order (us) | bound (us) | gap (makespan) | status | det s | "
           "wall s |", "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    print("\n".join(out), flush=True)
    for name in EXAMPLES:
        g = load_graph(bundled(name)).reprice(cost_model("h200"))
        for label, pb in (("none", Problem.of(g)), ("input order's peak", Problem.of(g).with_default_budget())):
            for level in (1, 2):
                t = time.monotonic()
                with cpsat_setting(lambda p, level=level: setattr(p, "linearization_level", level)):
                    r = optimize(pb, SolveParams(time_limit=900, work_limit=work))
                ph = r.stats.phases
                out.append(f"| {name} | {label} | {level} | {r.makespan:,.1f} | {r.bound:,.1f} | "
                           f"{100 * (r.makespan - r.bound) / r.makespan:.2f} % | {r.status.value} | "
                           f"{ph.get('deterministic_s') or 0:.2f} | {time.monotonic() - t:.1f} |")
                print(out[-1], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=float, default=10.0)
    ap.add_argument("--part", type=int, choices=(1, 2), default=1, help="2: the graphs themselves at level group")
    a = ap.parse_args()
    if a.part == 2:
        print(f"`optimize` on each bundled graph at level group, deterministic, {a.work:g} reference seconds of "
              "work, h200 prices:\n")
        part2(a.work)
        return
    print(f"`optimize` on each bundled example's relaxation over every bucketing, level free, deterministic, "
          f"{a.work:g} reference seconds of work, h200 prices:\n")
    part1(a.work)


if __name__ == "__main__":
    main()
