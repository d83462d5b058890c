"""`optimize_plan` on the bundled examples: both levels, the input order's peak and no budget, 2 s and 10 s, in
deterministic mode (the same plan on any machine unless the clock cuts it). Run at two commits to compare.

    python benchmarks/bench_small_plans.py > out.md
"""

from __future__ import annotations

import logging
import time

from overlapsat import GraphError, Problem, load_graph
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.solver.plan_search import optimize_plan

EXAMPLES = ("tp_small", "ddp_small", "moe_small", "fsdp_small", "fsdp_medium")


def main() -> None:
    logging.disable(logging.WARNING)
    model = cost_model("h200")
    print("| graph | level | budget | limit s | plan ms | bound ms | buckets | s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name in EXAMPLES:
        g = load_graph(bundled(name)).reprice(model)
        for level in ("free", "group"):
            for budget in ("1.0x", "none"):
                for limit in (2, 10):
                    t = time.perf_counter()
                    try:
                        r = optimize_plan(Problem.of(g, budget, level), model.duration, time_limit=limit)
                        cells = f"{r.makespan / 1e3:.4f} | {r.bound / 1e3:.4f} | {len(r.buckets)}"
                    except GraphError as e:
                        cells = f"{type(e).__name__} | - | -"
                    print(f"| {name} | {level} | {budget} | {limit} | {cells} | {time.perf_counter() - t:.1f} |",
                          flush=True)


if __name__ == "__main__":
    main()
