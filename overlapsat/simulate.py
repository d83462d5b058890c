"""The simulator: the arbiter of every figure overlapsat reports (MODEL.md).

It is independent of the solver and the heuristics on purpose, and linear in
nodes + buffers + edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, COMPUTE, Graph


@dataclass(frozen=True)
class SimResult:
    """Timing and memory of one order. Per-node lists are indexed by node id."""

    graph: Graph
    order: list[int]
    start: list[float]
    end: list[float]
    stall: list[float]
    makespan: float
    exposed: float
    peak_memory: int
    mem_post_alloc: list[int]
    mem_post_free: list[int]
    issue: list[float]  # compute clock when each node is issued


    @property
    def names(self) -> list[str]:
        return [self.graph.names[i] for i in self.order]

    @property
    def compute_total(self) -> float:
        return self.graph.compute_total

    @property
    def exposed_fraction(self) -> float:
        return self.exposed / self.makespan if self.makespan > 0 else 0.0

    def stream(self, node: str | int) -> str:
        """'compute' or the process group a collective runs on."""
        i = self.graph.index[node] if isinstance(node, str) else node
        g = self.graph.group_id[i]
        return "compute" if g < 0 else self.graph.groups[g]

    def collective_exposure(self) -> dict[str, float]:
        """Stall charged at each collective's wait (0 if never waited)."""
        g = self.graph
        return {g.names[c]: (self.stall[g.wait_of[c]] if g.wait_of[c] >= 0 else 0.0) for c in g.coll_seq}

    def summary(self) -> dict[str, float | int]:
        return {
            "makespan": self.makespan,
            "exposed": self.exposed,
            "compute": self.graph.compute_total,
            "peak_memory": self.peak_memory,
        }


def _some(names: list[str], k: int = 10) -> str:
    return ", ".join(map(repr, names[:k])) + (" ..." if len(names) > k else "")


def check_permutation(graph: Graph, order: Sequence[str | int]) -> list[str]:
    """Problems that make `order` not a permutation of the graph's nodes."""
    n = len(graph.nodes)
    seen = [0] * n
    problems: list[str] = []
    unknown: list[str] = []
    for x in order:
        if isinstance(x, str):
            i = graph.index.get(x)
        else:
            i = x if isinstance(x, int) and not isinstance(x, bool) and 0 <= x < n else None
        if i is None:
            unknown.append(repr(x))
            continue
        seen[i] += 1
    if unknown:
        problems.append(f"order names unknown node(s): {', '.join(unknown[:10])}" + (" ..." if len(unknown) > 10 else ""))
    dup = [graph.names[i] for i in range(n) if seen[i] > 1]
    miss = [graph.names[i] for i in range(n) if seen[i] == 0]
    if dup:
        problems.append(f"order repeats node(s): {_some(dup)}")
    if miss:
        problems.append(f"order misses {len(miss)} node(s): {_some(miss)}")
    return problems


def order_ids(graph: Graph, order: Sequence[str | int] | None) -> list[int]:
    """`order` (names or ids) as ids, checked to be a permutation; None is the input order."""
    if order is None:
        return list(range(len(graph.nodes)))
    problems = check_permutation(graph, order)
    if problems:
        raise GraphError.from_problems(f"not a schedule of graph {graph.name!r}", problems)
    return graph.order_indices(order)


def simulate(graph: Graph, order: Sequence[str | int] | None = None) -> SimResult:
    """Walk `order` (default: the input order) as MODEL.md's Time and Memory say."""
    ids = order_ids(graph, order)
    kind, dur, gid, coll_of = graph.kind, graph.dur, graph.group_id, graph.coll_of
    start = [0.0] * len(graph.nodes)
    end = [0.0] * len(graph.nodes)
    stall = [0.0] * len(graph.nodes)
    issued = [False] * len(graph.nodes)
    issue = [0.0] * len(graph.nodes)
    free = [0.0] * len(graph.groups)
    t = 0.0
    for i in ids:
        issue[i] = t
        k = kind[i]
        if k == COMPUTE:
            start[i] = t
            t += dur[i]
            end[i] = t
        elif k == COLLECTIVE:
            g = gid[i]
            s = t if t > free[g] else free[g]
            start[i] = s
            e = s + dur[i]
            end[i] = e
            free[g] = e
        else:
            c = coll_of[i]
            if not issued[c]:
                raise GraphError(f"wait {graph.names[i]!r} comes before its collective {graph.names[c]!r} in the order")
            ce = end[c]
            start[i] = t
            if ce > t:
                stall[i] = ce - t
                t = ce
            end[i] = t
        issued[i] = True
    makespan = max([t, *free]) if free else t
    post_alloc, post_free = memory_curve(graph, ids)
    peak = max(0, max(post_alloc)) if post_alloc else 0
    exposed = makespan - graph.compute_total
    if exposed < 0:  # float rounding of two equal sums; mathematically makespan >= compute
        exposed = 0.0
    return SimResult(graph, ids, start, end, stall, makespan, exposed, peak, post_alloc, post_free,
                     issue)


def makespan_of(graph: Graph, ids: Sequence[int]) -> float:
    """MODEL.md's makespan of a known permutation (ids), without memory or checks: the search's fast path."""
    kind, dur, gid, coll_of = graph.kind, graph.dur, graph.group_id, graph.coll_of
    end = [0.0] * len(graph.nodes)
    free = [0.0] * len(graph.groups)
    t = 0.0
    for i in ids:
        k = kind[i]
        if k == COMPUTE:
            t += dur[i]
        elif k == COLLECTIVE:
            g = gid[i]
            e = (t if t > free[g] else free[g]) + dur[i]
            end[i] = free[g] = e
        else:
            ce = end[coll_of[i]]
            if ce > t:
                t = ce
    return max([t, *free]) if free else t


def memory_curve(graph: Graph, ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """Post-alloc and post-free live bytes per step (Inductor's allocfree)."""
    n = len(ids)
    pos = [0] * len(graph.nodes)
    for step, i in enumerate(ids):
        pos[i] = step
    alloc = [0] * n
    freed = [0] * n
    b_prod, b_cons, b_alloc, b_free, b_out, b_fin = (
        graph.b_prod, graph.b_cons, graph.b_alloc, graph.b_free, graph.b_out, graph.b_fin)
    for j in range(len(b_prod)):
        p = b_prod[j]
        if p >= 0:
            alloc[pos[p]] += b_alloc[j]
        elif b_fin[j]:
            if n:
                alloc[0] += b_free[j]
        else:
            continue  # parameters: a constant, left out of the peak
        if b_out[j]:
            continue
        cons = b_cons[j]
        if cons:
            last = max(pos[c] for c in cons)
        else:
            last = pos[p] if p >= 0 else 0
        freed[last] += b_free[j]
    post_alloc = [0] * n
    post_free = [0] * n
    cur = 0
    for s in range(n):
        cur += alloc[s]
        post_alloc[s] = cur
        cur -= freed[s]
        post_free[s] = cur
    return post_alloc, post_free


def peak_memory(graph: Graph, order: Sequence[str | int] | None = None) -> int:
    ids = order_ids(graph, order)
    post_alloc, _ = memory_curve(graph, ids)
    return max(0, max(post_alloc)) if post_alloc else 0


__all__ = ["SimResult", "simulate", "makespan_of", "memory_curve", "peak_memory", "check_permutation"]
