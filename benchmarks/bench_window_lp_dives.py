"""Decision 126: CP-SAT's dives along its LP's solutions on LNS windows with a memory cumulative.

    python benchmarks/bench_window_lp_dives.py [--time-limit 60] [--skip-peer]

Two parts, each run with the library's windows (no LP dives where a window has a memory cumulative) and with
CP-SAT's dives put back on them:
  - the order search of torch bucketed's buckets on `llama3_8b_L32_w256` under torch bucketed's peak, the corpus
    bench's peer row (`optimize`, deterministic, level free): wall time, whether the clock cut it and how much of
    its work it had done, windows solved, their mean and longest wall time, makespan;
  - the price of a budgeted window: wall seconds per CP-SAT deterministic second over every window with a memory
    cumulative that `optimize_plan` solves on the bundled examples under their default budget (the input order's
    peak) at 10 s, the measurement `DT_SCALE_MEMORY` was set from (median, 10th and 90th percentiles, and all
    wall over all deterministic time).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import time

from overlapsat import Problem, SolveParams, load_graph, optimize
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.io import graph_from_dict
from overlapsat.plan import bucket_problems, materialize
from overlapsat.solver import cpsat
from overlapsat.solver import lns as lns_module
from overlapsat.solver.plan_search import as_buckets, optimize_plan

HERE = os.path.dirname(os.path.abspath(__file__))
PEER_GRAPH = "llama3_8b_L32_w256"
EXAMPLES = ("tp_small", "fsdp_small", "ddp_small", "moe_small", "fsdp_medium", "tp_large")


class Windows:
    """Times every window solve, keeping the budgeted ones' wall and deterministic seconds; with `dives`, CP-SAT's
    LP dives are put back on budgeted windows."""

    def __init__(self, dives: bool) -> None:
        self.dives = dives
        self.walls: list[float] = []
        self.budgeted: list[tuple[float, float]] = []

    def __enter__(self) -> Windows:
        self.real_solver, self.real_solve = lns_module.window_solver, lns_module.contained_solve

        def solver(*a, **k):
            s = self.real_solver(*a, **k)
            if self.dives:
                s.parameters.exploit_integer_lp_solution = True
                s.parameters.exploit_all_lp_solution = True
            return s

        def solve(s, m):
            t = time.monotonic()
            out = self.real_solve(s, m)
            wall = time.monotonic() - t
            self.walls.append(wall)
            if s.parameters.cp_model_probing_level == 0:  # the library's mark of a budgeted window
                self.budgeted.append((wall, s.deterministic_time))
            return out

        lns_module.window_solver, lns_module.contained_solve = solver, solve
        return self

    def __exit__(self, *exc: object) -> None:
        lns_module.window_solver, lns_module.contained_solve = self.real_solver, self.real_solve


def dives_name(dives: bool) -> str:
    return "with (CP-SAT's default)" if dives else "without"


def peer(limit: float, dives: bool) -> str:
    d = json.load(gzip.open(os.path.join(HERE, "fx_corpus", f"{PEER_GRAPH}.json.gz")))
    price = cost_model("h200").duration
    p = Problem.of(graph_from_dict(d["graph"]), int(d["bucketed"]["peak_memory"]), "free")
    bs = [b for b in as_buckets(p.relaxed, d["bucketed"]["buckets"]) if not bucket_problems(p.relaxed, [b])]
    q = p.on(materialize(p.relaxed, bs, price))
    with Windows(dives) as w:
        t = time.monotonic()
        r = optimize(q, time_limit=limit)
        wall = time.monotonic() - t
    mean = sum(w.walls) / len(w.walls) if w.walls else 0.0
    return (f"| {PEER_GRAPH} | {len(q.graph.nodes):,} | {dives_name(dives)} | {wall:.1f} | "
            f"{'yes' if r.stats.cut_by_wall_clock else 'no'} | {r.stats.get('work_used', 0.0):.2f} of "
            f"{SolveParams(time_limit=limit).total_work:.2f} | {len(w.walls)} | {mean:.3f} | "
            f"{max(w.walls, default=0.0):.2f} | {r.makespan / 1e3:.2f} |")


def price(dives: bool) -> str:
    cm = cost_model("h200")
    with Windows(dives) as w:
        for name in EXAMPLES:
            g = load_graph(bundled(name)).reprice(cm)
            optimize_plan(Problem.of(g), cm.duration, SolveParams(time_limit=10.0))
    ratios = sorted(wall / det for wall, det in w.budgeted if det > 0)
    if len(ratios) < 10:
        return f"| {dives_name(dives)} | {len(ratios)} | - | - | - | - |"
    dec = statistics.quantiles(ratios, n=10)
    total = sum(wall for wall, _ in w.budgeted) / sum(det for _, det in w.budgeted)
    return (f"| {dives_name(dives)} | {len(ratios)} | {statistics.median(ratios):.1f} | {dec[0]:.1f} | "
            f"{dec[-1]:.1f} | {total:.1f} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--skip-peer", action="store_true")
    a = ap.parse_args()
    if not a.skip_peer:
        print(f"Torch bucketed's buckets ordered by `optimize`, deterministic, {a.time_limit:g} s, level free, under "
              "torch bucketed's peak (recorded):\n")
        print("| graph | nodes | LP dives on budgeted windows | wall s | cut by the clock | work done | windows | "
              "mean window wall s | longest window s | makespan ms |")
        print("| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        for dives in (True, False):
            print(peer(a.time_limit, dives), flush=True)
        print()
    print(f"Wall seconds per deterministic second of the windows with a memory cumulative, `optimize_plan` at 10 s on "
          f"the bundled examples under their input order's peak (`DT_SCALE_MEMORY` = {cpsat.DT_SCALE_MEMORY:g}):\n")
    print("| LP dives | windows | median | 10th percentile | 90th percentile | all wall / all deterministic |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for dives in (True, False):
        print(price(dives), flush=True)
