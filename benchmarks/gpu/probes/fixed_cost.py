"""Would a measured per-collective fixed cost change the plan? (runs 56-57, the tensor-parallel step)

    python benchmarks/gpu/probes/fixed_cost.py RUN_DIR [--extra-us 50] [--solve-s 20]

`h100_sxm`, the profile the H100 runs were priced with, is the analytical roofline: it prices an 8 MB
all_gather on 2 ranks at 26 us, and run 56's transport table measured 76 us held alone (32 MB: 68.5 against
128 us). This takes one rank's stored graphs of RUN_DIR (`store.tar.gz`), prices every collective
`--extra-us` higher (merged ones too), and scores the stored schedules of `p`, `tbb` and `d` under both
pricings, MODEL.md's makespan summed over the step's graphs, beside the measured step times. With
`--solve-s`, it also solves the plan again under the higher price, TBB given as a warm start, and says how
many buckets it chooses. An offline check of one hypothesis, not a measurement: the GPU decides.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import stored_schedules, unpack_store  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--extra-us", type=float, default=50.0)
    ap.add_argument("--solve-s", type=float, default=0.0)
    ap.add_argument("--profile", default="h100_sxm")
    a = ap.parse_args(argv)
    from overlapsat import Problem, simulate
    from overlapsat.cost import cost_model
    from overlapsat.graph import NodeKind
    from overlapsat.plan import Bucket, materialize

    res = json.load(open(os.path.join(a.run, "results.json"), encoding="utf-8"))
    order = res["meta"]["args"]["collective_order"]
    base = cost_model(a.profile).duration

    def higher(nd):
        return base(nd) + (a.extra_us if nd.kind is NodeKind.COLLECTIVE else 0.0)

    root = unpack_store(os.path.join(a.run, "store.tar.gz"))
    out: dict = {"run": os.path.basename(os.path.normpath(a.run)), "extra_us": a.extra_us, "configs": {}}
    for cfg in ("p", "tbb", "d"):
        store = os.path.join(root, "store", cfg)
        if not os.path.isdir(store):
            continue
        row = {"measured_ms": res["configs"].get(cfg, {}).get("ranks", [{}])[0].get("step_ms_median"),
               "plain_ms": 0.0, "higher_ms": 0.0, "buckets": 0, "collectives": 0}
        shapes: set[tuple[int, int]] = set()
        for fp, g0, sched, why in stored_schedules(store, order):
            # one rank's graphs: of several ranks' copies of one shape (runs 56-57 recorded each rank's,
            # decisions.md 48), the first by file name
            if (len(g0), len(g0.coll_seq)) in shapes:
                continue
            shapes.add((len(g0), len(g0.coll_seq)))
            if sched is None:
                raise SystemExit(f"{cfg} {fp}: {why}")
            relaxed = Problem.of(g0, None, order).relaxed
            bs = tuple(Bucket(tuple(b)) for b in (sched.buckets or ()))
            for key, price in (("plain_ms", base), ("higher_ms", higher)):
                g = relaxed.with_durations({nd.name: price(nd) for nd in relaxed.nodes
                                            if nd.kind is NodeKind.COLLECTIVE})
                h = materialize(g, bs, price) if bs else g
                row[key] += simulate(h, sched.order).makespan / 1e3
            row["buckets"] += len(bs)
            row["collectives"] += len(h.coll_seq)
            if a.solve_s and cfg == "p":  # `g`: the last pricing above, the higher one
                from benchmarks.gpu.e2e_step import PARAMS_PER_BLOCK, legal_tbb
                from overlapsat.solver.plan_search import optimize_plan

                prob = Problem.of(g, None, order)
                legal, _ = legal_tbb(prob.relaxed, len(PARAMS_PER_BLOCK))
                pr = optimize_plan(prob, higher, time_limit=a.solve_s, starts={"tbb": legal})
                row.setdefault("resolved", []).append({"buckets": len(pr.plan.buckets),
                                                       "collectives": len(pr.bucketed.coll_seq),
                                                       "makespan_ms": pr.makespan / 1e3,
                                                       "tbb_start_ms":
                                                           pr.stats["plan"]["starts"].get("tbb", 0.0) / 1e3})
        out["configs"][cfg] = row
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
