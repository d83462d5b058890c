"""Simulator and validator throughput on generated graphs of 1k, 10k and 100k nodes.

    python benchmarks/bench_core.py [--sizes 1000 10000 100000] [--repeat 3]

Prints a markdown table (the one docs/benchmarks.md quotes): seconds and millions of nodes per second, best of
--repeat runs, for each generator family.
"""

from __future__ import annotations

import argparse
import time

from overlapsat import lower_bound, simulate, validate
from overlapsat.examples import GENERATORS, generate


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kinds", nargs="+", default=sorted(GENERATORS))
    a = ap.parse_args()
    print("| graph | nodes | edges | build s | simulate s | M nodes/s | validate s | M nodes/s | lower bound s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for kind in a.kinds:
        for n in a.sizes:
            t = time.perf_counter()
            g = generate(kind, nodes=n)
            build = time.perf_counter() - t
            order = g.input_order
            ts = best_of(lambda g=g, order=order: simulate(g, order), a.repeat)
            tv = best_of(lambda g=g, order=order: validate(g, order, memory_budget="1.0x"), a.repeat)
            tb = best_of(lambda g=g: lower_bound(g), 1)
            print(f"| {kind} | {len(g):,} | {g.counts()['edges']:,} | {build:.2f} | {ts:.3f} | {len(g) / ts / 1e6:.1f} | "
                  f"{tv:.3f} | {len(g) / tv / 1e6:.1f} | {tb:.3f} |", flush=True)


if __name__ == "__main__":
    main()
