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

import heapq
from dataclasses import dataclass

import numpy as np

from overlapsat.canonical import chained
from overlapsat.graph import COLLECTIVE, Graph
from overlapsat.problem import Problem, as_problem


@dataclass(frozen=True)
class LowerBound:
    compute: float
    critical_path: float
    comm_runs: float
    comm_chain: float = 0.0
    comm_lags: float = 0.0

    @property
    def makespan(self) -> float:
        return max(self.compute, self.critical_path, self.comm_runs, self.comm_chain, self.comm_lags)

    @property
    def exposed(self) -> float:
        return self.makespan - self.compute

    def as_dict(self) -> dict[str, float]:
        return {"makespan": self.makespan, "exposed": self.exposed, "compute": self.compute,
                "critical_path": self.critical_path, "comm_runs": self.comm_runs, "comm_chain": self.comm_chain,
                "comm_lags": self.comm_lags}


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


# collectives^2 x nodes beyond which `comm_lags` is left out: about 0.15 s at 2.6e9 (7,928 nodes, 576 collectives)
# on this 2-core machine; a 16k-node FSDP step (4.7e10) would take seconds, and there it adds nothing
LAG_PAIR_WORK = 1e10
LAG_MAX_NODES = 40_000  # and past this many nodes: its ancestor sets are n^2 / 8 bytes (200 MB at 40k)
LAG_SAFETY = 1e-10  # relative: what float sums in another order than the walk's could add (n * 2^-53 at 1e6 nodes)
_CHUNK = 256  # rows per block of the lag product: blocks of 256 x nodes floats, not collectives x nodes


def _bit_rows(bits: list[int], n: int) -> np.ndarray:
    """Python-int bitsets over node ids as a 0/1 matrix, one row per set."""
    nb = (n + 7) // 8
    buf = b"".join(b.to_bytes(nb, "little") for b in bits)
    raw = np.frombuffer(buf, np.uint8).reshape(len(bits), nb)
    return np.unpackbits(raw, axis=1, bitorder="little")[:, :n]


def _row_sums(rows: np.ndarray, w: np.ndarray) -> np.ndarray:
    """rows @ w, a block of rows at a time (a whole 0/1 matrix as floats is collectives x nodes x 8 bytes)."""
    return np.concatenate([rows[i:i + _CHUNK] @ w for i in range(0, len(rows), _CHUNK)])


def _jackson(jobs: list[tuple[float, float, float]]) -> float:
    """Jackson's preemptive schedule for one machine with heads r and tails q: the least max(C + q) of any
    preemptive schedule, so a bound on every schedule of those jobs (Carlier)."""
    jobs = sorted(jobs)
    t, i, best, ready = 0.0, 0, 0.0, []
    while i < len(jobs) or ready:
        if not ready and t < jobs[i][0]:
            t = jobs[i][0]
        while i < len(jobs) and jobs[i][0] <= t:
            heapq.heappush(ready, [-jobs[i][2], jobs[i][1]])
            i += 1
        nq, left = ready[0]
        nxt = jobs[i][0] if i < len(jobs) else float("inf")
        if left <= nxt - t:  # the most urgent job finishes before the next release
            t += left
            heapq.heappop(ready)
            best = max(best, t - nq)
        else:  # preempted at the next release (set exactly, so that it is then released)
            ready[0][1] = left - (nxt - t)
            t = nxt
    return best


def comm_lags(graph: Graph) -> float:
    """Per group, Jackson's preemptive bound on its stream, with heads and tails that see the other collectives'
    transfers and the compute between them (MODEL.md "Lower bounds", decision 53). Valid under any collective
    order: it uses only the dependencies, one stream per group and the serial compute stream.

    lag(a, c): the work that must run after a's transfer ends and before c's starts (a's waits and their
    descendants that are ancestors of c, and c's launch), for every collective a one of whose waits c follows.
    head(c) >= the work of c's ancestors and its own launch; and, per group h, over the collectives A of h that
    c follows (they share h's stream), taking those with lag >= t, or those with head >= s: the least head among
    them + their summed durations + their least lag (`queue`). tail(c), after c's transfer ends, likewise over
    the collectives that follow c's waits.
    0 (left out) past `LAG_PAIR_WORK` or `LAG_MAX_NODES`."""
    n = len(graph.nodes)
    colls = sorted(c for cs in graph.group_colls for c in cs)
    if not colls or len(colls) ** 2 * n > LAG_PAIR_WORK or n > LAG_MAX_NODES:
        return 0.0
    work = np.asarray(graph.work, dtype=np.float64)
    dur = np.asarray([graph.dur[c] for c in colls], dtype=np.float64)
    own = work[colls]
    preds, succs = graph.preds, graph.succs
    anc = [0] * n
    for v in range(n):
        a = 0
        for u in preds[v]:
            a |= anc[u] | (1 << u)
        anc[v] = a
    desc = [0] * n
    for v in range(n - 1, -1, -1):
        a = 0
        for u in succs[v]:
            a |= desc[u] | (1 << u)
        desc[v] = a
    after = []  # per collective: its waits and everything after them
    for c in colls:
        e = 0
        for w in graph.waits_of[c]:
            e |= desc[w] | (1 << w)
        after.append(e)
    del desc
    anc_rows = _bit_rows([anc[c] for c in colls], n)
    del anc
    after_rows = _bit_rows(after, n)
    k = len(colls)
    before_work = _row_sums(anc_rows, work) + own  # the work before each transfer can start
    after_work = _row_sums(after_rows, work)  # the work after each transfer ends
    follows = np.zeros((k, k), dtype=bool)  # follows[i, j]: collective i's issue follows a wait of collective j
    for j, c in enumerate(colls):
        if graph.waits_of[c]:
            follows[:, j] = anc_rows[:, graph.waits_of[c]].any(axis=1)
    keep = np.flatnonzero((work > 0) & anc_rows.any(axis=0) & after_rows.any(axis=0))
    between = np.zeros((k, k))  # between[i, j]: work after collective j's waits that must precede collective i
    if keep.size:
        wk = work[keep]
        for i0 in range(0, k, _CHUNK):
            left = anc_rows[i0:i0 + _CHUNK, keep] * wk
            for j0 in range(0, k, _CHUNK):
                between[i0:i0 + _CHUNK, j0:j0 + _CHUNK] = left @ after_rows[j0:j0 + _CHUNK, keep].T.astype(np.float64)
    del anc_rows, after_rows
    pos = {c: i for i, c in enumerate(colls)}
    groups = [np.asarray([pos[c] for c in cs], dtype=np.intp) for cs in graph.group_colls]

    def queue(heads: np.ndarray, lags: np.ndarray, durs: np.ndarray) -> float:
        """A bound on what the jobs (head, duration, lag) of one stream leave for the next: max over the sets of
        those with lag >= t, and of those with head >= s, of least head + summed durations + least lag."""
        o = np.argsort(-lags, kind="stable")
        by_lag = (np.minimum.accumulate(heads[o]) + np.cumsum(durs[o]) + lags[o]).max()
        o = np.argsort(-heads, kind="stable")
        by_head = (heads[o] + np.cumsum(durs[o]) + np.minimum.accumulate(lags[o])).max()
        return float(max(by_lag, by_head))

    r = before_work.copy()
    for i in range(k):
        for idx in groups:
            sel = idx[follows[i, idx]]
            if sel.size:
                r[i] = max(r[i], queue(r[sel], between[i, sel] + own[i], dur[sel]))
    q = after_work.copy()
    for i in range(k - 1, -1, -1):
        for idx in groups:
            sel = idx[follows[idx, i]]
            if sel.size:
                q[i] = max(q[i], queue(q[sel], between[sel, i] + own[sel], dur[sel]))
    best = max(_jackson([(float(r[i]), float(dur[i]), float(q[i])) for i in idx]) for idx in groups if idx.size)
    return best * (1.0 - LAG_SAFETY)


def lower_bound(problem: Problem | Graph, collective_order: str | None = None) -> LowerBound:
    """The analytical bounds of a problem, or of a graph under a collective-order policy ("group" by default;
    docs/solver.md, Collective order). The budget plays no part.

    "chain" and "global" only add constraints to "group", so the group bounds
    hold (chain's wait-to-collective pairs are added as edges first); under
    "free" the group's input order means nothing, and only order-free bounds are used.
    """
    pb = as_problem(problem, None, collective_order)
    graph, key = pb.relaxed, ("lower_bound", pb.collective_order)
    if key not in graph._cache:  # kept on the (frozen) graph: the searches of a frontier's budgets share it
        graph._cache[key] = _lower_bound(graph, pb.collective_order)
    return graph._cache[key]


def _lower_bound(graph: Graph, collective_order: str) -> LowerBound:
    if collective_order == "free":
        return LowerBound(graph.compute_total, critical_path(graph, fifo=False), comm_load(graph), 0.0,
                          comm_lags(graph))
    g = chained(graph, "chain")[0] if collective_order == "chain" else graph
    return LowerBound(g.compute_total, critical_path(g), comm_runs(g), comm_chain(g), comm_lags(g))
