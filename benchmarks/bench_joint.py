"""The joint CP-SAT model of buckets and order (decision 43) on the graphs small enough for it.

    python benchmarks/bench_joint.py [--time-limit 20]
    python benchmarks/bench_joint.py --dt

`--dt`: what the joint model's CP-SAT deterministic second costs in wall seconds (`cpsat.DT_SCALE_JOINT` is set
from it), on the bundled graphs, the graphs below and generated ones, at two deterministic limits.

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
from overlapsat.solver.cpsat import DT_SCALE_JOINT, JOINT_START_S
from overlapsat.solver.joint import solve_joint
from overlapsat.solver.params import SolveParams
from overlapsat.solver.plan_search import EXHAUSTIVE_BUCKETINGS, all_bucketings, optimize_plan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def graphs():
    yield "ddp_small (bundled)", load_graph(bundled("ddp_small"))
    yield "fsdp, 3 layers (generated)", generate("fsdp", seed=1, layers=3)
    yield "ddp, 6 layers (generated)", generate("ddp", seed=1, layers=6)
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "captured_fsdp*.json"))):
        yield os.path.basename(path).removesuffix(".json"), load_graph(path)


def dt_price(model) -> None:
    """Wall seconds per CP-SAT deterministic second of the joint model, per graph, at two deterministic limits."""
    import statistics

    named = [(f"{n} (bundled)", load_graph(bundled(n))) for n in ("tp_small", "ddp_small", "fsdp_small")]
    named += [(f"{kind}, seed {s} (generated)", generate(kind, seed=s, layers=3)) for kind in ("fsdp", "ddp", "tp")
              for s in (1, 2)]
    print("Joint model (level free, no budget, deterministic, one worker): wall seconds per deterministic second. "
          "Solves that ended before their limit (proven) pay CP-SAT's fixed costs over little deterministic time.\n")
    print("| graph | nodes | candidates | deterministic limit (s) | deterministic (s) | wall (s) | wall per "
          "deterministic second | status |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    ratios, slopes = [], []
    for name, g in named + list(graphs())[1:]:
        g = g.reprice(model)
        ran = []
        for dt in (0.05, 0.3):
            jr = solve_joint(Problem.of(g, "none", "free"), model.duration,
                             SolveParams(time_limit=60, work_limit=dt * DT_SCALE_JOINT + JOINT_START_S,
                                         collective_order="free"))
            s = jr.stats
            if "skipped" in s or not s.get("deterministic_s"):
                print(f"| {name} | {len(g.nodes)} | | {dt} | not run: {s.get('skipped') or s.get('error')} | | | |")
                break
            r = s["wall_s"] / s["deterministic_s"]
            ratios.append(r)
            if s["solver_status"] != "OPTIMAL":  # ran to its limit
                ran.append((s["deterministic_s"], s["wall_s"]))
            print(f"| {name} | {len(g.nodes)} | {s['candidates']} | {dt} | {s['deterministic_s']:.4f} | "
                  f"{s['wall_s']:.3f} | {r:.1f} | {str(s['solver_status']).lower()} |", flush=True)
        if len(ran) == 2:  # the wall per deterministic second past CP-SAT's start
            slopes.append((ran[1][1] - ran[0][1]) / (ran[1][0] - ran[0][0]))
    q = statistics.quantiles(ratios, n=10)
    print(f"\nBetween the two limits, on the {len(slopes)} graphs that ran to both: "
          f"{', '.join(f'{x:.1f}' for x in sorted(slopes))} wall seconds per deterministic second "
          f"(median {statistics.median(slopes):.1f}).")
    print(f"\n{len(ratios)} solves: median {statistics.median(ratios):.1f} wall seconds per deterministic second, "
          f"10th-90th percentiles {q[0]:.1f}-{q[-1]:.1f}; `DT_SCALE_JOINT` = {DT_SCALE_JOINT:g}.")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--dt", action="store_true", help="the joint model's price of a deterministic second")
    a = ap.parse_args()
    model = cost_model("h200")
    if a.dt:
        dt_price(model)
        return
    print(f"Time limit {a.time_limit:g} s per plan, level free, no budget, deterministic; makespans in us.\n")
    print("| graph | nodes | bucketings | without: plan | without: bound | without: gap | with: plan | with: bound "
          "| with: gap | with: proven | joint model |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for name, g in graphs():
        g = g.reprice(model)
        p = Problem.of(g, "none", "free")  # no budget, as the title says (None: the input order's peak)
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
