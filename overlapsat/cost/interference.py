"""Comm/compute interference: slow down work that overlaps, as measured on real GPUs.

Off by default everywhere (MODEL.md's simulator has no interference, and the
solver does not model it). Two models of the same order:

- `simulate_contended` (use this one): an event-driven walk at rates. While a
  transfer runs, compute-stream work progresses at 1/compute_slowdown; while
  the stream works, each running transfer progresses at 1/comm_slowdown. It
  is MODEL.md's walk otherwise, and equals it when both factors are 1. Its
  `exposed` is what a profiler reads: time a transfer runs while the stream
  does no work (docs/gpu_results.md checks it against 2 and 4 H200s).
- `simulate_with_interference`: a first-order, two-pass model (stretch each
  node by its overlap in the plain walk, then walk again). It charges every
  stretch as if it were exposed, so it over-predicts exposure; kept because
  earlier results quote it.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, COMPUTE, Graph
from overlapsat.simulate import SimResult, order_array, simulate


def interp_log_x(pts: Sequence[tuple[float, float]], x: float) -> float:
    """y at x > 0 on (x, y) points with x increasing: linear in log(x) between points, flat beyond the ends."""
    if x <= pts[0][0]:
        return float(pts[0][1])
    if x >= pts[-1][0]:
        return float(pts[-1][1])
    i = bisect.bisect_right([p for p, _ in pts], x)
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return float(y0 + t * (y1 - y0))


def _factor_ok(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 1.0 <= v < 100


@dataclass(frozen=True)
class Interference:
    """How much overlapping work slows down. `gemm_slowdown`, if given, prices a GEMM-like node by its size:
    (flops, factor) points, interpolated in log(flops) and held flat beyond the ends. A GEMM that fills the
    SMs in one wave loses a whole wave to NCCL's CTAs; a large one loses only their share (2 H200s: 1.8-2.0
    against 1.05-1.4 for cuBLAS's 192x192-tile kernels in one step, benchmarks/results/gpu_runs.md "Per kernel").
    Other nodes use `compute_slowdown`."""

    compute_slowdown: float = 1.0  # compute runs this much slower while a transfer is in flight
    comm_slowdown: float = 1.0  # a transfer runs this much slower while compute runs
    gemm_slowdown: tuple[tuple[float, float], ...] = ()  # (flops, factor), flops strictly increasing

    def __post_init__(self) -> None:
        for f in ("compute_slowdown", "comm_slowdown"):
            v = getattr(self, f)
            if not _factor_ok(v):
                raise GraphError(f"Interference.{f} must be in [1, 100), got {v!r}")
        pts = self.gemm_slowdown
        if not isinstance(pts, tuple) or not all(isinstance(p, tuple) and len(p) == 2 for p in pts):
            raise GraphError(f"Interference.gemm_slowdown must be a tuple of (flops, factor) pairs, got {pts!r}")
        for i, (x, y) in enumerate(pts):
            if not isinstance(x, (int, float)) or isinstance(x, bool) or not (0 < x < float("inf")):
                raise GraphError(f"Interference.gemm_slowdown: flops must be positive and finite, got {x!r}")
            if not _factor_ok(y):
                raise GraphError(f"Interference.gemm_slowdown: a factor must be in [1, 100), got {y!r}")
            if i and x <= pts[i - 1][0]:
                raise GraphError(f"Interference.gemm_slowdown: flops must increase, got {pts[i - 1][0]!r} then {x!r}")

    def gemm_factor(self, flops: float) -> float:
        """The slowdown of a GEMM of `flops` (compute_slowdown when no table or no size)."""
        if not self.gemm_slowdown or flops <= 0:
            return float(self.compute_slowdown)
        return interp_log_x(self.gemm_slowdown, flops)

    def compute_factors(self, graph: Graph) -> list[float]:
        """Per node: the slowdown of its work on the compute stream while a transfer is in flight."""
        kc = float(self.compute_slowdown)
        if not self.gemm_slowdown:
            return [kc] * len(graph.nodes)
        return [self.gemm_factor(nd.flops) if graph.kind[v] == COMPUTE and nd.gemm_like else kc
                for v, nd in enumerate(graph.nodes)]


# measured on 2 H200s (NVLink, NCCL 2.28.9): 1 GiB all_gather beside 8192^3 bf16 GEMMs, 2026-11-22. A best
# case (two long pre-enqueued runs): a training step slows both far more (H200_STEP)
H200_NVLINK = Interference(compute_slowdown=1.016, comm_slowdown=1.044)
# fitted with simulate_contended to the compute and NCCL kernel time of overlapsat's order in three 2-H200 runs
# of a compiled Llama-style SimpleFSDP step, and held out on three 4-H200 runs (compute kernel time within 1 %):
# docs/gpu_results.md, benchmarks/gpu/contention.py, 2026-11-22
H200_STEP = Interference(compute_slowdown=1.67, comm_slowdown=1.36)
# a GEMM's own slowdown beside NCCL by its size, (flops, factor): the medians of benchmarks/gpu/interference.py's
# pairs on 2 H200s (2048^3, 4096^3, 8192^3 bf16 GEMMs beside all_gathers and reduce_scatters, 2026-11-22);
# for Interference.gemm_slowdown (benchmarks/results/gpu_runs.md, "Per kernel")
H200_GEMM_PAIRS = ((2.0 * 2048**3, 1.87), (2.0 * 4096**3, 1.40), (2.0 * 8192**3, 1.23))


def _merged(intervals: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [a for a, _ in out], [b for _, b in out]


def _overlap(starts: list[float], ends: list[float], s: float, e: float) -> float:
    """Length of [s, e) covered by the merged intervals."""
    total = 0.0
    i = max(0, bisect.bisect_right(ends, s))
    while i < len(starts) and starts[i] < e:
        total += max(0.0, min(e, ends[i]) - max(s, starts[i]))
        i += 1
    return total


def simulate_with_interference(graph: Graph, order: Sequence[int | str] | None = None,
                               interference: Interference = H200_NVLINK) -> SimResult:
    first = simulate(graph, order)
    comm_s, comm_e = _merged([(first.start[v], first.end[v]) for v in graph.coll_seq])
    comp_s, comp_e = _merged([(first.start[v], first.end[v]) for v in range(len(graph.nodes)) if graph.kind[v] == COMPUTE])
    new = {}
    for v in range(len(graph.nodes)):
        k, d = graph.kind[v], graph.dur[v]
        if d <= 0:
            continue
        if k == COMPUTE:
            ov = _overlap(comm_s, comm_e, first.start[v], first.end[v])
            new[graph.names[v]] = d + ov * (interference.compute_slowdown - 1)
        elif k == COLLECTIVE:
            ov = _overlap(comp_s, comp_e, first.start[v], first.end[v])
            new[graph.names[v]] = d + ov * (interference.comm_slowdown - 1)
    stretched = graph.with_durations(new)
    second = simulate(stretched, first.order)
    return SimResult(graph, second.order, second.start, second.end, second.stall, second.makespan,
                     second.makespan - graph.compute_total, second.peak_memory, second.mem_post_alloc,
                     second.mem_post_free, second.issue)


@dataclass(frozen=True)
class ContendedResult:
    """One order walked at contended rates (us). `compute_busy`: time the stream does work (stretched);
    `comm_busy`: time some transfer runs; `exposed`: a transfer runs and the stream does no work."""

    makespan: float
    exposed: float
    compute_busy: float
    comm_busy: float
    start: np.ndarray  # per node id: when its stream work (a collective: its transfer) starts
    end: np.ndarray


_DONE = 1e-9  # us of work left that counts as finished (rates make the last subtraction inexact)


class _Walk:
    """State of `simulate_contended`'s walk: the stream's step and each group's FIFO of issued transfers."""

    def __init__(self, graph: Graph) -> None:
        n = len(graph.nodes)
        self.g = graph
        self.now = 0.0
        self.queue: list[deque[int]] = [deque() for _ in graph.groups]  # issued, unfinished; the head runs
        self.left = list(graph.dur)  # a transfer's remaining work
        self.issued = [False] * n
        self.done = [False] * n
        self.start = np.zeros(n)
        self.end = np.zeros(n)

    def issue(self, c: int) -> None:
        q = self.queue[self.g.group_id[c]]
        q.append(c)
        self.issued[c] = True
        if len(q) == 1:
            self.start[c] = self.now
        self.settle()

    def settle(self) -> None:
        """End every head transfer with no work left, starting the next one in its group."""
        for q in self.queue:
            while q and self.left[q[0]] <= _DONE:
                c = q.popleft()
                self.left[c] = 0.0
                self.done[c] = True
                self.end[c] = self.now
                if q:
                    self.start[q[0]] = self.now

    def running(self) -> list[int]:
        return [q[0] for q in self.queue if q]


def simulate_contended(graph: Graph, order: Sequence[int | str] | None = None,
                       interference: Interference = H200_STEP, *, copy_engine: Collection[str] = (),
                       copy_engine_share: float = 1.0) -> ContendedResult:
    """Walk `order` with overlapping work slowed at the given rates (see the module's docstring).

    The stream visits the order as MODEL.md says: a compute node is work; a collective's launch is work,
    after which its transfer joins its group's queue (one transfer at a time per group, in issue order);
    a wait stalls until its transfer ends, then does its own work. Between two events every rate is
    constant, so the walk jumps from one finish to the next: O(events x groups). Every rate lies in
    [1/max(f), 1] (f over both factors and the GEMM table), so the makespan lies between the plain walk's and
    max(f) times it (tested).

    `copy_engine`: collectives (a plan's `transports`) that move their data without SMs. While only they run,
    compute slows by `copy_engine_share` of its factor's excess (a `CopyEngine`'s `contention_share`)."""
    ids = order_array(graph, order).tolist()
    kcs, kn = interference.compute_factors(graph), float(interference.comm_slowdown)
    if not (isinstance(copy_engine_share, (int, float)) and 0.0 <= copy_engine_share <= 1.0):
        raise GraphError(f"copy_engine_share must be in [0, 1], got {copy_engine_share!r}")
    ce = {graph.index[nm] for nm in copy_engine if nm in graph.index}
    if len(ce) != len(set(copy_engine)):
        raise GraphError(f"copy_engine names no collective of graph {graph.name!r}: "
                         f"{sorted(set(copy_engine) - set(graph.index))[:3]}")
    w = _Walk(graph)
    exposed = busy = comm_busy = 0.0
    k = 0
    cur, work, stalled = -1, 0.0, False  # the stream's node, its work left, whether it waits on a transfer
    while True:
        if cur >= 0 and stalled and w.done[graph.coll_of[cur]]:
            stalled = False
            w.start[cur] = w.now
        if cur >= 0 and not stalled and work <= _DONE:  # the stream's step ends
            if graph.kind[cur] == COLLECTIVE:
                w.issue(cur)
            else:
                w.end[cur] = w.now
            cur = -1
        if cur < 0:
            if k == len(ids):
                if not w.running():
                    break
            else:
                cur = ids[k]
                k += 1
                kind = graph.kind[cur]
                work = graph.launch[cur] if kind == COLLECTIVE else graph.dur[cur]
                stalled = False
                if kind == COMPUTE:
                    w.start[cur] = w.now
                elif kind != COLLECTIVE:
                    c = graph.coll_of[cur]
                    if not w.issued[c]:
                        raise GraphError(f"wait {graph.names[cur]!r} comes before its collective "
                                         f"{graph.names[c]!r} in the order")
                    stalled = True
                continue
        run = w.running()
        working = cur >= 0 and not stalled
        rs = 1.0
        if run and working:
            f = kcs[cur] if not ce or any(c not in ce for c in run) else 1.0 + (kcs[cur] - 1.0) * copy_engine_share
            rs = 1.0 / f
        rt = 1.0 / kn if working else 1.0
        dt = min([work / rs] if working else [], default=float("inf"))
        dt = min([dt, *(w.left[c] / rt for c in run)])
        w.now += dt
        if run:
            comm_busy += dt
            if not working:
                exposed += dt
        if working:
            busy += dt
            work -= dt * rs
        for c in run:
            w.left[c] -= dt * rt
        w.settle()
    return ContendedResult(w.now, exposed, busy, comm_busy, w.start, w.end)
