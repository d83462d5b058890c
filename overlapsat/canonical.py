"""A canonical form of a graph: the same for every file layout of the same graph.

Two files that describe the same graph (same fingerprint) may list their
nodes in different valid orders. Every rank must issue the same order, so
`optimize` works on this form: nodes in a deterministic topological order
(smallest name first among those ready, in natural order so that numbered
names keep their order, atomic groups as blocks, the
pairs the collective-order policy fixes kept), buffers, consumers and edges
sorted by name. The solver's answer is then a function of the graph and the
options only.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from overlapsat.errors import GraphError
from overlapsat.graph import Buffer, Graph, derived, natural_key


def canonical_order(g: Graph, collective_order: str = "group") -> list[int]:
    """Kahn's algorithm over blocks (atomic groups, single nodes), smallest first name first (natural order)."""
    n = len(g.nodes)
    block_of = list(range(n))  # a block is named by its first node; lists indexed by node id (others unused)
    members: list[list[int] | None] = [[v] for v in range(n)]
    for grp in g.atomic:
        if grp:
            for v in grp:
                block_of[v] = grp[0]
                members[v] = None
            members[grp[0]] = list(grp)
    preds: list[set[int]] = [set() for _ in range(n)]
    for v in range(n):
        bv = block_of[v]
        for u in g.preds[v]:
            if block_of[u] != bv:
                preds[bv].add(block_of[u])
    for a, b in g.order_pairs(collective_order):  # the policy's pairs: none under "free"
        if block_of[a] != block_of[b]:
            preds[block_of[b]].add(block_of[a])
    succs: list[list[int]] = [[] for _ in range(n)]
    for b, ps in enumerate(preds):
        for a in ps:
            succs[a].append(b)
    indeg = [len(ps) for ps in preds]
    heap = [(natural_key(g.names[b]), b) for b in range(n) if members[b] is not None and indeg[b] == 0]
    heapq.heapify(heap)
    out: list[int] = []
    while heap:
        _, b = heapq.heappop(heap)
        out.extend(members[b])  # type: ignore[arg-type]
        for s in succs[b]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (natural_key(g.names[s]), s))
    if len(out) != n:  # only "chain" can do this: the input order satisfies every other policy
        raise GraphError(f"graph {g.name!r}: no order satisfies its dependencies together with "
                         f"collective_order={collective_order!r} (a collective must be issued before the wait of an "
                         "earlier one); use 'global' or 'group'")
    return out


def canonical_graph(g: Graph, collective_order: str = "group") -> Graph:
    """`g` with nodes in canonical order and every list sorted by name."""
    order = canonical_order(g, collective_order)
    bufs = tuple(sorted((_sorted_consumers(b) for b in g.buffers), key=lambda b: b.name))
    with derived():
        return Graph(
            tuple(g.nodes[i] for i in order), bufs, tuple(sorted(set(g.edges))), tuple(g.atomic_groups), g.name,
            dict(g.meta), tuple(sorted(set(g.fake_edges))), tuple(sorted(set(g.implied_edges))), g.prefusion,
            g.chain_is_decided,
        )


def kept_canonical(g: Graph, collective_order: str = "group") -> Graph:
    """`canonical_graph(g, collective_order)`, kept on the (frozen) graph: every problem on `g` shares it (a
    frontier's budgets, the plan search and `optimize`)."""
    key = ("canonical", collective_order)
    if key not in g._cache:
        g._cache[key] = canonical_graph(g, collective_order)
    return g._cache[key]


def is_kept(g: Graph, collective_order: str = "group") -> bool:
    """Whether `kept_canonical(g, collective_order)` costs nothing now."""
    return ("canonical", collective_order) in g._cache


def _sorted_consumers(b: Buffer) -> Buffer:
    """`b` with its consumers sorted and unique; `b` itself where they are (a copy costs 25 us a buffer)."""
    cs = b.consumers
    if all(cs[k] < cs[k + 1] for k in range(len(cs) - 1)):
        return b
    return replace(b, consumers=tuple(sorted(set(cs))))


def chained(g: Graph, mode: str) -> tuple[Graph, list[int]]:
    """`g` with the pairs of policy `mode` as fake edges, and the map from its node ids to `g`'s.

    The node list must stay a topological order: when the input order breaks
    the policy (possible only under "chain"), the canonical order is used.
    """
    try:
        return g.with_collective_chain(mode), list(range(len(g.nodes)))
    except GraphError:
        cg = canonical_graph(g, mode)  # raises a clear error when no order satisfies the policy
        return cg.with_collective_chain(mode), [g.index[nm] for nm in cg.names]
