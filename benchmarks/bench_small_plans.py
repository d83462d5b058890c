"""`optimize_plan` on the bundled examples: both levels, the input order's peak and no budget, 2 s and 10 s by
default, in deterministic mode (the same plan on any machine unless the clock cuts it, which the `cut` column
and the closing line count). Run at two commits to compare.

    python benchmarks/bench_small_plans.py [--limits 1 2] [--budgets 1.0x 1.2x none] > out.md
"""

from __future__ import annotations

import argparse
import logging
import time

from overlapsat import GraphError, Problem, load_graph
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.solver.plan_search import optimize_plan

EXAMPLES = ("tp_small", "ddp_small", "moe_small", "fsdp_small", "fsdp_medium", "tp_large")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limits", nargs="+", type=float, default=[2.0, 10.0])
    ap.add_argument("--budgets", nargs="+", default=["1.0x", "none"])
    ap.add_argument("--levels", nargs="+", default=["free", "group"])
    ap.add_argument("--examples", nargs="+", default=list(EXAMPLES))
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    model = cost_model("h200")
    print("| graph | level | budget | limit s | plan ms | bound ms | buckets | cut by the clock | s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |")
    runs = cuts = 0
    for name in args.examples:
        g = load_graph(bundled(name)).reprice(model)
        for level in args.levels:
            for budget in args.budgets:
                for limit in args.limits:
                    t = time.perf_counter()
                    try:
                        r = optimize_plan(Problem.of(g, budget, level), model.duration, time_limit=limit)
                        cells = f"{r.makespan / 1e3:.4f} | {r.bound / 1e3:.4f} | {len(r.buckets)} | " \
                                f"{'yes' if r.cut_by_wall_clock else 'no'}"
                        runs, cuts = runs + 1, cuts + r.cut_by_wall_clock
                    except GraphError as e:
                        cells = f"{type(e).__name__} | - | - | -"
                    print(f"| {name} | {level} | {budget} | {limit:g} | {cells} | {time.perf_counter() - t:.2f} |",
                          flush=True)
    print(f"\n{cuts} of {runs} plans cut by the clock.")


if __name__ == "__main__":
    main()
