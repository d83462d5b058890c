"""Compare the interval (no-overlap) and pairwise-disjunction formulations of the compute stream.

    python benchmarks/bench_formulation.py [--time-limit 20]
"""

from __future__ import annotations

import argparse
import time

from ortools.sat.python import cp_model

from overlapsat.examples import generate
from overlapsat.heuristics import best
from overlapsat.solver import build, model_units

SCALE = 100.0


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
            md = build(g, scale=SCALE, horizon=model_units(g, h.order, SCALE), formulation=form)
            md.hint_order(h.order)
            tb = time.perf_counter() - t
            s = cp_model.CpSolver()
            s.parameters.num_workers = 2
            s.parameters.max_time_in_seconds = a.time_limit
            st = s.solve(md.m)
            print(f"{kind:6s} {len(g):5d} {form:>11s} {tb:8.2f} {s.status_name(st):>9s} {s.objective_value / SCALE:10.1f} "
                  f"{s.best_objective_bound / SCALE:10.1f} {s.wall_time:8.2f}", flush=True)


if __name__ == "__main__":
    main()
