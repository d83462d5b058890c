"""Compare the interval (no-overlap) and pairwise-disjunction formulations of the compute stream.

    python benchmarks/bench_formulation.py [--time-limit 20]
"""

from __future__ import annotations

import argparse
import time

from ortools.sat.python import cp_model

from overlapsat import Problem
from overlapsat.bounds import _grow
from overlapsat.examples import generate
from overlapsat.heuristics import best
from overlapsat.solver import Model, build, choose_scale, model_units


class PairwiseModel(Model):
    """The rejected alternative: one order literal per pair of nodes not ordered by dependencies."""

    def add_compute_stream(self) -> None:
        g, n = self.g, len(self.g.nodes)
        for u in range(n):
            seen = bytearray(n)
            _grow(u, g.succs, seen, g.kind, g.dur)
            for v in range(u + 1, n):
                if not seen[v]:
                    before = self.m.new_bool_var(f"before[{u},{v}]")
                    self.m.add(self.issue[v] >= self.slot_end[u]).only_enforce_if(before)
                    self.m.add(self.issue[u] >= self.slot_end[v]).only_enforce_if(~before)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=20.0)
    a = ap.parse_args()
    print(f"{'graph':6s} {'nodes':>5s} {'formulation':>11s} {'build s':>8s} {'status':>9s} {'objective':>10s} "
          f"{'bound':>10s} {'solve s':>8s}")
    for kind, n in (("tp", 150), ("tp", 300), ("fsdp", 300), ("moe", 300), ("tp", 600)):
        g = generate(kind, nodes=n, seed=1)
        h = best(g)
        for form in ("interval", "pairwise"):
            t = time.perf_counter()
            ts = choose_scale(g)
            horizon = model_units(g, h.order, ts)
            variant = {} if form == "interval" else {"model_cls": PairwiseModel}
            md = build(Problem(g), ts, h.order, horizon=horizon, **variant)
            tb = time.perf_counter() - t
            s = cp_model.CpSolver()
            s.parameters.catch_sigint_signal = False  # OR-Tools' handler would outlive the solve
            s.parameters.num_workers = 2
            s.parameters.max_time_in_seconds = a.time_limit
            st = s.solve(md.m)
            obj, bnd = ts.bound_us(int(s.objective_value)), ts.bound_us(int(s.best_objective_bound))
            print(f"{kind:6s} {len(g):5d} {form:>11s} {tb:8.2f} {s.status_name(st):>9s} {obj:10.1f} "
                  f"{bnd:10.1f} {s.wall_time:8.2f}", flush=True)


if __name__ == "__main__":
    main()
