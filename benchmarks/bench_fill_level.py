"""Decision 114: the fill moves with and without the level's collective sequence kept, on the bundled examples.

    python benchmarks/bench_fill_level.py > benchmarks/results/bench_fill_level_2026-12-03.md

`optimize` at level group (the CLI's and the torch bridge's default), 10 s, deterministic, each example's own
durations, with no budget and under the input order's peak: "before" is the fill as it was (its moves judged at
level free, so the search's validation threw away a fill that reversed two collectives of a group), "after" the
library's. Makespan, bound and status of each.
"""

from __future__ import annotations

import overlapsat.solver.search as search
from overlapsat import Problem, SolveParams, load_graph, optimize
from overlapsat.examples import bundled
from overlapsat.solver.fill import fill

EXAMPLES = ("tp_small", "fsdp_small", "ddp_small", "moe_small", "fsdp_medium", "tp_large")


def _as_before(g, order, budget, moves, stop=None, collective_order="free"):  # noqa: ANN001, ANN202
    return fill(g, order, budget, moves, stop, "free")


def row(name: str, budget: str | None, before: bool) -> str:
    search.fill = _as_before if before else fill
    g = load_graph(bundled(name))
    r = optimize(Problem.of(g, budget, "group"), SolveParams(time_limit=10))
    search.fill = fill
    return f"{r.makespan:,.1f} | {r.bound:,.1f} | {r.status.value}"


if __name__ == "__main__":
    print("`optimize` at level group, 10 s, deterministic, own durations:\n")
    print("| graph | budget | before: makespan us | bound us | status | after: makespan us | bound us | status |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | --- |")
    for name in EXAMPLES:
        for budget in (None, "1.0x"):
            print(f"| {name} | {budget or 'none'} | {row(name, budget, True)} | {row(name, budget, False)} |", flush=True)
