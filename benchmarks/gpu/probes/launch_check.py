"""Is a launch term worth adding? Two checks on kept profiler traces (#13, benchmarks/results/gpu_runs.md).

    python benchmarks/gpu/probes/launch_check.py --prices TRACE_A STORE STEPS   (NCCL kernels against their prices)
    python benchmarks/gpu/probes/launch_check.py --holes TRACE [TRACE ...]      (compute-stream holes at NCCL starts)

--prices matches the NCCL kernels of a trace of the captured order (a) to
the captured graphs' collectives in issue order (forward graph, then
backward; the store of a run of the same configuration) and fits measured =
slope x priced + intercept by least squares, with medians per operation and
size. --holes measures, for every NCCL kernel, the hole in the compute
stream it starts in (0 when a compute kernel is running), beside the gaps
between consecutive compute kernels.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import trace_kernels, unpack_store  # noqa: E402


def kernels(path: str) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(NCCL, compute) kernel intervals of a trace (.json, .json.gz or .json.xz), each sorted by start."""
    k = trace_kernels(path)
    comm = sorted((e["ts"], e["ts"] + e["dur"]) for e in k if "nccl" in e["name"].lower())
    comp = sorted((e["ts"], e["ts"] + e["dur"]) for e in k if "nccl" not in e["name"].lower())
    return comm, comp


def prices(trace: str, store_tar: str, steps: int) -> dict:
    from overlapsat import load_graph

    store = os.path.join(unpack_store(store_tar), "store", "d")
    graphs = [load_graph(os.path.join(store, f)) for f in sorted(os.listdir(store)) if f.endswith(".graph.json")]
    graphs.sort(key=len)  # the forward graph is the smaller one in these steps
    seq = [(g, c) for g in graphs for c in g.coll_seq]  # captured order: the collectives in input order
    comm, _ = kernels(trace)
    if len(comm) != steps * len(seq):
        raise SystemExit(f"{len(comm)} NCCL kernels for {steps} steps of {len(seq)} collectives")
    pts, by = [], {}
    for i, (s, e) in enumerate(comm):
        g, c = seq[i % len(seq)]
        nd = g.nodes[c]
        pts.append((g.dur[c], e - s))
        by.setdefault((nd.op, nd.nbytes), []).append((g.dur[c], e - s))
    n = len(pts)
    mx, my = sum(p for p, _ in pts) / n, sum(m for _, m in pts) / n
    slope = sum((p - mx) * (m - my) for p, m in pts) / sum((p - mx) ** 2 for p, _ in pts)
    return {"kernels": n, "slope": slope, "intercept_us": my - slope * mx,
            "per_size": [{"op": op, "bytes": nb, "priced_us": v[0][0],
                          "measured_median_us": statistics.median(m for _, m in v)} for (op, nb), v in sorted(by.items())]}


def holes(trace: str) -> dict:
    comm, comp = kernels(trace)
    starts, ends = [s for s, _ in comp], [e for _, e in comp]
    gaps = [b - a for a, b in zip(ends, starts[1:]) if 0 < b - a < 1000]
    at = []
    for s, _ in comm:
        i = bisect.bisect_right(starts, s) - 1
        at.append(starts[i + 1] - ends[i] if 0 <= i < len(comp) - 1 and ends[i] <= s <= starts[i + 1] else 0.0)
    short = [h for h in at if h < 1000]  # (longer ones are the waits at a step's start, not launches)
    return {"compute_gap_median_us": statistics.median(gaps), "compute_gap_mean_us": statistics.mean(gaps),
            "hole_at_nccl_start_mean_us": statistics.mean(short), "nccl_starts_in_a_hole": sum(h > 0 for h in at) / len(at)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prices", nargs=3, metavar=("TRACE_A", "STORE_TAR", "STEPS"))
    ap.add_argument("--holes", nargs="+", metavar="TRACE")
    a = ap.parse_args()
    if a.prices:
        print(json.dumps(prices(a.prices[0], a.prices[1], int(a.prices[2])), indent=1))
    for t in a.holes or []:
        print(t, json.dumps(holes(t)))


if __name__ == "__main__":
    main()
