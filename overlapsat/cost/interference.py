"""Comm/compute interference: slow down work that overlaps, as measured on real GPUs.

Off by default everywhere (MODEL.md's simulator has no interference, and the
solver does not model it). `simulate_with_interference` is a first-order,
two-pass model: pass 1 is the plain simulation; each compute node is then
stretched by `compute_slowdown` over the part of it that overlapped a transfer
in pass 1, and each collective by `comm_slowdown` over the part that
overlapped compute; pass 2 re-simulates the same order with those durations.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, COMPUTE, Graph
from overlapsat.simulate import SimResult, simulate


@dataclass(frozen=True)
class Interference:
    compute_slowdown: float = 1.0  # compute runs this much slower while a transfer is in flight
    comm_slowdown: float = 1.0  # a transfer runs this much slower while compute runs

    def __post_init__(self) -> None:
        for f in ("compute_slowdown", "comm_slowdown"):
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or not (1.0 <= v < 100):
                raise GraphError(f"Interference.{f} must be in [1, 100), got {v!r}")


# measured on 2 H200s (NVLink, NCCL 2.28.9): 1 GiB all_gather beside 8192^3 bf16 GEMMs, 2026-11-22
H200_NVLINK = Interference(compute_slowdown=1.016, comm_slowdown=1.044)


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
