"""Does `optimize(time_limit=T)` return on time at production sizes? (issue: time limits that mean what they say)

    python benchmarks/bench_time_limit.py [--nodes 50000] [--time-limit 1] [--fsdp-layers 1000]

Graphs: N independent compute nodes (the widest ready set), a chain of N
nodes (the longest), and a generated FSDP step (collectives, buffers). Each
runs in both modes: deterministic (the default: work-bound, the clock is only
a safety net) and timed (stops on the clock). The target is T + 1 s of wall
time; the graph is built before the clock starts.
"""

from __future__ import annotations

import argparse
import time

from overlapsat import Graph, optimize
from overlapsat.examples import generate
from overlapsat.graph import Node, NodeKind


def graphs(n: int, fsdp_layers: int) -> dict[str, Graph]:
    nodes = tuple(Node(f"n{i}", NodeKind.COMPUTE, duration=1.0 + (i % 7)) for i in range(n))
    return {
        f"wide ({n:,} independent nodes)": Graph(nodes=nodes, name="wide"),
        f"chain ({n:,} nodes)": Graph(nodes=nodes, edges=tuple((f"n{i}", f"n{i + 1}") for i in range(n - 1)),
                                      name="chain"),
        f"fsdp ({fsdp_layers} layers)": generate("fsdp", seed=1, layers=fsdp_layers),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--fsdp-layers", type=int, default=1000)
    a = ap.parse_args()
    print("| graph | nodes | mode | wall s | target s | on time | status | stopped by | heuristics s |")
    print("| --- | ---: | --- | ---: | ---: | --- | --- | --- | ---: |")
    for label, g in graphs(a.nodes, a.fsdp_layers).items():
        for det in (True, False):
            t = time.perf_counter()
            r = optimize(g, time_limit=a.time_limit, deterministic=det)
            wall = time.perf_counter() - t
            target = a.time_limit + 1.0
            print(f"| {label} | {len(g.nodes):,} | {'deterministic' if det else 'timed'} | {wall:.2f} | "
                  f"{target:.1f} | {'yes' if wall <= target else '**no**'} | {r.status.value} | {r.stopped_by} | "
                  f"{r.stats.get('heuristics_s', 0.0):.2f} |", flush=True)


if __name__ == "__main__":
    main()
