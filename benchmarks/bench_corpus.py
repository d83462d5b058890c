"""Solver strength on the capture corpus (benchmarks/corpus/*.json.gz): gap closed against the best pass.

    python benchmarks/bench_corpus.py --limits 10 60 --budgets none 1.0

Per graph and budget: nodes, the best valid Inductor pass (from the input
order) and its exposed time, the solver's exposed time at each limit, the
proven lower bound on exposed time, and the share of the gap between the best
pass and the bound that the solver closed.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import logging
import os

from overlapsat import graph_from_dict, optimize, validate

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limits", type=float, nargs="+", default=[10.0, 60.0])
    ap.add_argument("--budgets", nargs="+", default=["none", "1.0"])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--level", default="group", help="collective_order (docs/solver.md): chain, global, group, free")
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    cols = " | ".join(f"solver {lim:.0f} s | closed {lim:.0f} s" for lim in a.limits)
    print(f"| graph | level | budget | nodes | best pass | pass exposed us | {cols} | bound exposed us | status |")
    print("| --- | --- | --- | ---: | --- | ---: | " + " | ".join("---: | ---:" for _ in a.limits) + " | ---: | --- |")
    for path in sorted(glob.glob(os.path.join(HERE, "*.json.gz"))):
        name = os.path.basename(path)[:-8]
        if a.only and name not in a.only:
            continue
        with gzip.open(path, "rt", encoding="utf-8") as f:
            g = graph_from_dict(json.load(f)["graph"])
        for b in a.budgets:
            budget = None if b == "none" else float(b)
            runs = []
            for lim in a.limits:
                r = optimize(g, time_limit=lim, memory_budget=budget, collective_order=a.level)
                assert validate(g, r.order, budget, collective_order=a.level) == []
                runs.append(r)
            bound = max(r.exposed_bound for r in runs)  # every run's bound is valid: take the best
            passes = [h for h in runs[0].heuristics if h["valid"] and h["name"] != "input_order"]
            best = min(passes, key=lambda h: h["exposed"]) if passes else None
            cells = []
            for r in runs:
                room = (best["exposed"] - bound) if best else 0.0
                closed = (best["exposed"] - r.exposed) / room if best and room > 1e-9 else 1.0
                cells.append(f"{r.exposed:.1f} | {100 * closed:.0f}%")
            pname = best["name"] if best else "none valid"
            pexp = f"{best['exposed']:.1f}" if best else "-"
            print(f"| {name} | {a.level} | {b} | {len(g)} | {pname} | {pexp} | {' | '.join(cells)} | {bound:.1f} | "
                  f"{runs[-1].status.value} |", flush=True)


if __name__ == "__main__":
    main()
