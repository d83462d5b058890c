"""An exploratory timing rule, checked against the GPU runs' stores after the fact (benchmarks/results/gpu_runs.md).

    python benchmarks/gpu/probes/boundary_rule.py benchmarks/results/gpu_2026-11-22/run13_regather [run12 ...]

MODEL.md starts a transfer as soon as its group stream is free and its issue point is reached. On the
H200s a NCCL kernel that becomes ready while a GEMM holds the SMs, or as one starts, waits for that GEMM
(`trace_stats.held_back`). This walk is MODEL.md's, plain durations, with one change: a transfer that would start
while a GEMM-like compute node runs (or at the instant one starts) starts when that node ends. It prints, for
the solved order (d) and the captured order (a) of each run's stored graphs, the exposure under both rules.
It is a model experiment, outside the library: the simulator, bounds and solver keep MODEL.md's rule.
"""

from __future__ import annotations

import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import unpack_store  # noqa: E402


def walk(g, order, *, boundary: bool = True, hold: float | None = None) -> float:
    """Exposed us of `order` (None: input order): MODEL.md's walk, with transfers deferred past GEMM-like
    nodes when `boundary`; `hold` in [0, 1] defers them by that fraction of the GEMM's remaining time instead
    (1: the boundary rule, 0: MODEL.md). Since runs 27-33 the library's `overlapsat.cost.simulate_held`
    (the walk this function held before, moved there once the hold passed its test)."""
    from overlapsat.cost import simulate_held

    if hold is None:
        hold = 1.0 if boundary else 0.0
    return simulate_held(g, order, hold).exposed


def main(runs: list[str]) -> None:
    from overlapsat import load_graph
    from overlapsat.store import usable_schedule

    print("| run | order | exposed ms, MODEL.md | exposed ms, boundary rule |")
    print("| --- | --- | ---: | ---: |")
    for run in runs:
        if not os.path.exists(os.path.join(run, "store.tar.gz")):
            print(f"| {os.path.basename(run.rstrip('/'))} | (no store kept) | - | - |")
            continue
        st = os.path.join(unpack_store(os.path.join(run, "store.tar.gz")), "store", "d")
        tot = {"d": [0.0, 0.0], "a": [0.0, 0.0]}
        for f in sorted(glob.glob(os.path.join(st, "*.graph.json"))):
            g = load_graph(f)
            o, _ = usable_schedule(st, os.path.basename(f)[: -len(".graph.json")], g)
            for label, order in (("d", o), ("a", None)):
                tot[label][0] += walk(g, order, boundary=False)
                tot[label][1] += walk(g, order)
        for label in ("a", "d"):
            print(f"| {os.path.basename(run.rstrip('/'))} | {label} | {tot[label][0] / 1e3:.2f} | {tot[label][1] / 1e3:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
