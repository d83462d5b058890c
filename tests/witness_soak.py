"""The witness search's soak (decision 60): random and edge graphs of 10-14 nodes (tests/brute.py), each at the
least peak of all its valid orders (brute force), solved by `optimize` at a 1-s limit with and without the
witness phase. Counted: valid answers, "no valid order", false "infeasible", invalid answers, exceptions.

    python tests/witness_soak.py FIRST_SEED END_SEED > benchmarks/results/witness_least_peak_DATE.json
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import overlapsat as osat  # noqa: E402
import overlapsat.solver.search as search  # noqa: E402
from tests.brute import brute_force, edge_graph, random_graph  # noqa: E402


def outcome(g: osat.Graph, co: str, budget: int) -> str:
    try:
        r = osat.optimize(g, time_limit=1, memory_budget=budget, collective_order=co, workers=2)
    except osat.NoValidOrderError:
        return "no_valid_order"
    except osat.InfeasibleBudgetError:
        return "FALSE_INFEASIBLE"
    except Exception as e:  # noqa: BLE001 - counted by its kind
        return f"exception {type(e).__name__}"
    return "INVALID" if osat.validate(g, r.order, budget, collective_order=co) else "valid"


def main() -> None:
    logging.disable(logging.WARNING)
    first, end = int(sys.argv[1]), int(sys.argv[2])
    counts: dict[str, dict[str, int]] = {"without_witness": {}, "with_witness": {}}
    t0, graphs = time.time(), 0
    for seed in range(first, end):
        g, co = (edge_graph if seed % 2 else random_graph)(seed, max_nodes=14)
        if len(g.nodes) < 10:
            continue
        truth = brute_force(g, co, limit=200_000)
        if truth is None or not truth.orders:
            continue
        graphs += 1
        for mode, nodes in (("without_witness", 0), ("with_witness", 64)):
            search.WITNESS_NODES = nodes
            k = outcome(g, co, truth.min_peak)
            counts[mode][k] = counts[mode].get(k, 0) + 1
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    print(json.dumps({"date": time.strftime("%Y-%m-%d"), "commit": commit.strip(), "seeds": [first, end],
                      "graphs_10_to_14_nodes": graphs, "budget": "least peak of every valid order (brute force)",
                      "time_limit_s": 1, **counts, "wall_s": round(time.time() - t0)}, indent=1))


if __name__ == "__main__":
    main()
