"""Budgeted solves in both modes at one time limit: the row that catches a deterministic search weaker than the
timed one under a budget (issue: one search under one clock; decisions 36 and 59).

    python benchmarks/bench_budgeted.py [--time-limit 10] [--out benchmarks/results/bench_budgeted_DATE.md]

The captured backward graphs of the test data (Inductor, torch 2.13, CPU fake process group), budget 1.0x of
the input order's peak, levels chain and group: deterministic (the default) and timed, the same limit.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from overlapsat import load_graph, optimize

HERE = os.path.dirname(os.path.abspath(__file__))
GRAPHS = ("captured_tp2_bwd", "captured_tp4_bwd", "captured_fsdp2_bwd", "captured_fsdp3_bwd")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    lines = [f"time limit {a.time_limit:g} s, budget 1.0x, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}", "",
             "| graph | nodes | level | deterministic us | stopped by | work | timed us | deterministic / timed |",
             "| --- | ---: | --- | ---: | --- | ---: | ---: | ---: |"]
    print("\n".join(lines), flush=True)
    for name in GRAPHS:
        g = load_graph(os.path.join(HERE, "..", "tests", "data", f"{name}.json"))
        for level in ("chain", "group"):
            det = optimize(g, time_limit=a.time_limit, memory_budget="1.0x", collective_order=level)
            timed = optimize(g, time_limit=a.time_limit, memory_budget="1.0x", collective_order=level,
                             deterministic=False)
            row = (f"| {name} | {len(g.nodes)} | {level} | {det.makespan:.2f} | {det.stopped_by} | "
                   f"{det.stats['work_used']:.2f} | {timed.makespan:.2f} | {det.makespan / timed.makespan:.3f} |")
            lines.append(row)
            print(row, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
