"""The validator (MODEL.md, Valid schedule). Independent of every optimiser."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from overlapsat.budget import BudgetLike, resolve_budget
from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, COLLECTIVE_ORDERS, Graph
from overlapsat.simulate import check_permutation, memory_curve

CollectiveOrder = Literal["chain", "global", "group", "free"]


@dataclass(frozen=True)
class Violation:
    kind: str  # permutation | dependency | collective_order | memory | atomic
    message: str
    nodes: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


def validate(
    graph: Graph,
    order: Sequence[str | int],
    memory_budget: BudgetLike = None,
    *,
    collective_order: CollectiveOrder = "group",
    limit: int | None = None,
) -> list[Violation]:
    """Every violation of `order` (up to `limit` per kind); [] means valid."""
    if collective_order not in COLLECTIVE_ORDERS:
        raise GraphError(f"collective_order must be one of {', '.join(COLLECTIVE_ORDERS)}; got {collective_order!r}")
    perm = check_permutation(graph, order)
    if perm:
        return [Violation("permutation", p) for p in perm]
    ids = graph.order_indices(order)
    names = graph.names
    pos = [0] * len(ids)
    for s, i in enumerate(ids):
        pos[i] = s
    out: list[Violation] = []

    def add(kind: str, msg: str, *nodes: str) -> bool:
        if limit is not None and sum(v.kind == kind for v in out) >= limit:
            return False
        out.append(Violation(kind, msg, nodes))
        return True

    for v, ps in enumerate(graph.preds):
        pv = pos[v]
        for u in ps:
            if pos[u] > pv:
                add("dependency", f"{names[v]!r} (step {pv}) runs before its dependency {names[u]!r} (step {pos[u]})",
                    names[u], names[v])

    # written out from the policy's definition (docs/solver.md), not from Graph.order_pairs
    if collective_order != "free":
        seqs = graph.group_colls if collective_order == "group" else [graph.coll_seq]
        for seq in seqs:
            for a, b in zip(seq, seq[1:]):
                if pos[a] > pos[b]:
                    where = f"in group {graph.groups[graph.group_id[a]]!r}" if collective_order == "group" else "globally"
                    add("collective_order", f"collective {names[b]!r} is issued before {names[a]!r}, "
                        f"reversing their input order {where}", names[a], names[b])
                w = graph.wait_of[a]
                if collective_order == "chain" and w >= 0 and pos[w] > pos[b]:
                    add("collective_order", f"collective {names[b]!r} is issued before the wait {names[w]!r} of the "
                        f"previous collective {names[a]!r} (collective_order='chain': one collective in flight)",
                        names[w], names[b])

    for k, grp in enumerate(graph.atomic):
        if not grp:
            continue
        p0 = pos[grp[0]]
        if any(pos[x] != p0 + off for off, x in enumerate(grp)):
            add("atomic", f"atomic group #{k} ({', '.join(repr(names[x]) for x in grp)}) is split or reordered",
                *(names[x] for x in grp))

    budget = resolve_budget(graph, memory_budget)
    if budget is not None:
        post_alloc, _ = memory_curve(graph, ids)
        over = [s for s, m in enumerate(post_alloc) if m > budget]
        if over:
            peak_step = max(over, key=lambda s: post_alloc[s])
            add("memory", f"peak memory {post_alloc[peak_step]} B at step {peak_step} ({names[ids[peak_step]]!r}) "
                f"exceeds the budget of {budget} B ({len(over)} step(s) over)", names[ids[peak_step]])
    return out


def is_valid(graph: Graph, order: Sequence[str | int], memory_budget: BudgetLike = None, *,
             collective_order: CollectiveOrder = "group") -> bool:
    return not validate(graph, order, memory_budget, collective_order=collective_order, limit=1)


def assert_valid(graph: Graph, order: Sequence[str | int], memory_budget: BudgetLike = None, *,
                 collective_order: CollectiveOrder = "group", what: str = "schedule") -> None:
    """Raise GraphError listing every violation; the gate every result passes."""
    vs = validate(graph, order, memory_budget, collective_order=collective_order)
    if vs:
        raise GraphError.from_problems(f"{what} for graph {graph.name!r} is invalid", [str(v) for v in vs])


__all__ = ["Violation", "validate", "is_valid", "assert_valid", "CollectiveOrder", "COLLECTIVE", "COLLECTIVE_ORDERS"]
