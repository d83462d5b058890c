"""Solver benchmark: generated graphs (and the captured ones) against the best heuristic.

    python benchmarks/bench_solver.py                       # the documented sweep (about 25 min)
    python benchmarks/bench_solver.py --sizes 300 --time-limit 10

Per instance: nodes, best heuristic exposed time, solver exposed time, reduction,
lower bound on exposed time, gap, time to beat the heuristic, total time.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time

from overlapsat import optimize, validate
from overlapsat.examples import generate
from overlapsat.io import graph_from_dict

DEFAULT = [(300, 10.0), (2000, 60.0), (20000, 300.0)]


def row(name: str, g, limit: float) -> str:
    t = time.monotonic()
    r = optimize(g, time_limit=limit)
    total = time.monotonic() - t
    assert validate(g, r.order) == []
    h = min((x for x in r.heuristics if x["valid"]), key=lambda x: x["makespan"])
    red = (h["exposed"] - r.exposed) / h["exposed"] if h["exposed"] > 0 else 0.0
    beat = r.stats.get("time_to_best_s") if r.method.startswith("cpsat") else None
    first = r.stats.get("time_to_first_s") if r.method.startswith("cpsat") else None
    return (f"| {name} | {len(g)} | {h['exposed']:.1f} | {r.exposed:.1f} | {100 * red:.2f}% | {r.exposed_bound:.1f} | "
            f"{100 * r.gap:.2f}% | {r.status.value} | {r.stats.get('heuristics_s', 0.0):.1f} | "
            f"{'-' if first is None else f'{first:.1f}'} | {'-' if beat is None else f'{beat:.1f}'} | {total:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*")
    ap.add_argument("--time-limit", type=float)
    ap.add_argument("--kinds", nargs="+", default=["fsdp", "tp", "ddp", "moe"])
    ap.add_argument("--captured", action="store_true", help="also the captured graphs in tests/data")
    a = ap.parse_args()
    plan = [(n, a.time_limit or lim) for n, lim in DEFAULT] if not a.sizes else [(n, a.time_limit or 10.0) for n in a.sizes]
    print("| graph | nodes | heuristic exposed us | solver exposed us | reduction | bound exposed us | gap | status | "
          "portfolio s | first improvement s | time to best s | total s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for n, lim in plan:
        for kind in a.kinds:
            g = generate(kind, nodes=n, seed=1)
            print(row(f"{kind} ({lim:.0f} s)", g, lim), flush=True)
    if a.captured:
        here = os.path.join(os.path.dirname(__file__), "..", "tests", "data")
        for p in sorted(glob.glob(os.path.join(here, "captured_*.json"))):
            with open(p) as f:
                g = graph_from_dict(json.load(f)["graph"])
            print(row(os.path.basename(p)[9:-5] + " (10 s)", g, 10.0), flush=True)


if __name__ == "__main__":
    main()
