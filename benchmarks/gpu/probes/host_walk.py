"""Would a host timeline rank the plans as the GPUs did? (after runs 63-66, #32)

    python benchmarks/gpu/probes/host_walk.py [--compute-us 8] [--collective-us 110]

MODEL.md charges a collective's `launch` on the compute stream. Run 63 found the tensor-parallel step bound
by the host, and run 65 that the same charge over-buckets the GPU-bound FSDP step. This walk adds a host
clock instead: each node's issue costs the host time (`--compute-us` per compute node that does work, a
fused kernel's share; `--collective-us` per collective), and a kernel starts at the later of its stream
and its issue. The compute stream waits for a collective as in MODEL.md; the host does not. The graph's own
`launch` is not charged on the stream (the host pays it); "MODEL.md" is the walk as solved, with it.
Each stored plan of the runs below is walked on its bucketed graph,
its merged collectives priced by the profile it was solved with, and the sum over the step's graphs printed
beside the measured step. An estimate for choosing the next model, not a figure the library prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import stored_schedules, unpack_store  # noqa: E402

RESULTS = os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-26")
# (run, configuration, the profile it was solved with)
PAIRS = (("run62_comparable", "p", "h100_sxm"), ("run62_comparable", "tbb", "h100_sxm"),
         ("run65_comparable_host", "p", "host"), ("run65_comparable_host", "tbb", "host"),
         ("run63_tp", "p", "h100_sxm"), ("run63_tp", "tbb", "h100_sxm"),
         ("run64_tp_host", "p", "host"), ("run64_tp_host", "tbb", "host"))


def host_walk(graph, order, compute_us: float, collective_us: float) -> float:
    """The makespan (us) with a host clock: MODEL.md's walk, each issue first costing the host its time."""
    from overlapsat.graph import NodeKind

    h = t = 0.0
    free: dict = {}
    end: dict = {}
    for name in order:
        nd = graph.node(name)
        if nd.kind is NodeKind.COMPUTE:
            h += compute_us if nd.duration > 0 else 0.0
            t = max(t, h) + nd.duration
        elif nd.kind is NodeKind.COLLECTIVE:
            h += collective_us
            s = max(t, h, free.get(nd.group, 0.0))
            free[nd.group] = end[name] = s + nd.duration
        else:
            t = max(t, end[nd.collective]) + nd.duration
    return max([t, *free.values()])


def walk_run(run: str, cfg: str, profile: str, compute_us: float, collective_us: float) -> dict:
    from overlapsat import simulate
    from overlapsat.cost import cost_model
    from overlapsat.plan import materialize

    with open(os.path.join(RESULTS, run, "results.json"), encoding="utf-8") as f:
        res = json.load(f)
    co = res["meta"]["args"]["collective_order"]
    prof = os.path.join(ROOT, "benchmarks", "gpu", "h100_sxm_host.json") if profile == "host" else profile
    price = cost_model(prof).duration
    store = os.path.join(unpack_store(os.path.join(RESULTS, run, "store.tar.gz")), "store", cfg)
    total = model = 0.0
    for fp, g0, sched, why in stored_schedules(store, co):
        if sched is None:
            raise SystemExit(f"{run}/{cfg}/{fp}: {why}")
        g = materialize(g0.relaxed(co), sched.plan.buckets, price)
        total += host_walk(g, sched.order, compute_us, collective_us)
        model += simulate(g, sched.order).makespan
    return {"run": run, "cfg": cfg, "host_walk_ms": total / 1e3, "model_ms": model / 1e3,
            "measured_ms": res["configs"][cfg]["ranks"][0]["step_ms_median"]}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compute-us", type=float, default=8.0)
    ap.add_argument("--collective-us", type=float, default=110.0)
    a = ap.parse_args(argv)
    for run, cfg, prof in PAIRS:
        r = walk_run(run, cfg, prof, a.compute_us, a.collective_us)
        print(f"{run:24s} {cfg:4s} host walk {r['host_walk_ms']:6.2f}  MODEL.md {r['model_ms']:6.2f}  "
              f"measured {r['measured_ms']:6.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
