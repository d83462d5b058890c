"""Is a rank's GPU waiting for its host? Every rank's trace of one configuration (run 63, #32).

    python benchmarks/gpu/probes/host_bound.py RUN_DIR CFG     (trace_CFG.json.gz and trace_CFG_rank{1,2,3}.json.gz)

Per rank: the compute stream's idle time between kernels, and the part of it in which the next kernel had not
yet been launched by the host (launch-starved: the host, not a collective, held the GPU); the NCCL kernels by
operation with their summed time (a rank whose collectives take far longer than its peers' waits in them for a
later peer); and the host time between consecutive launches, split by what the second launch issues (a
collective or a compute kernel). Launches are matched to kernels by the profiler's correlation id, through
both the runtime API (`cudaLaunchKernel`) and the driver API (`cuLaunchKernelEx`, which Triton uses).
"""

from __future__ import annotations

import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import kernels_of, run_trace, trace_events  # noqa: E402

OPS = ("AllReduce", "AllGather", "ReduceScatter")


def _op(name: str) -> str | None:
    return next((o for o in OPS if o in name), "nccl" if "nccl" in name.lower() else None)


def host_bound(path: str) -> dict:
    """One rank's figures (us), from its profiler trace."""
    ev = trace_events(path)
    kern = sorted(kernels_of(ev), key=lambda e: e["ts"])
    op = {id(e): _op(e["name"]) for e in kern}  # None: a compute kernel
    by_corr = {e.get("args", {}).get("correlation"): e for e in kern}
    launches = sorted((e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
                       and e.get("args", {}).get("correlation") in by_corr), key=lambda e: e["ts"])
    launch_end = {e["args"]["correlation"]: e["ts"] + e["dur"] for e in launches}
    comp = [e for e in kern if op[id(e)] is None]
    idle = starved = 0.0
    for a, b in zip(comp, comp[1:]):
        end = a["ts"] + a["dur"]
        gap = b["ts"] - end
        if gap <= 0:
            continue
        idle += gap
        issued = launch_end.get(b.get("args", {}).get("correlation"))
        if issued is not None and issued > end:
            starved += min(gap, issued - end)
    nccl: dict[str, list[float]] = {}
    for e in kern:
        if op[id(e)] is not None:
            nccl.setdefault(op[id(e)], []).append(e["dur"])
    host: dict[str, list[float]] = {"collective": [], "compute": []}
    for a, b in zip(launches, launches[1:]):
        what = "compute" if op[id(by_corr[b["args"]["correlation"]])] is None else "collective"
        host[what].append(b["ts"] - a["ts"])
    return {
        "span_us": (kern[-1]["ts"] + kern[-1]["dur"] - kern[0]["ts"]) if kern else 0.0,
        "compute_idle_us": idle,
        "launch_starved_us": starved,
        "nccl": {op: {"kernels": len(v), "sum_us": sum(v)} for op, v in sorted(nccl.items())},
        "host_before_launch": {w: {"launches": len(v), "median_us": statistics.median(v) if v else 0.0,
                                   "mean_us": statistics.fmean(v) if v else 0.0} for w, v in host.items()},
    }


def rank_traces(run: str, cfg: str) -> list[str]:
    """Rank 0's trace (`run_trace`), then every other rank's kept beside it (`trace_CFG_rankR.json.gz`)."""
    out, r = [run_trace(run, cfg)], 1
    while os.path.exists(os.path.join(run, f"trace_{cfg}_rank{r}.json.gz")):
        out.append(os.path.join(run, f"trace_{cfg}_rank{r}.json.gz"))
        r += 1
    return out


def main(argv: list[str]) -> None:
    run, cfg = argv
    print(json.dumps({f"rank{r}": host_bound(p) for r, p in enumerate(rank_traces(run, cfg))}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
