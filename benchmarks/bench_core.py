"""Simulator and validator throughput on generated graphs of 1k, 10k and 100k nodes.

    python benchmarks/bench_core.py [--sizes 1000 10000 100000] [--repeat 3]

Prints nodes per second (best of --repeat runs) for each generator family.
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
    print(f"{'graph':6s} {'nodes':>7s} {'edges':>7s} {'build s':>8s} {'simulate s':>10s} {'nodes/s':>10s} "
          f"{'validate s':>10s} {'nodes/s':>10s} {'bound s':>8s}")
    for kind in a.kinds:
        for n in a.sizes:
            t = time.perf_counter()
            g = generate(kind, nodes=n)
            build = time.perf_counter() - t
            order = g.input_order
            ts = best_of(lambda g=g, order=order: simulate(g, order), a.repeat)
            tv = best_of(lambda g=g, order=order: validate(g, order, memory_budget="1.0x"), a.repeat)
            tb = best_of(lambda g=g: lower_bound(g), 1)
            print(f"{kind:6s} {len(g):7d} {g.counts()['edges']:7d} {build:8.2f} {ts:10.3f} {len(g) / ts:10.0f} "
                  f"{tv:10.3f} {len(g) / tv:10.0f} {tb:8.3f}")


if __name__ == "__main__":
    main()
