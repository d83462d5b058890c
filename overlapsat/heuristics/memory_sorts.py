"""Inductor's peak-memory topological sorts (torch 2.13 `memory.py`): LPMF, BFS, DFS.

They order by all dependencies (fake ones included) and know nothing of
collectives beyond those edges; `reorder_for_peak_memory` keeps the lowest
peak of the starting order and the three sorts (first wins ties).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from overlapsat.graph import Graph
from overlapsat.heuristics.base import PassResult, memoised, start_order, validated
from overlapsat.simulate import peak_memory


def _tracked(g: Graph) -> list[int]:
    """Buffers Inductor plans: produced ones and freeable inputs (not parameters)."""
    return [j for j in range(len(g.buffers)) if g.b_prod[j] >= 0 or g.b_fin[j]]


def _pred_buffers(g: Graph) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in g.nodes]
    for j in _tracked(g):
        for c in g.b_cons[j]:
            out[c].append(j)
    return out


def _size(g: Graph) -> list[int]:
    return [sum(g.b_alloc[j] for j in g.produces[v]) for v in range(len(g.nodes))]


@memoised
@validated
def topological_sort_lpmf(g: Graph, order: Sequence[str | int] | None = None) -> PassResult:
    """Least Peak Memory First: below the running max, prefer the node leaving the least live."""
    ids = start_order(g, order)
    n = len(ids)
    index = [0] * len(g.nodes)
    for i, v in enumerate(ids):
        index[v] = i
    size = _size(g)
    pred_bufs = _pred_buffers(g)
    tracked = _tracked(g)
    outdeg = {j: len(g.b_cons[j]) + (1 if g.b_out[j] else 0) for j in tracked}
    indeg = [len(g.preds[v]) for v in range(len(g.nodes))]
    ready = {v for v in ids if indeg[v] == 0}
    live = sum(g.b_free[j] for j in tracked if g.b_fin[j])
    output_mem = sum(g.b_free[j] for j in tracked if g.b_out[j])
    max_mem = max(live, output_mem)
    gap = max_mem - live
    to_free = [0] * len(g.nodes)
    for v in ids:
        for j in pred_bufs[v]:
            if outdeg[j] == 1:
                to_free[v] += g.b_free[j]
        for j in g.produces[v]:
            if outdeg[j] == 0:
                to_free[v] += g.b_free[j]
    # torch's rule picks min over the ready set of (size if size > gap else 0, size - to_free, index); a scan
    # of the ready set per step is quadratic (a 50k-node wide graph took minutes). The same pick in O(log n):
    # nodes with size <= gap are a prefix of the nodes sorted by size, and they win if any is ready (their first
    # key is 0, every other's is > gap >= 0); else the least (size, size - to_free, index).
    #  - `least`: a heap of (size - to_free, index, node) over the ready set. Its top wins whenever its size is
    #    <= gap (the least key overall is the least among the small ones): no tree work at all.
    #  - `small`: a min-tree of the same keys over the by-size positions, for the prefix query otherwise; its
    #    updates wait until a query needs them (most steps never do).
    #  - `every`: a heap of (size, size - to_free, index, node), the pick when no ready node is small.
    # A heap entry is stale once its node has run or its key changed (a newer entry was pushed).
    by_size = sorted(ids, key=lambda x: (size[x], index[x]))
    pos = [0] * len(g.nodes)
    for k, v in enumerate(by_size):
        pos[v] = k
    sizes_sorted = [size[v] for v in by_size]
    small = _MinTree(len(by_size))
    small.build({pos[x]: (size[x] - to_free[x], index[x], x) for x in ready})
    least = [(size[x] - to_free[x], index[x], x) for x in ready]
    every = [(size[x], size[x] - to_free[x], index[x], x) for x in ready]
    heapq.heapify(least)
    heapq.heapify(every)

    def show(x: int) -> None:
        key = (size[x] - to_free[x], index[x], x)
        small.set_later(pos[x], key)
        heapq.heappush(least, key)
        heapq.heappush(every, (size[x], key[0], index[x], x))

    out: list[int] = []
    while len(out) < n and ready:
        while True:  # the valid top of `least`
            k_, _, v = least[0]
            if v in ready and k_ == size[v] - to_free[v]:
                break
            heapq.heappop(least)
        if size[v] > gap:
            best = small.prefix_min(bisect_right(sizes_sorted, gap))
            if best is not _EMPTY:
                v = best[-1]
            else:
                while True:
                    s_, k_, _, v = heapq.heappop(every)
                    if v in ready and k_ == s_ - to_free[v]:
                        break
        ready.remove(v)
        small.set_later(pos[v], _EMPTY)
        out.append(v)
        live += size[v]
        max_mem = max(max_mem, live)
        live -= to_free[v]
        gap = max_mem - live
        for w in g.succs[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.add(w)
                show(w)
        for j in pred_bufs[v]:
            outdeg[j] -= 1
            if outdeg[j] == 1:
                for c in g.b_cons[j]:
                    to_free[c] += g.b_free[j]
                    if c in ready:
                        show(c)
    return PassResult("topological_sort_lpmf", out)


_EMPTY = (math.inf,)  # above every key (keys are tuples of finite numbers)


class _MinTree:
    """A segment tree of keys with prefix minima; an empty position holds `_EMPTY`.

    Point updates are deferred (`set_later`) and applied together before the next query, each ancestor
    recomputed once.
    """

    def __init__(self, n: int) -> None:
        self.size = 1
        while self.size < max(1, n):
            self.size *= 2
        self.t: list[Any] = [_EMPTY] * (2 * self.size)
        self.pending: dict[int, Any] = {}

    def build(self, keys: dict[int, Any]) -> None:
        """Set many positions at once (linear, where one set at a time is n log n)."""
        t = self.t
        for i, key in keys.items():
            t[self.size + i] = key
        for i in range(self.size - 1, 0, -1):
            a, b = t[2 * i], t[2 * i + 1]
            t[i] = a if a < b else b

    def set_later(self, i: int, key: Any) -> None:
        self.pending[i] = key

    def _flush(self) -> None:
        t, size = self.t, self.size
        level = set()
        for i, key in self.pending.items():
            t[size + i] = key
            level.add((size + i) >> 1)
        self.pending.clear()
        while level:
            up = set()
            for i in level:
                a, b = t[2 * i], t[2 * i + 1]
                t[i] = a if a < b else b
                if i > 1:
                    up.add(i >> 1)
            level = up

    def prefix_min(self, k: int) -> Any:
        """The least key among positions [0, k) (`_EMPTY` when all are empty)."""
        if self.pending:
            self._flush()
        t = self.t
        best, lo, hi = _EMPTY, self.size, self.size + k
        while lo < hi:
            if lo & 1:
                if t[lo] < best:
                    best = t[lo]
                lo += 1
            if hi & 1:
                hi -= 1
                if t[hi] < best:
                    best = t[hi]
            lo >>= 1
            hi >>= 1
        return best


@memoised
@validated
def topological_sort_bfs(g: Graph, order: Sequence[str | int] | None = None) -> PassResult:
    """FIFO: prefer the node whose predecessors ran earliest."""
    ids = start_order(g, order)
    index = [0] * len(g.nodes)
    for i, v in enumerate(ids):
        index[v] = i
    indeg = [len(g.preds[v]) for v in range(len(g.nodes))]
    ran = [-1] * len(g.nodes)
    heap: list[tuple[list[int], int, int]] = []

    def push(v: int) -> None:
        heapq.heappush(heap, (sorted({ran[p] for p in g.preds[v]}), index[v], v))

    for v in ids:
        if indeg[v] == 0:
            push(v)
    out: list[int] = []
    while heap:
        v = heapq.heappop(heap)[2]
        ran[v] = len(out)
        out.append(v)
        for w in g.succs[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                push(w)
    return PassResult("topological_sort_bfs", out)


@memoised
@validated
def topological_sort_dfs(g: Graph, order: Sequence[str | int] | None = None) -> PassResult:
    """Post-order DFS visiting the smallest (outputs + inputs) nodes first."""
    ids = start_order(g, order)
    index = [0] * len(g.nodes)
    for i, v in enumerate(ids):
        index[v] = i
    size = _size(g)
    pred_bufs = _pred_buffers(g)
    key = [(size[v] + sum(g.b_free[j] for j in pred_bufs[v]), index[v]) for v in range(len(g.nodes))]
    seen = [False] * len(g.nodes)
    out: list[int] = []
    for root in sorted(ids, key=lambda v: key[v]):
        if seen[root]:
            continue
        seen[root] = True
        stack = [(root, iter(sorted(g.direct_preds[root], key=lambda v: key[v])))]
        while stack:
            v, it = stack[-1]
            for p in it:
                if not seen[p]:
                    seen[p] = True
                    stack.append((p, iter(sorted(g.direct_preds[p], key=lambda u: key[u]))))
                    break
            else:
                stack.pop()
                out.append(v)
    return PassResult("topological_sort_dfs", out)


@validated
def reorder_for_peak_memory(g: Graph, order: Sequence[str | int] | None = None) -> PassResult:
    """The lowest-peak of the starting order, LPMF, BFS and DFS."""
    ids = start_order(g, order)
    results = [PassResult("baseline", ids)] + [f(g, ids) for f in
                                               (topological_sort_lpmf, topological_sort_bfs, topological_sort_dfs)]
    peaks = [peak_memory(g, r.order) for r in results]
    best = min(range(len(results)), key=lambda i: peaks[i])
    return PassResult("reorder_for_peak_memory", results[best].order,
                      {"chosen": results[best].name, "peaks": {r.name: p for r, p in zip(results, peaks)}})
