"""Soak of the bucket-mate cut prototype (`benchmarks/bench_bucket_mate_cut.py`, not the library's) against brute
force over every plan (the record: benchmarks/results/bench_energetic_2026-12-03.md).

    python tests/bucket_mate_soak.py [--seeds 150]

Per seed, three gathers of one key (`tests/test_plan.py::_gathers` with its prices), where a bucket of the first
and the third passes the second at level group. Brute force lists every plan (`few_bucketings`, each bucketed graph
ordered at group); at no budget, the least peak over every plan and the largest, the relaxation over every bucketing
is solved by `optimize` (1 reference second of work) with and without the cut. The cut's bound must never pass the
best plan; the script counts where it is above the relaxation's own.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]


def main() -> None:
    import bench_bucket_mate_cut as cut

    from overlapsat import Graph, GraphError, Problem, SolveParams, optimize
    from overlapsat.plan import materialize
    from overlapsat.solver.plan_bound import analytical_over_bucketings
    from tests.brute import brute_force
    from tests.test_plan import _PRICES, _gathers, few_bucketings, replace_dur

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=150)
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    checked = tightened = false = 0
    for seed in range(a.seeds):
        g = _gathers(seed)
        price = _PRICES[seed % 3](random.Random(seed).choice([0.5, 5.0, 50.0]))
        g = Graph(tuple(replace_dur(nd, price) for nd in g.nodes), g.buffers, g.edges, g.atomic_groups, g.name)
        rg0 = Problem.of(g, "none", "group").relaxed
        truths = []
        for bs in few_bucketings(rg0):
            try:
                t = brute_force(materialize(rg0, list(bs), price), "group")
            except GraphError:
                continue
            if t is not None and t.orders:
                truths.append(t)
        if not truths:
            continue
        for budget in dict.fromkeys((None, min(t.min_peak for t in truths), max(t.min_peak for t in truths))):
            best = min((b for t in truths if (b := t.best(budget)) is not None), default=None)
            if best is None:
                continue
            rg = analytical_over_bucketings(Problem.of(g, budget, "group"), price)[0]
            params = SolveParams(time_limit=30, work_limit=1, collective_order="free")
            bounds = [optimize(Problem(rg, budget, "free"), params).bound]
            with cut.cut_on(None, budget):
                bounds.append(optimize(Problem(rg, budget, "free"), params).bound)
            checked += 1
            tightened += bounds[1] > bounds[0] + 1e-9
            if bounds[1] > best * (1 + 1e-9) + 1e-9:
                false += 1
                print(f"seed {seed}, budget {budget}: the cut's bound {bounds[1]} passes the best plan {best}")
    print(f"{checked} graph-budget pairs checked; the cut's bound above the relaxation's on {tightened}; "
          f"above the best plan on {false}")


if __name__ == "__main__":
    main()
