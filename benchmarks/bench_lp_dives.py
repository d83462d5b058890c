"""Decision 112: the whole CP-SAT model with a memory cumulative, with and without CP-SAT's dives along its LP's
solutions (`exploit_integer_lp_solution`, `exploit_all_lp_solution`).

    python benchmarks/bench_lp_dives.py > benchmarks/results/bench_lp_dives_2026-12-02.md

Two parts, each run both ways in this process (the library's choice, and the dives put back):
  - the whole model one plan search's final order solved on the bundled `fsdp_small` under its input order's peak
    (tests/data/or_tools/fsdp_small_lp_dives.pb.txt), at 0.166 deterministic seconds: wall seconds, branches,
    objective and bound;
  - `optimize_plan` on every bundled example under its default budget (the input order's peak) at 2 and 10 s:
    wall seconds, whether the clock cut a deterministic phase, makespan and gap.
"""

from __future__ import annotations

import os
import time

from ortools.sat.python import cp_model

import overlapsat.solver.cpsat as cpsat
from overlapsat import Problem, SolveParams, load_graph
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.solver.plan_search import optimize_plan

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "tests", "data", "or_tools", "fsdp_small_lp_dives.pb.txt")
EXAMPLES = ("tp_small", "fsdp_small", "ddp_small", "moe_small", "fsdp_medium", "tp_large")
LIMITS = (2.0, 10.0)


def _dives_kept(p: object, has_memory: bool) -> None:
    """The library before decision 112: CP-SAT's defaults."""


def one_model(dives: bool) -> str:
    m = cp_model.CpModel()
    with open(MODEL, encoding="utf-8") as f:
        m.proto.parse_text_format(f.read())
    s = cp_model.CpSolver()
    s.parameters.num_workers, s.parameters.max_deterministic_time = 1, 0.166
    (_dives_kept if dives else cpsat.without_lp_dives)(s.parameters, True)
    t = time.monotonic()
    st = s.solve(m)
    return (f"| {'with' if dives else 'without'} | {time.monotonic() - t:.2f} | {s.deterministic_time:.3f} | "
            f"{s.num_branches:,} | {s.status_name(st)} | {s.objective_value:,.0f} | {s.best_objective_bound:,.0f} |")


def plans(dives: bool) -> list[str]:
    price = cost_model("h200")
    cpsat.without_lp_dives = _dives_kept if dives else REAL
    out = []
    for name in EXAMPLES:
        g = load_graph(bundled(name)).reprice(price)
        for limit in LIMITS:
            t = time.monotonic()
            r = optimize_plan(Problem.of(g), price.duration, SolveParams(time_limit=limit))
            out.append(f"| {name} | {len(g.nodes):,} | {limit:g} | {'with' if dives else 'without'} | "
                       f"{time.monotonic() - t:.2f} | {'yes' if r.cut_by_wall_clock else 'no'} | "
                       f"{r.makespan:,.1f} | {100 * r.gap:.1f} % |")
    cpsat.without_lp_dives = REAL
    return out


REAL = cpsat.without_lp_dives

if __name__ == "__main__":
    print("The whole model of `fsdp_small`'s final order under its input order's peak, 0.166 deterministic s, one "
          "worker:\n")
    print("| LP dives | wall s | deterministic s | branches | status | objective | bound |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: |")
    for dives in (False, True):
        print(one_model(dives), flush=True)
    print("\n`optimize_plan` on the bundled examples under the input order's peak (deterministic, h200 prices):\n")
    print("| graph | nodes | limit s | LP dives | wall s | cut by the clock | makespan us | gap |")
    print("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |")
    for dives in (False, True):
        for row in plans(dives):
            print(row, flush=True)
