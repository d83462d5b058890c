"""Buckets where the budget leaves room: a bucketing built on a valid order, with that order kept.

Under a tight budget torch's greedy bucketer (which sees no memory) leaves no order within it, and the plan search
then has nothing to climb from (on a 2-D Llama3 backward graph every one of its starts broke the budget). Here the
buckets are grown on the best unbucketed order O instead, where O's memory curve leaves room:

- each key's collectives are walked in O's order, and the next one joins the open bucket when the bucket stays
  legal, within `cap` bytes, has a place in O, and what it adds to O's memory at each step keeps within the budget;
- a bucket's place in O: its copy-in and collective where its first member was issued when every member's inputs
  are ready there (an all_gather of parameter shards), else where its last member was; its wait and copy-out
  where its first member was waited on (just after its collective if that comes earlier and no reader is in
  between);
- what it adds: its buffers (MODEL.md "Buckets", the layout's), its members' outputs from the copy-out (or the
  group call) instead of from their own issue, and their inputs until the copy-in.

The result is the bucketing and O read on its bucketed graph (each bucket's nodes at its place, the members
gone), checked exactly (`validate`); where the estimate was short, the buckets spanning the worst step are
dropped and the check is made again. Deterministic: a function of the graph, O, the budget and `cap`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from overlapsat.errors import GraphError
from overlapsat.graph import Graph
from overlapsat.plan import Bucket, Pricing, bucket_problems, bucketable_by_key, constant_input_bytes, layout_of, materialize
from overlapsat.problem import Problem
from overlapsat.simulate import memory_curve_array
from overlapsat.validate import validate

REPAIRS = 6  # rounds of dropping the buckets at the worst step before the bucketing is given up


@dataclass(frozen=True)
class Room:
    """A bucketing that keeps within the budget on an order (names) of its bucketed graph."""

    buckets: tuple[Bucket, ...]
    order: list[str]
    graph: Graph  # the bucketed graph (`materialize`)


@dataclass
class Checks:
    """The exact checks (a bucketed graph built, the order read on it validated) that room starts may make
    together: a count, so that how many are built, repairs included, is the same on any machine and load."""

    left: int


@dataclass(frozen=True)
class _Place:
    lo: int  # the first step of O the bucket changes
    issue: int  # its copy-in and collective go before O's node at this step
    wait: int  # its wait and copy-out go before O's node at this step
    extra: np.ndarray  # bytes it adds to O's memory at steps lo, lo + 1, ...


class _Grower:
    """O's positions and memory, and what a bucket would add to them."""

    def __init__(self, problem: Problem, g: Graph, order: Sequence[int], price: Pricing) -> None:
        self.g, self.order = g, list(order)
        n = len(self.order)
        self.pos = np.empty(len(g.nodes), dtype=np.int64)
        self.pos[np.asarray(self.order, dtype=np.int64)] = np.arange(n)
        self.mem = memory_curve_array(g, np.asarray(self.order, dtype=np.int64)).astype(np.float64)
        self.added = np.zeros(n)
        self.budget = math.inf if problem.budget is None else float(problem.budget)
        self.copy = layout_of(price) == "copy"
        self.out_b = {c: sum(g.buffers[j].size_alloc for j in g.produces[c]) for c in g.coll_seq}
        self.in_b = {c: sum(g.buffers[j].size_alloc for j in g.consumes[c]) or constant_input_bytes(g.nodes[c])
                     for c in g.coll_seq}

    def place(self, ms: list[int]) -> _Place | None:
        """Where bucket `ms` (collective ids) goes in O and what it adds there; None where it has no place."""
        g, pos = self.g, self.pos
        ps = [int(pos[m]) for m in ms]
        first, last = min(ps), max(ps)
        mine = set(ms)
        waits = [g.waits_of[m][0] for m in ms]
        mine.update(waits)
        ready = all(pos[q] < first for m in ms for q in g.preds[m])
        issue = first if ready else last
        if any(s not in mine and pos[s] <= issue for m in ms for s in g.succs[m]):
            return None  # something a member feeds would come before the merged collective
        wait = min(int(pos[w]) for w in waits)
        if wait <= issue:
            wait = issue + 1  # just after the collective, if nothing reads a member's wait before
        if any(pos[s] < wait for w in waits for s in g.succs[w] if s not in mine) or \
                any(pos[q] >= wait for w in waits for q in g.preds[w] if q not in mine):
            return None
        lo, hi = first, max(wait, last) + 1
        extra = np.zeros(hi - lo)
        for m, pm in zip(ms, ps):
            out = self.out_b[m]
            made = wait if self.copy else issue  # where its output is written: the copy-out, or the group call
            if pm < made:
                extra[pm - lo:made - lo] -= out
            else:
                extra[made - lo:pm - lo] += out
            if pm < issue:  # its input held until the copy-in reads it
                extra[pm - lo:issue - lo] += self.in_b[m]
        if self.copy:  # the bucket's own buffers: out (gathers: from the copy-in) to the copy-out, in at the copy-in
            extra[issue - lo:wait + 1 - lo] += sum(self.out_b[m] for m in ms)
            extra[issue - lo] += sum(self.in_b[m] for m in ms)
        return _Place(lo, issue, wait, extra)

    def fits(self, p: _Place) -> bool:
        k = slice(p.lo, p.lo + len(p.extra))
        return float((self.mem[k] + self.added[k] + p.extra).max()) <= self.budget

    def take(self, p: _Place) -> None:
        self.added[p.lo:p.lo + len(p.extra)] += p.extra


def room_buckets(problem: Problem, g: Graph, order: Sequence[int], price: Pricing, cap: float,
                 checks: Checks | None = None) -> Room | None:
    """Buckets of `g` (the problem's graph) of at most `cap` bytes each, grown on `order` (a valid order of `g`,
    ids) where the budget leaves room, and `order` read on their bucketed graph (module docstring); None where no
    bucket was made or none kept within the budget, or where `checks` ran out first (each check is counted)."""
    if problem.bucket_cap is not None:
        cap = min(cap, float(problem.bucket_cap))
    grow = _Grower(problem, g, order, price)
    places: dict[Bucket, _Place] = {}
    for cs in bucketable_by_key(g).values():
        cs = sorted(cs, key=lambda c: grow.pos[c])
        cur: list[int] = [cs[0]]
        at: _Place | None = None
        for c in [*cs[1:], None]:
            if c is not None and sum(g.nodes[m].nbytes for m in cur) + g.nodes[c].nbytes <= cap:
                ms = cur + [c]
                p = grow.place(ms)
                if p is not None and grow.fits(p) and not bucket_problems(g, [_bucket(g, ms)]):
                    cur, at = ms, p
                    continue
            if at is not None:  # the open bucket is closed
                grow.take(at)
                places[_bucket(g, cur)] = at
            cur, at = [c] if c is not None else [], None
    return _checked(problem, g, grow, places, price, checks)


def _bucket(g: Graph, ms: list[int]) -> Bucket:
    return Bucket(tuple(g.names[m] for m in sorted(ms)))


def _checked(problem: Problem, g: Graph, grow: _Grower, places: dict[Bucket, _Place], price: Pricing,
             checks: Checks | None) -> Room | None:
    """The buckets with O read on their bucketed graph, validated; the buckets spanning the worst step over the
    budget dropped while it is not valid (at most `REPAIRS` times, and while `checks` last)."""
    for _ in range(REPAIRS):
        if not places or (checks is not None and checks.left <= 0):
            return None
        if checks is not None:
            checks.left -= 1
        bs = tuple(sorted(places, key=lambda b: g.index[b.members[0]]))
        try:
            h = materialize(g, list(bs), price)
        except GraphError:
            return None
        order, anchor = _read(g, grow.order, bs, places)
        ids = h.order_indices(order)
        if not validate(problem.on(h), ids, limit=1):
            return Room(bs, order, h)
        curve = memory_curve_array(h, np.asarray(ids, dtype=np.int64))
        worst = int(np.argmax(curve))
        if curve[worst] <= grow.budget:
            return None  # invalid for a reason other than memory: the estimate's places were wrong
        step = anchor[worst]
        spanning = [b for b, p in places.items() if p.lo <= step < p.lo + len(p.extra)]
        if not spanning:
            return None
        for b in spanning:
            del places[b]
    return None


def _read(g: Graph, order: list[int], bs: Sequence[Bucket], places: dict[Bucket, _Place]) -> tuple[list[str], list[int]]:
    """O on the bucketed graph: each bucket's copy-in and collective before O's node at its issue step, its wait
    and copy-out before the node at its wait step, its members and their waits gone; and per node of the result,
    the step of O it stands at."""
    before: dict[int, list[str]] = {}
    gone: set[int] = set()
    for b in bs:
        p = places[b]
        c_in, coll, wait, c_out = b.nodes
        before.setdefault(p.issue, []).extend((c_in, coll))
        before.setdefault(p.wait, []).extend((wait, c_out))
        for m in b.members:
            i = g.index[m]
            gone.update((i, g.waits_of[i][0]))
    out: list[str] = []
    anchor: list[int] = []
    for k, v in enumerate(order):
        for nm in before.get(k, ()):
            out.append(nm)
            anchor.append(k)
        if v not in gone:
            out.append(g.names[v])
            anchor.append(k)
    for nm in before.get(len(order), ()):  # a wait just after a collective at the last step
        out.append(nm)
        anchor.append(len(order) - 1)
    return out, anchor


__all__ = ["Checks", "Room", "room_buckets"]
