"""Monolithic model against window LNS at the same deterministic work, on the capture corpus.

    python benchmarks/bench_lns.py [--work 6] [--graphs llama8_bwd ...] [--budget 1.0x]

For each graph: the best heuristic, the monolithic CP-SAT model alone, window
LNS alone and the default (monolithic, then LNS), each with the same work
limit (CP-SAT deterministic units, so the figures do not depend on load), and
the LNS windows per second. Used for the LNS rows in docs/solver.md.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os

from overlapsat import load_graph, optimize
from overlapsat.solver import SolveParams

HERE = os.path.dirname(os.path.abspath(__file__))

MODES = {
    "monolithic": dict(lns_min_nodes=10**9, lns_min_window_nodes=10**9, monolithic_share=1.0),
    "lns": dict(lns_min_nodes=1, lns_min_window_nodes=1),
    "default": {},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=float, default=6.0)
    ap.add_argument("--budget", default=None, help="a ratio ('1.0x') or a size ('40GiB')")
    ap.add_argument("--graphs", nargs="*")
    ap.add_argument("--modes", nargs="*", default=list(MODES))
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    paths = sorted(glob.glob(os.path.join(HERE, "corpus", "*.json.gz")))
    print(f"{'graph':12s} {'nodes':>5s} {'best pass':>10s} {'bound':>9s} "
          + " ".join(f"{m:>11s}" for m in a.modes) + "   lns windows/s")
    for p in paths:
        name = os.path.basename(p).split(".")[0]
        if a.graphs and name not in a.graphs:
            continue
        g = load_graph(p)
        cells, wps, bound, best_h = [], "", 0.0, 0.0
        for mode in a.modes:
            params = SolveParams(time_limit=600, work_limit=a.work, **MODES[mode])
            r = optimize(g, params, memory_budget=a.budget)
            best_h = min(h["makespan"] for h in r.heuristics if h["valid"])
            bound = max(bound, r.bound)
            cells.append(f"{r.makespan:11.1f}")
            ls = r.stats.get("lns")
            if mode == "lns" and ls:
                wps = f"{ls['windows'] / max(1e-9, r.stats['total_s'] - r.stats['heuristics_s']):.1f}"
        print(f"{name:12s} {len(g):5d} {best_h:10.1f} {bound:9.1f} " + " ".join(cells) + f"   {wps}", flush=True)


if __name__ == "__main__":
    main()
