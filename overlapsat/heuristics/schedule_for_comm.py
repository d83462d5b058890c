"""Inductor's list-scheduling passes: sink_waits, raise_comms, reorder_compute_for_overlap.

Behaviour of torch 2.13's `comms._schedule_for_comm`, re-implemented on the
graph model: a ready list ordered by a score tuple
(lowest index of a collective the node blocks, is-wait, input position).
With overlap on, issuing a collective greedily issues the best-scored ready
compute nodes until their runtime covers the collective's.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Sequence

from overlapsat.graph import COLLECTIVE, WAIT, Graph
from overlapsat.heuristics.base import PassResult, memoised, start_order, validated


def _blocked_collective_index(g: Graph, order: list[int]) -> list[int]:
    """score_0: min index (in `order`) of a collective each node is an ancestor of.

    torch reads "ancestor" from each scheduler node's pre-fusion `ancestors`;
    fusion can add paths the fused graph has and those sets do not. When the
    graph carries the pre-fusion nodes (`Graph.prefusion`), they are used.
    """
    n = len(g.nodes)
    big = sys.maxsize
    comm_idx = [big] * n
    k = 0
    for v in order:
        if g.kind[v] == COLLECTIVE:
            comm_idx[v] = k
            k += 1
    if g.prefusion:
        return _blocked_prefusion(g, comm_idx)
    # reverse topological sweep over `order` (a valid order is topological)
    below = [big] * n  # min comm index among strict descendants
    for v in reversed(order):
        m = big
        for u in g.succs[v]:
            c = comm_idx[u] if comm_idx[u] < below[u] else below[u]
            if c < m:
                m = c
        below[v] = m
    return [comm_idx[v] if g.kind[v] == COLLECTIVE else below[v] for v in range(n)]


def _blocked_prefusion(g: Graph, comm_idx: list[int]) -> list[int]:
    """score_0 over the pre-fusion members: min collective index among each member's descendants, per fused node."""
    big = sys.maxsize
    members = g.prefusion
    fused = [g.index[f] for _, f, _ in members]
    pos = {m: i for i, (m, _, _) in enumerate(members)}
    succ: list[list[int]] = [[] for _ in members]
    for i, (_, _, ps) in enumerate(members):
        for p in ps:
            succ[pos[p]].append(i)
    below = [big] * len(members)  # min index of a collective that has the member among its ancestors
    for i in range(len(members) - 1, -1, -1):
        m = big
        for j in succ[i]:
            c = comm_idx[fused[j]]
            m = min(m, c, below[j])
        below[i] = m
    out = [big] * len(g.nodes)
    for i, v in enumerate(fused):
        if below[i] < out[v]:
            out[v] = below[i]
    for v in range(len(g.nodes)):
        if g.kind[v] == COLLECTIVE:
            out[v] = comm_idx[v]
    return out


@validated
def schedule_for_comm(g: Graph, order: Sequence[str | int] | None = None, *, raise_comms: bool,
                      sink_waits: bool, reorder_for_overlap: bool) -> PassResult:
    ids = start_order(g, order)
    n = len(g.nodes)
    kind, preds, succs, dur = g.kind, g.preds, g.succs, g.port_dur
    pos = [0] * n
    for i, v in enumerate(ids):
        pos[v] = i
    s0 = _blocked_collective_index(g, ids) if raise_comms else [sys.maxsize] * n
    s1 = [1 if sink_waits and kind[v] == WAIT else 0 for v in range(n)]
    # the score (s0, s1, input position) packed into one int, in the same order (an int compares faster than a
    # tuple in the heaps); a collective index past every collective's stands for "blocks none"
    top = 1 + max((x for x in s0 if x != sys.maxsize), default=0)
    score = [((min(s0[v], top) * 2 + s1[v]) * n + pos[v]) for v in range(n)]

    unmet = [len(preds[v]) for v in range(n)]
    # torch keeps one ready list; two heaps (kernels, and collectives or waits) give the same minima
    # without scanning it for the smallest ready kernel on every overlap step
    is_kernel = [kind[v] != COLLECTIVE and kind[v] != WAIT for v in range(n)]
    ready_k = [score[v] for v in ids if unmet[v] == 0 and is_kernel[v]]
    ready_o = [score[v] for v in ids if unmet[v] == 0 and not is_kernel[v]]
    heapq.heapify(ready_k)
    heapq.heapify(ready_o)
    out: list[int] = []
    overlapped: dict[str, list[str]] = {}

    def schedule(v: int) -> None:
        out.append(v)
        for w in succs[v]:
            unmet[w] -= 1
            if unmet[w] == 0:
                heapq.heappush(ready_k if is_kernel[w] else ready_o, score[w])

    while ready_k or ready_o:
        if ready_k and (not ready_o or ready_k[0] < ready_o[0]):
            v = ids[heapq.heappop(ready_k) % n]
        else:
            v = ids[heapq.heappop(ready_o) % n]
        if reorder_for_overlap and kind[v] == COLLECTIVE:
            schedule(v)
            budget = dur[v]
            hidden: list[str] = []
            while budget > 0 and ready_k:
                best = ids[heapq.heappop(ready_k) % n]  # the smallest ready kernel
                schedule(best)
                hidden.append(g.names[best])
                budget -= dur[best]
            overlapped[g.names[v]] = hidden
        else:
            schedule(v)
    if len(out) != n:  # cannot happen on a validated (acyclic) graph
        raise AssertionError("schedule_for_comm left nodes unscheduled")
    name = "reorder_compute_for_overlap" if reorder_for_overlap else ("raise_comms" if raise_comms else "sink_waits")
    stats: dict[str, object] = {"overlapped": overlapped} if reorder_for_overlap else {}
    return PassResult(name, out, stats)


@memoised
@validated
def sink_waits(g: Graph, order: Sequence[str | int] | None = None) -> PassResult:
    """Greedily issue waits as late as possible."""
    return schedule_for_comm(g, order, raise_comms=False, sink_waits=True, reorder_for_overlap=False)


@memoised
@validated
def raise_comms(g: Graph, order: Sequence[str | int] | None = None) -> PassResult:
    """Greedily issue collectives (and what they need) as early as possible."""
    return schedule_for_comm(g, order, raise_comms=True, sink_waits=False, reorder_for_overlap=False)


@memoised
@validated
def reorder_compute_for_overlap(g: Graph, order: Sequence[str | int] | None = None) -> PassResult:
    """Raise collectives, sink waits, and fill each collective's time with ready compute."""
    return schedule_for_comm(g, order, raise_comms=True, sink_waits=True, reorder_for_overlap=True)
