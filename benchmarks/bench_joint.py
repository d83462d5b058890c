"""The joint CP-SAT model of buckets and order (decision 43) on the graphs small enough for it.

    python benchmarks/bench_joint.py [--time-limit 20]

Per graph, priced by the calibrated H200 model, level free, no budget, deterministic: `optimize_plan` with the
joint model left out (`joint=False`: the hill climb's plan and the relaxation's bound, as before decision 43) and
with it. Columns: the plan's makespan, the bound over every plan, the gap, whether the plan is proven optimal over
every plan, and what the joint model did (its candidates, every legal bucket or not, CP-SAT's status, and whether
its plan was shorter). Graphs: the bundled ddp_small, generated FSDP and DDP steps whose bucket keys have at most 6
collectives (every legal bucket is a candidate), and the captured FSDP graphs of tests/data (8-12 per key: runs
of neighbours only). Graphs with at most 32 bucketings are left out: each of their bucketings is ordered instead.
"""

from __future__ import annotations

import argparse
import glob
import os

from overlapsat import Problem
from overlapsat.cost import cost_model
from overlapsat.examples import bundled, generate
from overlapsat.io import load_graph
from overlapsat.solver.plan_search import EXHAUSTIVE_BUCKETINGS, all_bucketings, optimize_plan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def graphs():
    yield "ddp_small (bundled)", load_graph(bundled("ddp_small"))
    yield "fsdp, 3 layers (generated)", generate("fsdp", seed=1, layers=3)
    yield "ddp, 6 layers (generated)", generate("ddp", seed=1, layers=6)
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "captured_fsdp*.json"))):
        yield os.path.basename(path).removesuffix(".json"), load_graph(path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=20.0)
    a = ap.parse_args()
    model = cost_model("h200")
    print(f"Time limit {a.time_limit:g} s per plan, level free, no budget, deterministic; makespans in us.\n")
    print("| graph | nodes | bucketings | without: plan | without: bound | without: gap | with: plan | with: bound "
          "| with: gap | with: proven | joint model |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for name, g in graphs():
        g = g.reprice(model)
        p = Problem.of(g, None, "free")
        space = all_bucketings(p.relaxed, 10**4)
        if space is not None and len(space) <= EXHAUSTIVE_BUCKETINGS:
            continue
        off = optimize_plan(p, model.duration, time_limit=a.time_limit, joint=False)
        on = optimize_plan(p, model.duration, time_limit=a.time_limit)
        j = on.stats["plan"]["joint"]
        what = (f"not run: {j['skipped']}" if "skipped" in j else
                f"{j['candidates']} candidates ({'all' if j['complete'] else 'runs'}), "
                f"{str(j['solver_status']).lower()}" + (", plan kept" if j.get("used") else ""))
        print(f"| {name} | {len(g.nodes)} | {len(space) if space is not None else '> 10^4'} | {off.makespan:.2f} | "
              f"{off.bound:.2f} | {100 * off.gap:.2f} % | {on.makespan:.2f} | {on.bound:.2f} | {100 * on.gap:.2f} % | "
              f"{'yes' if on.proven else 'no'} | {what} |", flush=True)


if __name__ == "__main__":
    main()
