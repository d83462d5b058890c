"""Time every heuristic pass on generated graphs of 1k, 5k and 20k nodes.

    python benchmarks/bench_heuristics.py [--sizes 1000 5000 20000] [--kinds fsdp tp]

Prints a markdown table of seconds per pass (the one docs/heuristics.md quotes).
"""

from __future__ import annotations

import argparse
import time

from overlapsat import simulate
from overlapsat.examples import generate
from overlapsat.heuristics import (
    raise_comms,
    reorder_communication_preserving_peak_memory,
    reorder_compute_for_overlap,
    sink_waits,
    sink_waits_iterative,
    topological_sort_bfs,
    topological_sort_dfs,
    topological_sort_lpmf,
)

PASSES = [sink_waits, raise_comms, reorder_compute_for_overlap, reorder_communication_preserving_peak_memory,
          sink_waits_iterative, topological_sort_lpmf, topological_sort_bfs, topological_sort_dfs]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    ap.add_argument("--kinds", nargs="+", default=["fsdp", "tp", "ddp", "moe"])
    a = ap.parse_args()
    print("| graph | nodes | " + " | ".join(p.__name__.replace("reorder_communication", "reorder_comm")
                                             .replace("topological_sort_", "") for p in PASSES) + " |")
    print("| --- | ---: |" + " ---: |" * len(PASSES))
    for kind in a.kinds:
        for n in a.sizes:
            g = generate(kind, nodes=n)
            chained = g.with_collective_chain()
            row = []
            for p in PASSES:
                t = time.perf_counter()
                r = p(chained)
                row.append(time.perf_counter() - t)
                simulate(g, r.order)
            print(f"| {kind} | {len(g):,} | " + " | ".join(f"{x:.3f}" for x in row) + " |", flush=True)


if __name__ == "__main__":
    main()
