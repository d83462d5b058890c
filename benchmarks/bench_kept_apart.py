"""The bound over every bucketing under a budget with and without decision 106 (pairs a budget keeps out of one
bucket, and transfers whose output would live through a step with no room), on the bundled examples and the FX
corpus, at three budgets: the least peak any order reaches (proven floor), the input order's peak, and torch
bucketed's recorded peak (corpus only).

    python benchmarks/bench_kept_apart.py [--level group] [--small | --large] > out.md

`--large`: the 36,401-node FSDP step of the time-limit bench (`generate("fsdp", seed=1, layers=1300)`) alone.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import time

from overlapsat import Problem, load_graph
from overlapsat.cost import cost_model
from overlapsat.examples import bundled, generate
from overlapsat.io import graph_from_dict
from overlapsat.solver.memory_bound import peak_floor
from overlapsat.solver.plan_bound import KEPT_APART, analytical_over_bucketings

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = ("tp_small", "ddp_small", "moe_small", "fsdp_small", "tp_large", "fsdp_medium")


def _graphs(small: bool, large: bool = False):
    if large:
        yield "fsdp 1300 layers", generate("fsdp", seed=1, layers=1300), {}
        return
    model = cost_model("h200")
    for name in EXAMPLES:
        yield name, load_graph(bundled(name)).reprice(model), {}
    if small:
        return
    for path in sorted(glob.glob(os.path.join(HERE, "fx_corpus", "*.json.gz"))):
        d = json.load(gzip.open(path))
        yield (os.path.basename(path).removesuffix(".json.gz"), graph_from_dict(d["graph"]),
               {"torch bucketed's peak": int(d["bucketed"]["peak_memory"])})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--level", default="free", choices=("free", "group", "global", "chain"))
    ap.add_argument("--small", action="store_true", help="the bundled examples only")
    ap.add_argument("--large", action="store_true", help="the 36,401-node FSDP step alone")
    a = ap.parse_args()
    price = cost_model("h200").duration
    what = "its own durations (merged collectives priced by H200's profile)" if a.large else "H200 prices"
    print(f"Level {a.level!r}, {what}; bounds in ms. 'before': without decision 106.\n")
    print("| graph | nodes | budget | GiB | before | after | lift | pairs kept apart | after s |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for name, g, extra in _graphs(a.small, a.large):
        budgets = {"least peak (proven floor)": peak_floor(g)[0], "input order's peak": "1.0x", **extra}
        for why, budget in budgets.items():
            p = Problem.of(g, budget if isinstance(budget, str) else f"{budget}B", a.level)
            before = analytical_over_bucketings(p, price, memory_pairs=False)[1]
            p = Problem.of(g, budget if isinstance(budget, str) else f"{budget}B", a.level)  # nothing cached
            t = time.perf_counter()
            _, after, notes = analytical_over_bucketings(p, price)
            s = time.perf_counter() - t
            print(f"| {name} | {len(g.nodes):,} | {why} | {p.budget / 2**30:.2f} | {before / 1e3:.3f} | "
                  f"{after / 1e3:.3f} | {100 * (after / before - 1):+.2f} % | {'yes' if KEPT_APART in notes else 'no'} "
                  f"| {s:.2f} |", flush=True)


if __name__ == "__main__":
    main()
