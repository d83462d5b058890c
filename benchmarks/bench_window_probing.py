"""Decision 125: CP-SAT's probing on LNS windows with a memory cumulative, and the deterministic count.

    python benchmarks/bench_window_probing.py [--time-limit 60] [NAME ...]

`optimize` (deterministic, level free) on corpus graphs under torch bucketed's peak, the order search the corpus
bench runs for its "overlapsat order" row, once with the library's windows (no probing where a window has a memory
cumulative) and once with CP-SAT's default probing put back on them. Per run: the wall time, whether the clock cut
the search and how much of its work it had done, the LNS windows solved and their mean wall time, and the makespan.
A deterministic search whose work the clock cuts may give another order on another machine or load.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from collections.abc import Callable
from typing import Any

from overlapsat import Problem, SolveParams, optimize
from overlapsat.io import graph_from_dict
from overlapsat.solver import lns as lns_module

HERE = os.path.dirname(os.path.abspath(__file__))
GRAPHS = ("moe_dsv3_L61_ep8_w128_bwd", "moe_dsv3_L32_ep8_w64_bwd", "llama3_8b_L32_w256")
# CP-SAT's own (2 in 9.15): a window without a memory cumulative keeps it
DEFAULT_PROBING = lns_module.window_solver(0.1, True, 1, 1.0, budgeted=False).parameters.cp_model_probing_level


def timed_search(path: str, limit: float, tweak: Callable[[Any], None]) -> tuple[Problem, Any, float, list[float]]:
    """`optimize` (deterministic, level free) on the corpus file at `path` under torch bucketed's peak, the corpus
    bench's "overlapsat order" search, with `tweak` applied to every LNS window's solver: the problem, the result,
    the wall time and each window's wall time."""
    d = json.load(gzip.open(path))
    p = Problem.of(graph_from_dict(d["graph"]), int(d["bucketed"]["peak_memory"]), "free")
    walls: list[float] = []
    real_solver, real_window = lns_module.window_solver, lns_module.solve_window

    def solver(*a, **k):
        s = real_solver(*a, **k)
        tweak(s.parameters)
        return s

    def window(*a, **k):
        t = time.monotonic()
        out = real_window(*a, **k)
        walls.append(time.monotonic() - t)
        return out

    lns_module.window_solver, lns_module.solve_window = solver, window
    try:
        t = time.monotonic()
        r = optimize(p, time_limit=limit, extra_orders={"torch OverlapScheduler": d["overlap_scheduler"]})
        wall = time.monotonic() - t
    finally:
        lns_module.window_solver, lns_module.solve_window = real_solver, real_window
    return p, r, wall, walls


def run(name: str, limit: float, default_probing: bool) -> str:
    def tweak(params: Any) -> None:
        if default_probing:
            params.cp_model_probing_level = DEFAULT_PROBING

    p, r, wall, walls = timed_search(os.path.join(HERE, "fx_corpus", f"{name}.json.gz"), limit, tweak)
    mean = sum(walls) / len(walls) if walls else 0.0
    probing = f"default ({DEFAULT_PROBING})" if default_probing else "none (0)"
    return (f"| {name} | {len(p.graph.nodes):,} | {probing} | {wall:.1f} | "
            f"{'yes' if r.stats.cut_by_wall_clock else 'no'} | {r.stats.get('work_used', 0.0):.2f} of "
            f"{SolveParams(time_limit=limit).total_work:.2f} | {len(walls)} | {mean:.3f} | "
            f"{max(walls, default=0.0):.2f} | {r.makespan / 1e3:.2f} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--time-limit", type=float, default=60.0)
    a = ap.parse_args()
    print(f"`optimize`, deterministic, {a.time_limit:g} s, level free, under torch bucketed's peak (recorded):\n")
    print("| graph | nodes | probing on budgeted windows | wall s | cut by the clock | work done | windows | "
          "mean window wall s | longest window s | makespan ms |")
    print("| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for name in a.names or GRAPHS:
        for default in (True, False):
            print(run(name, a.time_limit, default), flush=True)
