"""The parts every search step uses, at production sizes: load + index, portfolio, simulator, validator.

    python benchmarks/bench_scale.py [--sizes 16000 100000] [--kinds fsdp tp moe ddp] [--time-limit 10]

Per graph: load + index of its JSON file, the whole heuristic portfolio with
the step budget `optimize` gives it at --time-limit (and how many pipelines
that budget cut short), and simulator and validator throughput on an order
given as names and as ids (best of three), measured right after loading and
again after the portfolio: the heap the portfolio leaves (where its freed
objects were) changes these by up to 2x, either way (docs/solver.md).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from bench_core import best_of  # run as a script: benchmarks/ is on the path

from overlapsat import load_graph, simulate, validate
from overlapsat.examples import generate
from overlapsat.heuristics import run_all
from overlapsat.io import save_graph
from overlapsat.solver import SolveParams


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[16000, 100000])
    ap.add_argument("--kinds", nargs="+", default=["fsdp", "tp", "moe", "ddp"])
    ap.add_argument("--time-limit", type=float, default=10.0)
    a = ap.parse_args()
    steps = SolveParams(time_limit=a.time_limit).portfolio_steps
    print(f"| graph | nodes | load + index s | portfolio s ({steps:,} steps) | cut | simulate M nodes/s (names / ids): "
          "after loading; after the portfolio | validate M nodes/s (names / ids): after loading; after the portfolio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as d:
        for n in a.sizes:
            for kind in a.kinds:
                path = os.path.join(d, f"{kind}{n}.json")
                save_graph(generate(kind, nodes=n), path)
                t = time.perf_counter()
                g = load_graph(path)
                load = time.perf_counter() - t
                names, ids = g.input_order, list(range(len(g)))
                first = throughput(g, names, ids)
                t = time.perf_counter()
                rows = run_all(g, work_limit=steps)
                port = time.perf_counter() - t
                cut = sum(1 for r in rows if r.note)
                after = throughput(g, names, ids)
                sim, val = (f"{a[0]:.2f} / {a[1]:.2f}; {b[0]:.2f} / {b[1]:.2f}" for a, b in zip(first, after))
                print(f"| {kind} | {len(g)} | {load:.2f} | {port:.2f} | {cut} | {sim} | {val} |", flush=True)


def throughput(g, names: list[str], ids: list[int]) -> tuple[list[float], list[float]]:
    """Simulator and validator speed, M nodes/s, on the order as names and as ids (best of three)."""
    sim = [len(g) / best_of(lambda o=o: simulate(g, o), 3) / 1e6 for o in (names, ids)]
    val = [len(g) / best_of(lambda o=o: validate(g, o, memory_budget="1.0x"), 3) / 1e6 for o in (names, ids)]
    return sim, val


if __name__ == "__main__":
    main()
