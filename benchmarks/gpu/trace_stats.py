"""What a profiler trace of the GPU step says (us, per step): exposed communication, waits on NCCL, NCCL kernels
held back, and how much slower kernels run beside the other stream. Read by `e2e_step.py` after its profiled
steps, and by the probes; it imports nothing of the harness but the trace reader.
"""

from __future__ import annotations

import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import kernels_of, trace_events  # noqa: E402


def union(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def overlap_with(s: float, e: float, merged: list[tuple[float, float]]) -> float:
    """Length of [s, e) covered by merged (sorted, disjoint) intervals."""
    import bisect

    tot = 0.0
    i = max(0, bisect.bisect_right([m[0] for m in merged], s) - 1)
    while i < len(merged) and merged[i][0] < e:
        a, b = merged[i]
        tot += max(0.0, min(b, e) - max(a, s))
        i += 1
    return tot


KERNEL_GAP_US = 10.0  # compute-stream holes shorter than this are launch gaps between consecutive kernels


def _holes(up: list) -> list[tuple[float, float]]:
    """The compute stream's idle intervals, the open ends included."""
    edges = [-float("inf")] + [x for iv in up for x in iv] + [float("inf")]
    return list(zip(edges[::2], edges[1::2]))


def kernel_gaps(merged: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The holes between consecutive compute intervals shorter than KERNEL_GAP_US."""
    return [(a, b) for a, b in _holes(merged) if 0 < b - a < KERNEL_GAP_US]


def _inside(uc: list, windows: list) -> list[tuple[float, float]]:
    """The parts of the (disjoint) NCCL intervals `uc` inside each of `windows`."""
    return [(max(s, a), min(e, b)) for a, b in windows for s, e in uc if e > a and s < b]


def per_step(comm: list, intervals: list, steps: int) -> list[float]:
    """Each profiled step's share of a list of disjoint intervals; a step starts at its first NCCL kernel
    (NCCL kernels per step: their count over `steps`)."""
    if not comm or steps < 1 or len(comm) % steps:
        return []
    m = len(comm) // steps
    comm = sorted(comm)  # a trace lists events by stream, not by time
    starts = [comm[i * m][0] for i in range(steps)] + [float("inf")]
    starts[0] = -float("inf")
    return [sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in intervals)
            for lo, hi in zip(starts, starts[1:])]


def step_exposure(comm: list, up: list, uc: list, steps: int) -> tuple[list[float], list[float]]:
    """Exposed communication of each profiled step, and of each outside the kernel gaps. The mean over steps
    is skewed by the first step, whose first kernels wait for the profiler to start (7.8 ms before the first
    compute kernel in run 12's trace), so the median step is the figure to compare with a prediction."""
    whole = per_step(comm, _inside(uc, _holes(up)), steps)
    in_gaps = per_step(comm, _inside(uc, kernel_gaps(up)), steps)
    return whole, [w - g for w, g in zip(whole, in_gaps)]


def nccl_waits(up: list, uc: list) -> list[tuple[float, float]]:
    """When the compute stream waits on NCCL, read off a trace (the measure fixed for runs 13 on, before they
    ran; benchmarks/results/gpu_runs.md). In each hole of the compute stream (before its first kernel, between two, after
    its last), NCCL time counts only up to the last NCCL completion inside the hole: a hole no collective
    finishes in (a launch gap NCCL runs across) is not a wait on NCCL, nor is NCCL time after the last
    completion (the compute stream resumed for another reason)."""
    waits = []
    for a, b in _holes(up):
        ends = [e for s, e in uc if a < e <= b]
        if ends:
            waits += _inside(uc, [(a, max(ends))])
    return waits


HELD_US = 10.0  # a NCCL kernel that starts later than this after it could have is counted as held back


def held_back(ev: list, steps: int, skip: int) -> dict:
    """NCCL kernels that started late while a compute kernel ran (runs 13 on, benchmarks/results/gpu_runs.md). A NCCL
    kernel may start once its stream's previous kernel ended and the compute kernel launched last before it (on
    the host: ProcessGroupNCCL makes the NCCL stream wait on the compute stream at issue) ended; a start later
    than that by HELD_US while a compute kernel runs is SM occupancy, which MODEL.md does not have."""
    import bisect

    kern = {e["args"].get("correlation"): e for e in ev
            if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel" and "args" in e}
    launch: dict = {}
    for e in ev:
        c = e.get("args", {}).get("correlation") if isinstance(e.get("args"), dict) else None
        if c in kern and str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X":
            launch.setdefault(c, e["ts"])
    comm = sorted((e for c, e in kern.items() if "nccl" in e["name"].lower() and c in launch), key=lambda e: e["ts"])
    comp = sorted(((launch[c], e) for c, e in kern.items() if "nccl" not in e["name"].lower() and c in launch),
                  key=lambda x: x[0])
    if not comm or len(comm) % steps:
        return {}
    at = [x[0] for x in comp]
    m, out = len(comm) // steps, []
    for st in range(skip, steps):
        tot = 0.0
        for i in range(st * m, (st + 1) * m):
            k = comm[i]
            j = bisect.bisect_left(at, launch[k["args"]["correlation"]]) - 1
            ready = max(comm[i - 1]["ts"] + comm[i - 1]["dur"] if i else 0.0,
                        comp[j][1]["ts"] + comp[j][1]["dur"] if j >= 0 else 0.0)
            if k["ts"] - ready > HELD_US and any(c["ts"] <= ready < c["ts"] + c["dur"] for _, c in comp):
                tot += k["ts"] - ready
        out.append(tot)
    return {"nccl_held_back_us": statistics.median(out)} if out else {}


def analyse_trace(path: str, steps: int, skip: int = 0) -> dict:
    """Exposed communication and in-step interference from a profiler trace (us, per step). `skip`: profiled
    steps left out of the `after_warmup` figures (the first waits for the profiler to start)."""
    ev = trace_events(path)
    kern = kernels_of(ev)
    comm = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in kern if "nccl" in e["name"].lower()]
    comp = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in kern if "nccl" not in e["name"].lower()]
    uc, up = union([(s, e) for s, e, _ in comm]), union([(s, e) for s, e, _ in comp])
    comm_busy = sum(e - s for s, e in uc)
    exposed = sum((e - s) - overlap_with(s, e, up) for s, e in uc)
    both = comm + comp
    span = (max(e for _, e, _ in both) - min(s for s, _, _ in both)) if both else 0.0

    def slowdown(mine, other) -> dict:
        by: dict[str, dict[str, list[float]]] = {}
        for s, e, nm in mine:
            frac = overlap_with(s, e, other) / (e - s) if e > s else 0.0
            key = "over" if frac >= 0.5 else "alone" if frac <= 0.05 else None
            if key:
                by.setdefault(nm, {"over": [], "alone": []})[key].append(e - s)
        num = den = 0.0
        pairs = 0
        for d in by.values():
            if d["over"] and d["alone"]:
                mo, ma = statistics.median(d["over"]), statistics.median(d["alone"])
                num += mo * len(d["over"])
                den += ma * len(d["over"])
                pairs += 1
        frac_over = sum(overlap_with(s, e, other) for s, e, _ in mine) / max(1e-9, sum(e - s for s, e, _ in mine))
        return {"slowdown": num / den if den else None, "kernel_names_compared": pairs,
                "time_us": sum(e - s for s, e, _ in mine) / steps, "fraction_overlapped": frac_over}

    # the part of that exposure inside the few-us gaps between consecutive compute kernels (launch gaps no
    # order removes, and MODEL.md has no term for): the rest is what an order controls
    gap_exposed = sum(overlap_with(a, b, uc) for a, b in kernel_gaps(up))
    per_step = step_exposure(comm, up, uc, steps)
    return {"exposed_comm_us": exposed / steps, "exposed_in_kernel_gaps_us": gap_exposed / steps,
            "exposed_median_step_us": statistics.median(per_step[0]) if per_step[0] else None,
            "exposed_median_step_outside_kernel_gaps_us": statistics.median(per_step[1]) if per_step[1] else None,
            "comm_busy_us": comm_busy / steps, "kernel_span_us": span / steps,
            **after_warmup(comm, up, uc, steps, skip), **held_back(ev, steps, skip),
            "compute_kernels": slowdown(comp, uc), "nccl_kernels": slowdown(comm, up),
            "nccl_kernel_count": len(comm) // max(1, steps)}


def after_warmup(comm: list, up: list, uc: list, steps: int, skip: int) -> dict:
    """The measure fixed before runs 13 on: waits on NCCL (`nccl_waits`) per step, mean and median over the
    steps after the profiler's warm-up, and the old measure (NCCL while no kernel runs) over the same steps."""
    waits = per_step(comm, nccl_waits(up, uc), steps)[skip:]
    exposed = step_exposure(comm, up, uc, steps)[0][skip:]
    if not waits:
        return {}
    return {"steps_after_warmup": len(waits), "waits_on_nccl_us": statistics.fmean(waits),
            "waits_on_nccl_median_step_us": statistics.median(waits),
            "exposed_after_warmup_us": statistics.fmean(exposed)}
