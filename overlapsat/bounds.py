"""Analytical lower bounds on the makespan (MODEL.md, Lower bounds).

Two precisions over the letter of MODEL.md, both still valid bounds (see
docs/decisions.md): a collective's duration only lengthens a path through its
own wait or through a later collective of its group (a node issued after a
collective does not wait for it to finish), and the per-group collective order
is used to grow the "must precede"/"must follow" sets, which lets every set be
computed incrementally in linear time per group.
"""

from __future__ import annotations

from dataclasses import dataclass

from overlapsat.graph import COLLECTIVE, COMPUTE, WAIT, Graph


@dataclass(frozen=True)
class LowerBound:
    compute: float
    critical_path: float
    comm_runs: float

    @property
    def makespan(self) -> float:
        return max(self.compute, self.critical_path, self.comm_runs)

    @property
    def exposed(self) -> float:
        return self.makespan - self.compute

    def as_dict(self) -> dict[str, float]:
        return {"makespan": self.makespan, "exposed": self.exposed, "compute": self.compute,
                "critical_path": self.critical_path, "comm_runs": self.comm_runs}


def critical_path(graph: Graph) -> float:
    """Longest chain of forced waiting; ids are already a topological order."""
    n = len(graph.nodes)
    kind, dur, preds, wait_of = graph.kind, graph.dur, graph.preds, graph.wait_of
    prev_in_group = [-1] * n
    for cs in graph.group_colls:
        for a, b in zip(cs, cs[1:]):
            prev_in_group[b] = a
    es = [0.0] * n  # earliest issue (compute: start) time
    best = 0.0
    for v in range(n):
        t = 0.0
        for u in preds[v]:
            if kind[u] == COLLECTIVE:
                a = es[u] + dur[u] if wait_of[u] == v else es[u]
            elif kind[u] == COMPUTE:
                a = es[u] + dur[u]
            else:
                a = es[u]
            if a > t:
                t = a
        p = prev_in_group[v]
        if p >= 0 and es[p] + dur[p] > t:
            t = es[p] + dur[p]
        es[v] = t
        f = t + dur[v] if kind[v] != WAIT else t
        if f > best:
            best = f
    return best


def _grow(start: int, adj: list[list[int]], seen: bytearray, kind: list[int], dur: list[float]) -> float:
    """Visit everything reachable from start not yet seen; return new compute."""
    added = 0.0
    stack = [start]
    while stack:
        u = stack.pop()
        for v in adj[u]:
            if not seen[v]:
                seen[v] = 1
                if kind[v] == COMPUTE:
                    added += dur[v]
                stack.append(v)
    return added


def comm_runs(graph: Graph) -> float:
    """max over groups and runs i..j of before(i) + sum(i..j) + after(j)."""
    n = len(graph.nodes)
    kind, dur = graph.kind, graph.dur
    best = 0.0
    for cs in graph.group_colls:
        k = len(cs)
        before = [0.0] * k
        seen = bytearray(n)
        acc = 0.0
        for i, c in enumerate(cs):
            acc += _grow(c, graph.preds, seen, kind, dur)
            before[i] = acc
        after = [0.0] * k
        seen = bytearray(n)
        acc = 0.0
        for j in range(k - 1, -1, -1):
            w = graph.wait_of[cs[j]]
            if w >= 0 and not seen[w]:
                seen[w] = 1
                acc += _grow(w, graph.succs, seen, kind, dur)
            after[j] = acc
        # max_{i<=j} (before[i] - P[i-1]) + P[j] + after[j], in one pass
        prefix = 0.0
        best_left = float("-inf")
        for j in range(k):
            best_left = max(best_left, before[j] - prefix)
            prefix += dur[cs[j]]
            best = max(best, best_left + prefix + after[j])
    return best


def lower_bound(graph: Graph) -> LowerBound:
    return LowerBound(graph.compute_total, critical_path(graph), comm_runs(graph))
