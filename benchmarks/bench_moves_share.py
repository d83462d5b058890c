"""Where the 10-s verdict's miss lies: how a plan search spends its work on one corpus graph at 10 and 60 s.

    python benchmarks/bench_moves_share.py > benchmarks/results/bench_moves_share_2026-12-03.md

For each named FX corpus graph (default: `llama3_8b_2d_L32_tp8_w256_bwd`, whose 10-s plan is the furthest from
its 60-s one in `bench_plan_torch_budget_2026-12-03.md`), under torch bucketed's peak as the budget, level free,
deterministic, h200 prices, with the same starts and candidates as `bench_plan.py` gives it: the plan, its gap to
the bound over every bucketing, and what each phase of the search did with its share of the ledger (reference
seconds: `solver/ledger.py`), above all the bucket hill climb and the bucket moves that keep the order.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time

from bench_plan import peer_rows

from overlapsat import Problem, optimize
from overlapsat.cost.model import cost_model
from overlapsat.io import graph_from_dict
from overlapsat.solver.plan_search import optimize_plan

HERE = os.path.dirname(os.path.abspath(__file__))


def one(name: str, seconds: float) -> list[str]:
    """The table rows of one graph at one time limit."""
    d = json.load(gzip.open(os.path.join(HERE, "fx_corpus", f"{name}.json.gz")))
    g = graph_from_dict(d["graph"])
    p = Problem.of(g, int(d["bucketed"]["peak_memory"]), "free")
    price = cost_model("h200").duration
    torch_order = {"torch OverlapScheduler": d["overlap_scheduler"]}
    order = optimize(p, time_limit=seconds, extra_orders=torch_order)
    peers = peer_rows(d, p, price, {"time_limit": seconds})  # as bench_plan.py gives them to the plan search
    starts = {k: legal for k, (legal, _, _) in peers.items() if legal}
    solved = {k: (legal, res) for k, (legal, _, res) in peers.items() if res is not None}
    t = time.monotonic()
    plan = optimize_plan(p, price, time_limit=seconds, starts=starts, unbucketed=order, extra_orders=torch_order,
                         solved=solved)
    wall = time.monotonic() - t
    ph = plan.stats.phases["plan"]
    led, mv, climb, pol = ph["ledger"], ph.get("order_moves") or {}, ph.get("moves") or {}, ph.get("polish") or {}
    steps = ", ".join(f"{k} {v:.2f}" for k, v in sorted(led["by_step_s"].items(), key=lambda kv: -kv[1]))
    gap = 100 * (plan.makespan - plan.bound) / plan.makespan
    return [f"| {name} | {seconds:g} | {plan.makespan / 1e3:.2f} | {len(plan.buckets)} | {gap:.1f} % | "
            f"{climb.get('tried', 0)} / {climb.get('accepted', 0)} | {mv.get('tried', 0)} / {mv.get('accepted', 0)} | "
            f"{led['spent_s']:.2f} ({steps}) | {led['final_s']:.2f} | "
            f"{pol.get('given', '-')} / {pol.get('tried', 0)} / {pol.get('accepted', 0)} | {wall:.1f} |"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*", default=["llama3_8b_2d_L32_tp8_w256_bwd"])
    ap.add_argument("--limits", type=float, nargs="*", default=[10.0, 60.0])
    a = ap.parse_args()
    print("Budget: torch bucketed's peak (recorded); level free, deterministic, h200 prices; ledger figures in "
          "reference seconds.\n")
    print("| graph | time limit s | plan ms | buckets | gap to the bound | hill climb: tried / kept | bucket moves: "
          "tried / kept | ledger spent before the final order (by step) | final order's share | polish's moves: given / "
          "tried / kept | plan search wall s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for name in a.names:
        for seconds in a.limits:
            print("\n".join(one(name, seconds)), flush=True)


if __name__ == "__main__":
    main()
