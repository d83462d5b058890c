"""The simulator: the arbiter of every figure overlapsat reports (MODEL.md).

It is independent of the solver and the heuristics on purpose, and linear in
nodes + buffers + edges: numpy does the per-node work, and only collectives
and waits are walked one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, COMPUTE, Graph


@dataclass(frozen=True)
class SimResult:
    """Timing and memory of one order. Per-node arrays are indexed by node id, per-step lists by step."""

    graph: Graph
    order: list[int]
    start: np.ndarray
    end: np.ndarray
    stall: np.ndarray
    makespan: float
    exposed: float
    peak_memory: int
    mem_post_alloc: list[int]
    mem_post_free: list[int]
    issue: np.ndarray  # compute clock when each node is issued

    def __repr__(self) -> str:
        return (f"SimResult(graph={self.graph.name!r}, makespan_us={self.makespan:.3f}, exposed_us={self.exposed:.3f}, "
                f"peak_memory_bytes={self.peak_memory})")

    @property
    def makespan_us(self) -> float:
        return self.makespan

    @property
    def exposed_us(self) -> float:
        return self.exposed

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
        return {g.names[c]: float(sum(self.stall[w] for w in g.waits_of[c])) for c in g.coll_seq}

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
    if permutation_array(graph, order) is not None:
        return []
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


def permutation_array(graph: Graph, order: Sequence[str | int]) -> np.ndarray | None:
    """`order` as an id array when it is a permutation of known names, or of ids; None otherwise
    (check_permutation then says what is wrong)."""
    n = len(graph.nodes)
    if len(order) != n:
        return None
    if n and isinstance(order[0], str):
        try:
            a = np.fromiter(map(graph.index.__getitem__, order), dtype=np.int64, count=n)
        except (KeyError, TypeError):
            return None
    else:
        a = np.asarray(order)
        if a.ndim != 1 or (n and a.dtype.kind not in "iu"):  # bools, floats, mixed names and ids: not ids
            return None
        a = a.astype(np.int64, copy=False)
        if n and (a.min() < 0 or a.max() >= n):
            return None
    if n and np.any(np.bincount(a, minlength=n) != 1):
        return None
    return a


def order_array(graph: Graph, order: Sequence[str | int] | None) -> np.ndarray:
    """`order` (names or ids) as an id array, checked to be a permutation; None is the input order."""
    if order is None:
        return np.arange(len(graph.nodes), dtype=np.int64)
    a = permutation_array(graph, order)
    if a is None:
        raise GraphError.from_problems(f"not a schedule of graph {graph.name!r}", check_permutation(graph, order))
    return a


def order_ids(graph: Graph, order: Sequence[str | int] | None) -> list[int]:
    """`order` (names or ids) as ids, checked to be a permutation; None is the input order."""
    return order_array(graph, order).tolist()


class _Arrays:
    """The graph's tables as numpy arrays, built once per graph (cached on it)."""

    def __init__(self, g: Graph) -> None:
        self.kind = np.asarray(g.kind, dtype=np.int8)
        self.dur = np.asarray(g.dur, dtype=np.float64)
        self.launch = np.asarray(g.launch, dtype=np.float64)
        # each node's time on the compute stream: a kernel's duration, a collective's launch, a wait's own time
        self.comp_dur = np.asarray(g.work, dtype=np.float64)
        self.event = self.kind != COMPUTE  # collectives and waits: the only nodes the walk must visit in turn
        self.group_or_coll = np.asarray([g.group_id[v] if k == COLLECTIVE else g.coll_of[v] if k != COMPUTE else -1
                                         for v, k in enumerate(g.kind)], dtype=np.int64)
        # buffers counted by the memory model: produced ones and freeable inputs (parameters are a constant)
        counted = [j for j in range(len(g.b_prod)) if g.b_prod[j] >= 0 or g.b_fin[j]]
        self.b_prod = np.asarray([g.b_prod[j] for j in counted], dtype=np.int64)
        self.b_size_in = np.asarray([g.b_alloc[j] if g.b_prod[j] >= 0 else g.b_free[j] for j in counted],
                                    dtype=np.int64)
        freed = [j for j in counted if not g.b_out[j]]
        self.f_size = np.asarray([g.b_free[j] for j in freed], dtype=np.int64)
        self.f_prod = np.asarray([g.b_prod[j] for j in freed], dtype=np.int64)
        cons = [g.b_cons[j] for j in freed]
        self.f_has_cons = np.asarray([bool(c) for c in cons], dtype=bool)
        flat = [c for cs in cons for c in cs]
        self.f_cons = np.asarray(flat, dtype=np.int64)
        starts = np.cumsum([0] + [len(c) for c in cons])[:-1]
        self.f_cons_start = np.asarray(starts, dtype=np.int64)[self.f_has_cons]


def arrays(g: Graph) -> _Arrays:
    a = g._cache.get("sim_arrays")
    if a is None:
        a = g._cache["sim_arrays"] = _Arrays(g)
    return a


def _walk(graph: Graph, ids: np.ndarray, full: bool):
    """MODEL.md's time walk, vectorised: the compute clock is a prefix sum of compute-stream work plus the
    stalls so far, so only collectives and waits are visited one by one (a few % of a real graph).

    A collective's launch is in the prefix sum after it, so its transfer starts at clock + launch; a wait's own
    time is in the prefix sum after it, so it runs once the stall is over (decisions.md 17)."""
    a = arrays(graph)
    n = len(ids)
    clock = np.empty(n + 1)
    clock[0] = 0.0
    np.cumsum(a.comp_dur[ids], out=clock[1:])  # the clock before each step, without stalls
    ev = np.flatnonzero(a.event[ids])
    ev_nodes = ids[ev]
    is_coll = (a.kind[ev_nodes] == COLLECTIVE).tolist()
    ref = a.group_or_coll[ev_nodes].tolist()  # collective: its group; wait: its collective
    durs = a.dur[ev_nodes].tolist()
    launches = a.launch[ev_nodes].tolist()
    clocks = clock[ev].tolist()
    nodes = ev_nodes.tolist()
    free = [0.0] * len(graph.groups)
    ends = [-1.0] * len(graph.nodes)  # -1: not issued yet
    starts: list[tuple[int, float]] = []
    stalls: list[tuple[int, float]] = []
    delay = 0.0  # stalls so far
    for k in range(len(nodes)):
        t = clocks[k] + delay
        if is_coll[k]:
            g = ref[k]
            f = free[g]
            t += launches[k]
            st = t if t > f else f
            e = st + durs[k]
            free[g] = e
            ends[nodes[k]] = e
            if full:
                starts.append((nodes[k], st))
        else:
            ce = ends[ref[k]]
            if ce < 0:
                i, c = nodes[k], ref[k]
                raise GraphError(f"wait {graph.names[i]!r} comes before its collective {graph.names[c]!r} in the order")
            if ce > t:
                delay += ce - t
                if full:
                    stalls.append((int(ev[k]), ce - t))
    t_end = float(clock[n]) + delay
    makespan = max([t_end, *free]) if free else t_end
    return makespan, clock, starts, ends, stalls


def simulate(graph: Graph, order: Sequence[str | int] | None = None) -> SimResult:
    """Walk `order` (default: the input order) as MODEL.md's Time and Memory say."""
    ids = order_array(graph, order)
    n = len(graph.nodes)
    makespan, clock, starts, ends, stall_at = _walk(graph, ids, full=True)
    steps = len(ids)
    inc = np.zeros(steps + 1)
    stall_step = np.zeros(steps)
    for s, d in stall_at:
        inc[s + 1] += d
        stall_step[s] = d
    issue_step = clock[:steps] + np.cumsum(inc)[:steps]  # the compute clock when each step is issued
    a = arrays(graph)
    issue = np.zeros(n)
    issue[ids] = issue_step
    stall = np.zeros(n)
    stall[ids] = stall_step
    start = issue.copy()
    end = issue + stall + a.comp_dur  # a wait ends after its stall and its own time
    if starts:
        cs = np.asarray([c for c, _ in starts], dtype=np.int64)
        start[cs] = [st for _, st in starts]
        end[cs] = np.asarray(ends)[cs]
    post_alloc, post_free = _memory(graph, ids)
    peak = max(0, int(post_alloc.max())) if steps else 0
    exposed = makespan - graph.compute_total
    if exposed < 0:  # float rounding of two equal sums; mathematically makespan >= compute
        exposed = 0.0
    return SimResult(graph, ids.tolist(), start, end, stall, makespan, exposed, peak,
                     post_alloc.tolist(), post_free.tolist(), issue)


def makespan_of(graph: Graph, ids: Sequence[int]) -> float:
    """MODEL.md's makespan of a known permutation (ids), without memory or checks: the search's fast path."""
    return _walk(graph, np.asarray(ids, dtype=np.int64), full=False)[0]


def _memory(graph: Graph, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Post-alloc and post-free live bytes per step (Inductor's allocfree), vectorised."""
    a = arrays(graph)
    n = len(ids)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    pos = np.empty(len(graph.nodes), dtype=np.int64)
    pos[ids] = np.arange(n)
    alloc = np.zeros(n, dtype=np.int64)
    np.add.at(alloc, np.where(a.b_prod >= 0, pos[np.maximum(a.b_prod, 0)], 0), a.b_size_in)
    # released after the last consumer; unread: at the producer's own step (inputs: step 0)
    last = np.where(a.f_prod >= 0, pos[np.maximum(a.f_prod, 0)], 0)
    if len(a.f_cons):
        last[a.f_has_cons] = np.maximum.reduceat(pos[a.f_cons], a.f_cons_start)
    freed = np.zeros(n, dtype=np.int64)
    np.add.at(freed, last, a.f_size)
    post_free = np.cumsum(alloc - freed)
    post_alloc = post_free + freed
    return post_alloc, post_free


def memory_curve_array(graph: Graph, ids: np.ndarray) -> np.ndarray:
    """Post-alloc live bytes per step, as an array (the validator's memory check)."""
    return _memory(graph, ids)[0]


def memory_curve(graph: Graph, ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """Post-alloc and post-free live bytes per step (Inductor's allocfree)."""
    post_alloc, post_free = _memory(graph, np.asarray(ids, dtype=np.int64))
    return post_alloc.tolist(), post_free.tolist()


def peak_of(graph: Graph, ids: Sequence[int]) -> int:
    """Peak memory of a known permutation (ids), without checks."""
    post_alloc, _ = _memory(graph, np.asarray(ids, dtype=np.int64))
    return max(0, int(post_alloc.max())) if len(post_alloc) else 0


def peak_memory(graph: Graph, order: Sequence[str | int] | None = None) -> int:
    post_alloc, _ = _memory(graph, order_array(graph, order))
    return max(0, int(post_alloc.max())) if len(post_alloc) else 0


__all__ = ["SimResult", "simulate", "makespan_of", "memory_curve", "peak_memory", "check_permutation", "peak_of"]
