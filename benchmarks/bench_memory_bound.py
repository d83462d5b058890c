"""What the budget does to the bound (decision 71): the FX corpus under budgets below the input order's peak.

    python benchmarks/bench_memory_bound.py [--time-limit 10] [--ratios 1.0 0.98 0.95 0.9] [NAME ...]

Per graph and budget (a ratio of the input order's peak, level `free`): the analytical bound (`lower_bound`, which
reads no budget), the overlap the budget leaves (`overlap_capacity_bound`) and what it took, and `optimize`'s
order within the budget (deterministic, `--time-limit` s) with the bound it reports and the gap to each bound.
Where no order within the budget is found, the bounds there say nothing useful (none may exist), so the summary
counts only the pairs with an order; it also gives the memory floor (`peak_floor`: a lower bound on every order's
peak) against the input order's peak, and how many budgets it proved unreachable.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import time

from overlapsat import InfeasibleBudgetError, NoValidOrderError, Problem, graph_from_dict, lower_bound, optimize, peak_memory
from overlapsat.solver.memory_bound import overlap_capacity_bound, peak_floor

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--ratios", type=float, nargs="+", default=[1.0, 0.98, 0.95, 0.9])
    a = ap.parse_args()
    print(f"Time limit {a.time_limit:g} s per solve, level 'free', deterministic; makespans and bounds in ms.\n")
    print("| graph | nodes | budget | analytical bound | memory bound | lift | bound s | order within the budget | "
          "bound reported | gap to the analytical bound | gap reported |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    lifts, gaps_before, gaps_after, floors = [], [], [], []
    proofs = 0
    for path in sorted(glob.glob(os.path.join(HERE, "fx_corpus", "*.json.gz"))):
        name = os.path.basename(path).removesuffix(".json.gz")
        if a.names and name not in a.names:
            continue
        g = graph_from_dict(json.load(gzip.open(path))["graph"])
        rg = g.relaxed("free")
        analytical = lower_bound(rg, "free").makespan
        peak = peak_memory(rg)
        floors.append((name, peak_floor(rg)[0] / peak))
        for r in a.ratios:
            budget = int(peak * r)
            t = time.monotonic()
            by_memory = overlap_capacity_bound(rg, budget)
            dt = time.monotonic() - t
            lift = by_memory / analytical - 1
            try:
                res = optimize(Problem.of(g, budget, "free"), time_limit=a.time_limit)
                ms, bound = res.makespan, res.bound
                before, after = ms / analytical - 1, ms / bound - 1
                lifts.append(lift)  # only where an order within the budget exists: elsewhere any bound holds
                gaps_before.append(before)
                gaps_after.append(after)
                tail = f"{ms / 1e3:.2f} | {bound / 1e3:.2f} | {100 * before:.1f} % | {100 * after:.1f} %"
            except InfeasibleBudgetError:
                proofs += 1
                tail = "none: proven unreachable | - | - | -"
            except NoValidOrderError:
                tail = "none found | - | - | -"
            print(f"| {name} | {len(g.nodes):,} | {r:g} x | {analytical / 1e3:.2f} | {by_memory / 1e3:.2f} | "
                  f"{100 * lift:+.2f} % | {dt:.2f} | {tail} |", flush=True)
    if floors:
        print(f"\nThe memory floor (a proven lower bound on every order's peak) is {100 * min(f for _, f in floors):.2f}"
              f"-{100 * max(f for _, f in floors):.2f} % of the input order's peak over {len(floors)} graphs; "
              f"{proofs} graph-budget pairs were proven unreachable.")
    if lifts:
        print(f"Where an order within the budget was found ({len(lifts)} graph-budget pairs), the memory bound "
              f"lifts the analytical bound on {sum(x > 0 for x in lifts)}"
              + (f", by up to {100 * max(lifts):.2f} %." if max(lifts) > 0 else "."))
    if gaps_before:
        print(f"Gap of the order found within the budget: at most {100 * max(gaps_before):.1f} % to the analytical "
              f"bound, at most {100 * max(gaps_after):.1f} % to the bound reported, over {len(gaps_before)} pairs "
              f"with an order.")


if __name__ == "__main__":
    main()
