"""How soon does the plan search first beat its best warm start on a large graph? (issue #31: within 10 s at 16k)

    python benchmarks/bench_plan_scale.py [--layers 570] [--time-limit 10] [--level group]

A generated FSDP step (`overlapsat.examples.generate("fsdp")`, about 28 nodes per layer), priced for H200;
reports the warm starts' scores, when the first bucket move beat the best of them, and the plan's makespan.
"""

from __future__ import annotations

import argparse
import time

from overlapsat import Problem
from overlapsat.cost.model import cost_model
from overlapsat.examples import generate
from overlapsat.solver.plan_search import optimize_plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=570)
    ap.add_argument("--level", default="group")
    ap.add_argument("--time-limit", type=float, default=10.0)
    a = ap.parse_args()
    model = cost_model("h200")
    g = generate("fsdp", seed=1, layers=a.layers).reprice(model)
    t = time.monotonic()
    r = optimize_plan(Problem.of(g, None, a.level), model.duration, time_limit=a.time_limit, deterministic=False)
    wall = time.monotonic() - t
    ps = r.stats["plan"]
    best_start = min(ps["starts"].values())
    first = ps["first_move_s"]
    when = f"{first:.1f} s" if first is not None else "never"
    print(f"graph fsdp x{a.layers}: {len(g):,} nodes, {len(g.coll_seq)} collectives; timed, {a.time_limit:g} s, "
          f"level {a.level}")
    print("warm starts (us): " + ", ".join(f"{k} {v:,.0f}" for k, v in ps["starts"].items()))
    print(f"bucketings scored {ps['bucketings_scored']}, moves kept {ps['moves']['accepted']} of {ps['moves']['tried']}; "
          f"first move beating the best warm start at {when}")
    om = ps.get("order_moves") or {}
    if om:
        first_kept = om.get("first_kept_s")
        print(f"bucket moves keeping the order: {om['accepted']} kept of {om['tried']} in {om['seconds']:.1f} s"
              + (f" ({om['refused']} refused by the level's check)" if om.get("refused") else "")
              + (f", the first kept at {first_kept:.1f} s" if first_kept is not None else "")
              + (", their plan kept" if om.get("used") else ""))
    print(f"plan: {len(r.buckets)} buckets, makespan {r.makespan:,.0f} us ({100 * (r.makespan / best_start - 1):+.2f} % "
          f"against the best warm start), {wall:.1f} s in all")


if __name__ == "__main__":
    main()
