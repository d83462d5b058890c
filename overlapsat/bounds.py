"""Analytical lower bounds on the makespan (MODEL.md, Lower bounds).

Two precisions over the letter of MODEL.md, both still valid bounds (see
docs/decisions.md): a collective's duration only lengthens a path through its
own wait or through a later collective of its group (a node issued after a
collective does not wait for it to finish), and the per-group collective order
is used to grow the "must precede"/"must follow" sets, which lets every set be
computed incrementally in linear time per group.

"Compute" below is a node's work on the compute stream (`Graph.work`: a
kernel's duration, a collective's launch, a wait's own time; decisions.md
17): the stream is serial, so work that must precede (or follow) an event
adds up whatever kind of node carries it.
"""

from __future__ import annotations

from dataclasses import dataclass

from overlapsat.canonical import chained
from overlapsat.graph import COLLECTIVE, Graph
from overlapsat.problem import Problem, as_problem


@dataclass(frozen=True)
class LowerBound:
    compute: float
    critical_path: float
    comm_runs: float
    comm_chain: float = 0.0

    @property
    def makespan(self) -> float:
        return max(self.compute, self.critical_path, self.comm_runs, self.comm_chain)

    @property
    def exposed(self) -> float:
        return self.makespan - self.compute

    def as_dict(self) -> dict[str, float]:
        return {"makespan": self.makespan, "exposed": self.exposed, "compute": self.compute,
                "critical_path": self.critical_path, "comm_runs": self.comm_runs, "comm_chain": self.comm_chain}


def critical_path(graph: Graph, fifo: bool = True) -> float:
    """Longest chain of forced waiting; ids are already a topological order.

    Issue times and transfer times are kept apart: a collective is issued when
    its predecessors allow, but its transfer also waits for the previous
    collective of its group. Only its own wait (and that next collective) sees
    the transfer's end; any other successor only follows its issue.
    """
    n = len(graph.nodes)
    kind, dur, work, preds, coll_of = graph.kind, graph.dur, graph.work, graph.preds, graph.coll_of
    prev_in_group = [-1] * n
    for cs in graph.group_colls if fifo else ():  # without a fixed group order, no stream edge is known
        for a, b in zip(cs, cs[1:]):
            prev_in_group[b] = a
    fin = [0.0] * n  # earliest end of each node's slot on the compute stream (a wait's: after its own time)
    end = [0.0] * n  # collective: earliest end of its transfer
    best = 0.0
    for v in range(n):
        t = 0.0
        for u in preds[v]:
            a = end[u] if kind[u] == COLLECTIVE and coll_of[v] == u else fin[u]  # only u's waits see its transfer
            if a > t:
                t = a
        fin[v] = t + work[v]
        if kind[v] == COLLECTIVE:
            p = prev_in_group[v]
            end[v] = max(fin[v], end[p] if p >= 0 else 0.0) + dur[v]
            if end[v] > best:
                best = end[v]
        if fin[v] > best:
            best = fin[v]
    return best


def _grow(start: int, adj: list[list[int]], seen: bytearray, work: list[float]) -> float:
    """Visit everything reachable from start not yet seen; return new compute-stream work."""
    added = 0.0
    stack = [start]
    while stack:
        u = stack.pop()
        for v in adj[u]:
            if not seen[v]:
                seen[v] = 1
                added += work[v]
                stack.append(v)
    return added


def _heads(graph: Graph, cs: list[int]) -> tuple[list[float], list[int]]:
    """Work that must finish before each collective of a group starts its transfer (nested sums: its
    ancestors', the earlier collectives' and its own launch), and for each node the index of the first
    collective it must precede (len(cs) if none)."""
    work, preds = graph.work, graph.preds
    k = len(cs)
    ins = [k] * len(graph.nodes)
    head = [0.0] * k
    seen = bytearray(len(graph.nodes))
    acc = 0.0
    for i, c in enumerate(cs):
        if not seen[c]:  # its own launch runs before its transfer
            seen[c] = 1
            acc += work[c]
        stack = [c]
        while stack:
            u = stack.pop()
            for v in preds[u]:
                if not seen[v]:
                    seen[v] = 1
                    ins[v] = i
                    acc += work[v]
                    stack.append(v)
        head[i] = acc
    return head, ins


def _tails(graph: Graph, cs: list[int]) -> list[float]:
    """Work that must follow the transfer of each collective or of a later one of its group: its wait's
    own time and everything after that wait."""
    k = len(cs)
    tail = [0.0] * k
    seen = bytearray(len(graph.nodes))
    acc = 0.0
    for j in range(k - 1, -1, -1):
        w = graph.wait_of[cs[j]]
        if w >= 0 and not seen[w]:
            seen[w] = 1
            acc += graph.work[w] + _grow(w, graph.succs, seen, graph.work)
        tail[j] = acc
    return tail


def comm_runs(graph: Graph) -> float:
    """max over groups and runs i..j of before(i) + sum(i..j) + after(j)."""
    dur = graph.dur
    best = 0.0
    for cs in graph.group_colls:
        before, _ = _heads(graph, cs)
        after = _tails(graph, cs)
        # max_{i<=j} (before[i] - P[i-1]) + P[j] + after[j], in one pass
        prefix = 0.0
        best_left = float("-inf")
        for j in range(len(cs)):
            best_left = max(best_left, before[j] - prefix)
            prefix += dur[cs[j]]
            best = max(best, best_left + prefix + after[j])
    return best


def comm_chain(graph: Graph, window: int = 8) -> float:
    """Earliest starts along each group's stream, with compute lags between collectives.

    Beyond `comm_runs`: collective b cannot start before collective a (earlier
    in its group) has ended *and* the compute that both follows a's wait and
    must precede b has run, serially. For FSDP this is the backward compute
    of a layer between its all_gather and its reduce_scatter, which keeps the
    stream idle. es(b) = max(head(b), es(b-1) + d(b-1), max_a es(a) + d(a) +
    lag(a, b)) over the `window` previous collectives of the group; the bound
    is max over b of es(b) + d(b) + tail(b).
    """
    dur, work, succs = graph.dur, graph.work, graph.succs
    best = 0.0
    for cs in graph.group_colls:
        k = len(cs)
        if k < 2:
            continue
        head, ins = _heads(graph, cs)
        tail = _tails(graph, cs)
        # lag[a][off]: compute after a's wait that must precede collective a + off
        lags: list[list[float]] = []
        for a in range(k):
            w = graph.wait_of[cs[a]]
            row = [0.0] * (window + 1)
            if w >= 0:
                limit = cs[min(k - 1, a + window)]  # node ids are input positions
                vals: list[tuple[int, float]] = []
                mark = {w}
                stack = [w]
                while stack:
                    u = stack.pop()
                    for v in succs[u]:
                        if v <= limit and v not in mark:
                            mark.add(v)
                            if work[v] and ins[v] < k:
                                vals.append((ins[v], work[v]))
                            stack.append(v)
                for i_b, d in vals:
                    off = i_b - a
                    if 1 <= off <= window:
                        row[off] += d
                for off in range(2, window + 1):  # a node that must precede b also precedes every later b
                    row[off] += row[off - 1]
            lags.append(row)
        es = [0.0] * k
        for j in range(k):
            e = head[j]
            if j:
                e = max(e, es[j - 1] + dur[cs[j - 1]])
            for a in range(max(0, j - window), j):
                e = max(e, es[a] + dur[cs[a]] + lags[a][j - a])
            es[j] = e
            best = max(best, e + dur[cs[j]] + tail[j])
    return best


def _capped_sum(start: int, adj: list[list[int]], work: list[float], cap: float) -> float:
    """start's own work plus the work reachable from it through adj; stops once the sum reaches cap."""
    seen = {start}
    stack = [start]
    acc = work[start]
    while stack and acc < cap:
        u = stack.pop()
        for v in adj[u]:
            if v not in seen:
                seen.add(v)
                acc += work[v]
                stack.append(v)
    return acc


def comm_load(graph: Graph) -> float:
    """Per group, valid under any collective order: the first transfer issued waits for its compute
    ancestors, the stream then carries every transfer, and the last one's wait has its descendants
    after it: min ancestors + sum of durations + min descendants (min over the group's collectives).
    A collective's own launch precedes its transfer, and a wait's own time follows it."""
    dur, work = graph.dur, graph.work
    best = 0.0
    for cs in graph.group_colls:
        head = float("inf")
        for c in cs:
            head = min(head, _capped_sum(c, graph.preds, work, head))
        tail = float("inf")
        for c in reversed(cs):
            w = graph.wait_of[c]
            tail = 0.0 if w < 0 else min(tail, _capped_sum(w, graph.succs, work, tail))
            if tail == 0.0:
                break
        best = max(best, head + sum(dur[c] for c in cs) + tail)
    return best


def lower_bound(problem: Problem | Graph, collective_order: str | None = None) -> LowerBound:
    """The analytical bounds of a problem, or of a graph under a collective-order policy ("group" by default;
    docs/solver.md, Collective order). The budget plays no part.

    "chain" and "global" only add constraints to "group", so the group bounds
    hold (chain's wait-to-collective pairs are added as edges first); under
    "free" the group's input order means nothing, and only order-free bounds are used.
    """
    pb = as_problem(problem, None, collective_order)
    graph, collective_order = pb.relaxed, pb.collective_order
    if collective_order == "free":
        return LowerBound(graph.compute_total, critical_path(graph, fifo=False), comm_load(graph), 0.0)
    g = chained(graph, "chain")[0] if collective_order == "chain" else graph
    return LowerBound(g.compute_total, critical_path(g), comm_runs(g), comm_chain(g))
