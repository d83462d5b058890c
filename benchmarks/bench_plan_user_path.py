"""The plan a user gets: `optimize_plan` on each FX corpus graph with nothing but the problem and the price (as
`overlapsat plan` and `solve-cache --plans` call it), under torch bucketed's recorded peak, deterministic.
`bench_plan.py` gives the plan more (optimize's unbucketed result, torch's order, the peers' solved bucketings);
this shows what the plan search finds alone.

    python benchmarks/bench_plan_user_path.py --time-limit 10
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import time

from overlapsat import Problem
from overlapsat.cost.model import cost_model
from overlapsat.io import graph_from_dict
from overlapsat.solver.plan_search import optimize_plan

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--level", default="free")
    a = ap.parse_args()
    price = cost_model("h200").duration
    print(f"Time limit {a.time_limit:g} s per plan, level {a.level!r}, deterministic, budget: torch bucketed's peak "
          "(recorded); makespans in ms.\n")
    print("| graph | nodes | plan | buckets | depends on the input order | cut by the clock | s |")
    print("| --- | ---: | ---: | ---: | --- | --- | ---: |")
    for path in sorted(glob.glob(os.path.join(HERE, "fx_corpus", "*.json.gz"))):
        name = os.path.basename(path).removesuffix(".json.gz")
        if a.names and name not in a.names:
            continue
        with gzip.open(path, "rt", encoding="utf-8") as f:
            d = json.load(f)
        g = graph_from_dict(d["graph"])
        p = Problem.of(g, int(d["bucketed"]["peak_memory"]), a.level)
        t = time.monotonic()
        r = optimize_plan(p, price, time_limit=a.time_limit)
        print(f"| {name} | {len(g.nodes):,} | {r.makespan_us / 1e3:.2f} | {len(r.buckets)} | "
              f"{'yes' if r.plan_info.depends_on_input_order else 'no'} | {'yes' if r.cut_by_wall_clock else 'no'} | "
              f"{time.monotonic() - t:.1f} |", flush=True)


if __name__ == "__main__":
    main()
