"""How many collectives a step's plan issues at each price of a collective's issue (MODEL.md's `launch`), offline.

    python benchmarks/gpu/probes/launch_sweep.py RUN_DIR --collective-order group|chain [--launch 0 40 70 110]

Re-solves the plans of a run's stored graphs (configuration `p`, rank 0's shapes) with each collective's launch
set to each price given, priced otherwise by `--profile` as on the GPU, and prints per price the plan's
collectives and buckets per step and its model makespan (run 68 chose its profile's price this way).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import stored_schedules, unpack_store  # noqa: E402


def with_launch(g, launch_us: float):
    """`g` with every collective's launch (its issue's price on the compute stream) set to `launch_us`."""
    from overlapsat import NodeKind

    nodes = tuple(replace(nd, launch=launch_us) if nd.kind is NodeKind.COLLECTIVE else nd for nd in g.nodes)
    return replace(g, nodes=nodes, meta=dict(g.meta))  # as Graph's own with_* copies are made


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--collective-order", required=True)
    ap.add_argument("--launch", type=float, nargs="+", default=[0.0, 40.0, 70.0, 110.0])
    ap.add_argument("--profile", default="h100_sxm")
    ap.add_argument("--solve-s", type=float, default=15.0)
    a = ap.parse_args(argv)
    from overlapsat import Problem, optimize_plan
    from overlapsat.cost import cost_model

    price = cost_model(a.profile).duration
    store = os.path.join(unpack_store(os.path.join(a.run, "store.tar.gz")), "store", "p")
    graphs = [g for _, g, _, _ in stored_schedules(store, a.collective_order)]
    for x in a.launch:
        row = {"launch_us": x, "collectives": 0, "buckets": 0, "makespan_ms": 0.0}
        for g in graphs:
            r = optimize_plan(Problem.of(with_launch(g, x), None, a.collective_order), price, time_limit=a.solve_s)
            row["collectives"] += len(r.bucketed.coll_seq)
            row["buckets"] += len(r.buckets)
            row["makespan_ms"] += r.makespan / 1e3
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
