"""Inductor's peak-memory topological sorts (torch 2.13 `memory.py`): LPMF, BFS, DFS.

They order by all dependencies (fake ones included) and know nothing of
collectives beyond those edges; `reorder_for_peak_memory` keeps the lowest
peak of the starting order and the three sorts (first wins ties).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

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
    out: list[int] = []
    while len(out) < n and ready:
        v = min(ready, key=lambda x: (size[x] if size[x] > gap else 0, size[x] - to_free[x], index[x]))
        ready.remove(v)
        out.append(v)
        live += size[v]
        max_mem = max(max_mem, live)
        live -= to_free[v]
        gap = max_mem - live
        for w in g.succs[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.add(w)
        for j in pred_bufs[v]:
            outdeg[j] -= 1
            if outdeg[j] == 1:
                for c in g.b_cons[j]:
                    to_free[c] += g.b_free[j]
    return PassResult("topological_sort_lpmf", out)


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
