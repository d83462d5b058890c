"""Fit an order under a memory budget by moving what is live too early or freed too late (our pass, not Inductor's).

Inductor's overlap passes raise collectives and sink waits with a loose memory limit of their own; under a budget
the fastest of them often peaks a little above it: a prefetched gather live across the activation peak, or the last
reader of an activation pushed past it. This pass repairs such an order. At the first step over the budget it tries
the moves that promise most there:

- *postpone* a node whose outputs are live at that step but not yet read, to just before its first reader (or the
  next collective its level keeps after it);
- *postpone a chain* (asked for by the check after Inductor's fusion): a node read before that step only by its own
  descendants, with those descendants, to just before the first node after the step that reads one of them
  (Inductor's fused nodes: clones and the views reading them placed before a peak their values are not read at;
  6 MiB over a GPU budget, 2026-11-30);
- *hoist* the last reader of a buffer live at that step, with the ancestors it still waits for, to just before it.

A move is kept only if it lowers the bytes over the budget summed over every step, so the pass ends; it stops when
the order fits, when no move helps, or at its move limit (deterministic: a count, not a clock). Moves keep every
dependency and the level's collective sequence; the caller judges the result, as it judges every pass's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from overlapsat.graph import COLLECTIVE, WAIT, Graph
from overlapsat.heuristics.base import PassResult
from overlapsat.simulate import arrays, memory_curve_array
from overlapsat.validate import constraint_edges

HOIST_NODES = 16  # a hoist or a chain moves at most this many nodes
CHAINS = 64  # nodes tried as the head of a postponed chain at one step, nearest first (a count: deterministic)
PATIENCE = 8  # kept moves in a row that may leave the peak unchanged


@dataclass(frozen=True)
class _Move:
    saving: int  # bytes it promises to save at the step over the budget (an estimate, for ranking only)
    distance: int  # how far the first node moves (ties: the move that disturbs least)
    nodes: tuple[int, ...]  # in their order
    dest: int  # where they are inserted once removed


def fit_budget(g: Graph, order: Sequence[int], budget: int, collective_order: str = "group",
               max_moves: int = 1000, tries: int = 8, patience: int = PATIENCE, chains: bool = False) -> PassResult:
    """`order` (ids of `g`) with nodes moved until its peak is within `budget`, or as near as moves get it.

    Of the moves at the first step over the budget, the `tries` that promise most are tried in turn; the first
    that lowers the summed excess is kept. The pass gives up once `patience` kept moves in a row leave the peak
    where it was (an order far over the budget is not one a few moves fit). `chains=True` also postpones chains
    whole where no other move helps: the check after Inductor's fusion asks for them (its fused nodes), the
    plan search's portfolio does not (its fits, and so its plans, stay as they were)."""
    ids = list(order)
    seq = _next_in_sequence(g, collective_order)
    prev = {b: a for a, b in enumerate(seq) if b >= 0}
    excess, t, peak = _excess(g, ids, budget)
    moves = tried = flat = 0
    while excess > 0 and moves < max_moves and flat < patience:
        kept = None
        for whole in (False, True) if chains else (False,):  # chains where no single move or hoist helps
            for m in _candidates(g, ids, t, seq, prev, collective_order, tries, whole):
                tried += 1
                moving = set(m.nodes)
                cand = [v for v in ids if v not in moving]
                cand[m.dest:m.dest] = m.nodes
                if _splits_atomic(g, cand, m.dest, len(m.nodes)):
                    continue
                after, t_after, peak_after = _excess(g, cand, budget)
                if after < excess:
                    kept = cand, after, t_after, peak_after
                    break
            if kept is not None:
                break
        if kept is None:
            break
        flat = flat + 1 if kept[3] >= peak else 0
        ids, excess, t, peak = kept
        moves += 1
    return PassResult("fit_budget", ids, {"moves": moves, "tried": tried, "work_steps": tried * len(ids),
                                          "fits": excess == 0}, graph=g)


def _splits_atomic(g: Graph, ids: list[int], at: int, k: int) -> bool:
    """Whether the k nodes inserted at `at` sit between two members of one atomic group."""
    if at == 0 or at + k >= len(ids):
        return False
    a, b = g.atomic_of[ids[at - 1]], g.atomic_of[ids[at + k]]
    return a >= 0 and a == b


def _excess(g: Graph, ids: list[int], budget: int) -> tuple[int, int, int]:
    """(bytes over the budget summed over the steps, the first step over it (-1: none), the peak)."""
    curve = memory_curve_array(g, np.asarray(ids, dtype=np.int64))
    over = curve - budget
    first = np.flatnonzero(over > 0)
    peak = int(curve.max()) if len(curve) else 0
    return (int(over[first].sum()), int(first[0]), peak) if len(first) else (0, -1, peak)


def _next_in_sequence(g: Graph, level: str) -> list[int]:
    """Each collective's successor in the sequence its level keeps (-1: none; every collective at `free`)."""
    nxt = [-1] * len(g.nodes)
    if level != "free":
        for s in g.group_colls if level == "group" else [g.coll_seq]:
            for a, b in zip(s, s[1:]):
                nxt[a] = b
    return nxt


def _candidates(g: Graph, ids: list[int], t: int, seq: list[int], prev: dict[int, int], level: str,
                limit: int, chains: bool = False) -> list[_Move]:
    """Up to `limit` moves that may lower the live bytes at step t, the largest promised saving first: postpones
    and hoists, or with `chains` the chains postponed whole (tried only where none of the others helps)."""
    src, dst = constraint_edges(g)  # every ordering constraint, as the validator reads them
    alloc = _allocations(g)
    pos = np.empty(len(g.nodes), dtype=np.int64)
    pos[np.asarray(ids, dtype=np.int64)] = np.arange(len(ids))
    first_reader = np.full(len(g.nodes), len(ids), dtype=np.int64)
    np.minimum.at(first_reader, src, pos[dst])
    found: list[_Move] = []
    before = np.asarray(ids[:t], dtype=np.int64)
    if chains:
        return _chains(g, ids, t, pos, first_reader, before, alloc, _successors(g, src, dst))[:limit]
    for u in before[(first_reader[before] > t) & (alloc[before] > 0)][::-1].tolist():  # postpone, nearest first
        if g.atomic_of[u] >= 0:
            continue
        q = int(first_reader[u])
        nxt = seq[u] if g.kind[u] == COLLECTIVE else seq[g.coll_of[u]] if g.kind[u] == WAIT and level == "chain" \
            else -1
        if nxt >= 0:
            q = min(q, int(pos[nxt]))
        saving = int(alloc[u]) - _freed_by(g, u, pos)
        if q > t and saving > 0:
            found.append(_Move(saving, t - int(pos[u]), (u,), q - 1))
    at_t = int(alloc[ids[t]])  # a node allocates before its step frees: hoisting saves at most the difference
    hoists = []
    for v in _last_readers_after(g, ids, pos, t):
        most = min(at_t, _freed_by(g, v, pos)) - int(alloc[v])  # what it saves if it needs no ancestor moved
        if most > 0:
            hoists.append((-most, int(pos[v]) - t, v))
    for _, _, v in sorted(hoists)[:2 * limit]:  # hoist, with the ancestors it waits for
        moved = _ancestors_after(g, v, pos, t, prev, level)
        if moved is None:
            continue
        own = int(alloc[list(moved)].sum())
        saving = min(at_t - own, _freed_by(g, v, pos) - own)
        if saving > 0:
            found.append(_Move(saving, int(pos[v]) - t, moved, t))
    found.sort(key=lambda m: (-m.saving, m.distance, m.nodes))
    return found[:limit]


def _chains(g: Graph, ids: list[int], t: int, pos: np.ndarray, first_reader: np.ndarray, before: np.ndarray,
            alloc: np.ndarray, succ: list[list[int]]) -> list[_Move]:
    """Chains postponed whole past step t: a node that allocates and is read before t, with its descendants
    before t, to just before the first node after t that reads one of them; nearest head first, the largest
    promised saving first."""
    found: list[_Move] = []
    heads = before[(first_reader[before] < t) & (alloc[before] > 0)][::-1][:CHAINS]
    for u in heads.tolist():
        chain = _descendants_before(g, u, pos, t, succ)
        if chain is None:
            continue
        inside = set(chain)
        q = min((int(pos[w]) for x in chain for w in succ[x] if w not in inside), default=len(ids))
        saving = int(alloc[list(chain)].sum()) - sum(_freed_by(g, x, pos) for x in chain)
        if q > t and saving > 0:
            found.append(_Move(saving, t - int(pos[u]), chain, q - len(chain)))
    found.sort(key=lambda m: (-m.saving, m.distance, m.nodes))
    return found


def _allocations(g: Graph) -> np.ndarray:
    key = "fit_budget:alloc"
    if key not in g._cache:
        g._cache[key] = np.asarray([sum(g.b_alloc[j] for j in g.produces[u]) for u in range(len(g.nodes))],
                                   dtype=np.int64)
    return g._cache[key]


def _ancestors_after(g: Graph, v: int, pos: np.ndarray, t: int, prev: dict[int, int],
                     level: str) -> tuple[int, ...] | None:
    """`v` and its ancestors placed after step t, in their order; None if one is at t, a collective among them
    would pass one its level keeps before it, or there are more than HOIST_NODES."""
    todo, seen = [v], {v}
    while todo:
        x = todo.pop()
        if g.atomic_of[x] >= 0 or (g.kind[x] == WAIT and level == "chain"):
            return None
        before = prev.get(x, -1) if g.kind[x] == COLLECTIVE else -1
        if before >= 0 and before not in seen and int(pos[before]) >= t:
            return None
        if before >= 0 and level == "chain" and any(int(pos[w]) >= t for w in g.waits_of[before]):
            return None  # one collective in flight: the previous one's waits stay before it
        for p in g.preds[x]:
            if int(pos[p]) == t:
                return None
            if int(pos[p]) > t and p not in seen:
                seen.add(p)
                todo.append(p)
                if len(seen) > HOIST_NODES:
                    return None
    return tuple(sorted(seen, key=lambda x: int(pos[x])))


def _successors(g: Graph, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """Each node's successors under every ordering constraint (constraint_edges), the lists cached per graph."""
    key = "fit_budget:succ"
    if key not in g._cache:
        succ: list[list[int]] = [[] for _ in g.nodes]
        for a, b in zip(src.tolist(), dst.tolist()):
            succ[a].append(b)
        g._cache[key] = succ
    return g._cache[key]


def _descendants_before(g: Graph, u: int, pos: np.ndarray, t: int,
                        succ: list[list[int]]) -> tuple[int, ...] | None:
    """`u` and its descendants placed before step t, in their order: what must move with `u` past t. None if one
    of them is read at t, is a collective, a wait or an atomic group's member (the collective sequence stays as
    it is), or there are more than HOIST_NODES."""
    todo, seen = [u], {u}
    while todo:
        x = todo.pop()
        if g.atomic_of[x] >= 0 or g.kind[x] in (COLLECTIVE, WAIT):
            return None
        for w in succ[x]:
            if int(pos[w]) == t:
                return None
            if int(pos[w]) < t and w not in seen:
                seen.add(w)
                todo.append(w)
                if len(seen) > HOIST_NODES:
                    return None
    return tuple(sorted(seen, key=lambda x: int(pos[x])))


def _freed_by(g: Graph, u: int, pos: np.ndarray) -> int:
    """Bytes `u` frees as their last reader in the order (what moving it later keeps alive, and earlier frees)."""
    freed = 0
    for j in set(g.consumes[u]):
        if g.b_out[j] or (g.b_prod[j] < 0 and not g.b_fin[j]):
            continue
        if max(int(pos[c]) for c in g.b_cons[j]) == int(pos[u]):
            freed += g.b_free[j]
    return freed


def _last_readers_after(g: Graph, ids: list[int], pos: np.ndarray, t: int) -> list[int]:
    """Nodes after step t that are the last reader of a buffer live at t (MODEL.md's freed buffers)."""
    a = arrays(g)
    if not len(a.f_cons):
        return []
    prod = np.where(a.f_prod >= 0, pos[np.maximum(a.f_prod, 0)], -1)[a.f_has_cons]
    last = np.maximum.reduceat(pos[a.f_cons], a.f_cons_start)
    live = (prod <= t) & (last > t)
    return sorted({ids[p] for p in last[live].tolist()})
