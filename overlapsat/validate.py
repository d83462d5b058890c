"""The validator (MODEL.md, Valid schedule). Independent of every optimiser."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from overlapsat.budget import BudgetLike
from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, COLLECTIVE_ORDERS, Graph
from overlapsat.problem import Problem, as_problem
from overlapsat.simulate import check_permutation, memory_curve_array, permutation_array

CollectiveOrder = Literal["chain", "global", "group", "free"]


@dataclass(frozen=True)
class Violation:
    kind: str  # permutation | dependency | collective_order | memory | atomic
    message: str
    nodes: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


def validate(
    problem: Problem | Graph,
    order: Sequence[str | int],
    memory_budget: BudgetLike = None,
    *,
    collective_order: CollectiveOrder | None = None,
    limit: int | None = None,
) -> list[Violation]:
    """Every violation of `order` (up to `limit` per kind); [] means valid.

    Takes a `Problem`, or a graph with the budget and level (default "group")."""
    pb = as_problem(problem, memory_budget, collective_order)
    collective_order = pb.collective_order  # type: ignore[assignment]
    budget = pb.budget
    graph = pb.relaxed  # Inductor's chain edges belong to the "chain" level only
    ids = permutation_array(graph, order)
    if ids is None:
        return [Violation("permutation", p) for p in check_permutation(graph, order)]
    names = graph.names
    pos_a = np.empty(len(ids), dtype=np.int64)
    pos_a[ids] = np.arange(len(ids))
    pos = pos_a.tolist()
    out: list[Violation] = []

    def add(kind: str, msg: str, *nodes: str) -> bool:
        if limit is not None and sum(v.kind == kind for v in out) >= limit:
            return False
        out.append(Violation(kind, msg, nodes))
        return True

    # each family is checked vectorised; only the pairs found out of order are described one by one
    src, dst = constraint_edges(graph)
    for k in np.flatnonzero(pos_a[src] > pos_a[dst]).tolist():
        u, v = int(src[k]), int(dst[k])
        what = _edge_kind(graph, names[u], names[v])
        if not add("dependency", f"{names[v]!r} (step {pos[v]}) runs before {names[u]!r} (step {pos[u]}), which it "
                   f"must follow ({what})", names[u], names[v]):
            break

    # written out from the policy's definition (docs/solver.md), not from Graph.order_pairs
    if collective_order != "free":
        a_, b_, (wa_, wb_, w_) = _coll_pairs(graph, collective_order)
        for k in np.flatnonzero(pos_a[a_] > pos_a[b_]).tolist():
            a, b = int(a_[k]), int(b_[k])
            where = f"in group {graph.groups[graph.group_id[a]]!r}" if collective_order == "group" else "globally"
            if not add("collective_order", f"collective {names[b]!r} is issued before {names[a]!r}, "
                       f"reversing their input order {where}", names[a], names[b]):
                break
        if collective_order == "chain":  # every wait of a collective before the next one is issued
            for k in np.flatnonzero(pos_a[w_] > pos_a[wb_]).tolist():
                a, b, w = int(wa_[k]), int(wb_[k]), int(w_[k])
                if not add("collective_order", f"collective {names[b]!r} is issued before the wait {names[w]!r} of the "
                           f"previous collective {names[a]!r} (collective_order='chain': one collective in flight)",
                           names[w], names[b]):
                    break

    for k, grp in enumerate(graph.atomic):
        if not grp:
            continue
        p0 = pos[grp[0]]
        if any(pos[x] != p0 + off for off, x in enumerate(grp)):
            add("atomic", f"atomic group #{k} ({', '.join(repr(names[x]) for x in grp)}) is split or reordered",
                *(names[x] for x in grp))

    if budget is not None and len(ids):
        post_alloc = memory_curve_array(graph, ids)
        over = int(np.count_nonzero(post_alloc > budget))
        if over:
            peak_step = int(np.argmax(post_alloc))
            add("memory", f"peak memory {int(post_alloc[peak_step])} B at step {peak_step} ({names[ids[peak_step]]!r}) "
                f"exceeds the budget of {budget} B ({over} step(s) over)", names[ids[peak_step]])
    return out


def _edge_kind(graph: Graph, u: str, v: str) -> str:
    """What kind of edge u -> v is, for the message: data, or ordering only (no data flows)."""
    e = (u, v)
    if graph.coll_of[graph.index[v]] == graph.index[u]:
        return "a wait follows its collective"
    if e in graph.edges or any(u == b.producer and v in b.consumers for b in graph.buffers):
        return "data dependency"
    if e in graph.fake_edges:
        return "ordering-only (fake) edge, no data flows"
    if e in graph.implied_edges:
        return "ordering-only edge implied by a mutation, no data flows"
    return "dependency"


def constraint_edges(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """Every ordering constraint u -> v as two arrays, built once per graph."""
    key = "validate:edges"
    if key not in graph._cache:
        src = [u for v, ps in enumerate(graph.preds) for u in ps]
        dst = [v for v, ps in enumerate(graph.preds) for _ in ps]
        graph._cache[key] = (np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))
    return graph._cache[key]


def _coll_pairs(graph: Graph, collective_order: str) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Consecutive collectives (a, b) the policy keeps in input order, and (a, b, w) for every wait w of a."""
    key = "validate:pairs:" + collective_order
    if key not in graph._cache:
        seqs = graph.group_colls if collective_order == "group" else [graph.coll_seq]
        pairs = [(a, b) for seq in seqs for a, b in zip(seq, seq[1:])]
        a = np.asarray([p[0] for p in pairs], dtype=np.int64)
        b = np.asarray([p[1] for p in pairs], dtype=np.int64)
        triples = [(p[0], p[1], w) for p in pairs for w in graph.waits_of[p[0]]]
        wa, wb, w = (np.asarray([t[i] for t in triples], dtype=np.int64) for i in range(3))
        graph._cache[key] = (a, b, (wa, wb, w))
    return graph._cache[key]


def is_valid(problem: Problem | Graph, order: Sequence[str | int], memory_budget: BudgetLike = None, *,
             collective_order: CollectiveOrder | None = None) -> bool:
    return not validate(problem, order, memory_budget, collective_order=collective_order, limit=1)


def assert_valid(problem: Problem | Graph, order: Sequence[str | int], memory_budget: BudgetLike = None, *,
                 collective_order: CollectiveOrder | None = None, what: str = "schedule") -> None:
    """Raise GraphError listing every violation; the gate every result passes."""
    vs = validate(problem, order, memory_budget, collective_order=collective_order)
    if vs:
        name = problem.graph.name if isinstance(problem, Problem) else problem.name
        raise GraphError.from_problems(f"{what} for graph {name!r} is invalid", [str(v) for v in vs])


__all__ = ["Violation", "validate", "is_valid", "assert_valid", "CollectiveOrder", "COLLECTIVE", "COLLECTIVE_ORDERS"]
