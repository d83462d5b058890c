"""Every valid order of a small graph, for the answers a search may miss there.

A search can end without an order on a graph of a few nodes (one worker over a long horizon, a budget no
heuristic meets), and an order found is not proven best. On a small graph, listing every order that keeps the
ordering constraints, and judging each with the validator and the simulator (the arbiters, not a model),
answers both exactly: the best valid order, and, when the listing was complete, a proof that it is optimal,
or that no order meets the budget. The listing is capped; a capped listing proves nothing.

Under a budget, a prefix whose live bytes already exceed it is not extended: the memory model's live bytes at a
step depend only on the nodes placed up to it (a buffer is freed at its last consumer's step), so every order
that starts with that prefix breaks the budget. Such prefixes count as listed, not as judged: the proof stands.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from overlapsat.graph import Graph
from overlapsat.problem import Problem
from overlapsat.simulate import arrays, simulate
from overlapsat.validate import validate

MAX_ORDERS = 50_000  # orders judged at most: every order of an 8-node graph (40,320 at most)
ORDERS_PER_SECOND = 10_000  # judged on a loaded 2-core machine (about 13,000 idle, 2026-11-28): the cap per second
CLOCK_EVERY = 64  # orders judged between two looks at the clock


@dataclass(frozen=True)
class Exhaustive:
    """The best valid order (None: none met every rule), its makespan, and whether every order was judged."""

    order: list[int] | None
    makespan: float
    complete: bool
    judged: int
    cut_by_clock: bool = False  # the deadline, not the cap, ended an incomplete listing
    pruned: int = 0  # prefixes set aside because their live bytes already broke the budget


def exhaustive(problem: Problem, max_orders: int = MAX_ORDERS, deadline: float | None = None,
               clock: Callable[[], float] = time.monotonic, first: bool = False) -> Exhaustive:
    """Judge every order of the problem's graph that keeps its ordering constraints (at most `max_orders`, and
    none after `deadline` on `clock`); `first`: stop at the first valid order (whether any exists, not the best;
    `complete` is then False unless none was valid)."""
    lister = _Lister(problem, max_orders, deadline, clock, first)
    lister.visit()
    return Exhaustive(lister.best, lister.best_ms, lister.complete, lister.judged, lister.cut, lister.pruned)


class LiveBytes:
    """The memory model's live bytes (simulate.py `_memory`, Inductor's allocfree) step by step as an order grows:
    `place(v)` gives the bytes live once `v`'s outputs are allocated (the step's post-alloc figure), `undo(v)`
    takes the step back. Only the prefix decides them: a buffer is allocated at its producer's step (a freeable
    input at the first) and freed at its last consumer's (unread: its producer's, an input's at the first)."""

    def __init__(self, g: Graph) -> None:
        a = arrays(g)
        n = len(g.nodes)
        self.alloc = [0] * n
        self.at_first = int(a.b_size_in[a.b_prod < 0].sum())  # freeable inputs: live from the first step
        for p, size in zip(a.b_prod.tolist(), a.b_size_in.tolist()):
            if p >= 0:
                self.alloc[p] += size
        self.sizes = a.f_size.tolist()
        self.reads: list[list[int]] = [[] for _ in range(n)]  # freed buffers each node reads (once per read)
        self.unread_at: list[list[int]] = [[] for _ in range(n)]  # freed buffers no node reads, by producer
        self.unread_inputs = 0
        self.left: list[int] = []  # reads not yet placed, per freed buffer
        has, starts, cons = a.f_has_cons.tolist(), a.f_cons_start.tolist(), a.f_cons.tolist()
        ends = [*starts[1:], len(cons)]
        k = 0
        for j, p in enumerate(a.f_prod.tolist()):
            if has[j]:
                for c in cons[starts[k]:ends[k]]:
                    self.reads[c].append(j)
                self.left.append(ends[k] - starts[k])
                k += 1
            else:
                self.left.append(0)
                if p >= 0:
                    self.unread_at[p].append(j)
                else:
                    self.unread_inputs += self.sizes[j]
        self.live = 0  # after the last step's frees
        self.trail: list[int] = []  # live bytes before each step, to undo it

    def place(self, v: int) -> int:
        first = not self.trail
        self.trail.append(self.live)
        post_alloc = self.live + self.alloc[v] + (self.at_first if first else 0)
        freed = self.unread_inputs if first else 0
        for j in self.reads[v]:
            self.left[j] -= 1
            if self.left[j] == 0:
                freed += self.sizes[j]
        for j in self.unread_at[v]:
            freed += self.sizes[j]
        self.live = post_alloc - freed
        return post_alloc

    def undo(self, v: int) -> None:
        for j in self.reads[v]:
            self.left[j] += 1
        self.live = self.trail.pop()


class _Lister:
    """The listing's state: the order being built, what is ready, and the best complete order judged so far."""

    def __init__(self, problem: Problem, max_orders: int, deadline: float | None, clock: Callable[[], float],
                 first: bool = False) -> None:
        self.problem, self.graph, self.max_orders, self.deadline, self.clock = problem, problem.relaxed, max_orders, \
            deadline, clock
        self.first = first
        n = len(self.graph.nodes)
        # the level's collective order is a precedence too: orders that reverse it are not listed (the validator
        # still judges every order listed)
        self.succs = [list(s) for s in self.graph.succs]
        self.missing = [len(p) for p in self.graph.preds]
        for a, b in self.graph.order_pairs(problem.collective_order):
            if b not in self.succs[a]:
                self.succs[a].append(b)
                self.missing[b] += 1
        self.ready = [v for v in range(n) if self.missing[v] == 0]
        # an atomic group runs as one block: after a member only the next, and no later member starts one
        self.next_in_group = {a: b for grp in self.graph.atomic for a, b in zip(grp, grp[1:])}
        self.later_members = set(self.next_in_group.values())
        self.order: list[int] = []
        self.best: list[int] | None = None
        self.best_ms = float("inf")
        self.judged = 0
        self.complete = True
        self.cut = False
        self.pruned = 0
        self.budget = problem.budget
        self.live = LiveBytes(self.graph) if self.budget is not None else None

    def visit(self) -> bool:
        """Extend the order by each node that may come next; False once the cap or the deadline is reached."""
        g = self.graph
        if len(self.order) == len(g.nodes):
            return self._judge()
        forced = self.next_in_group.get(self.order[-1]) if self.order else None
        cands = ([forced] if forced in self.ready else []) if forced is not None else \
            sorted(v for v in self.ready if v not in self.later_members)
        for v in cands:
            if self.live is not None and self.live.place(v) > self.budget:  # no order from here meets the budget
                self.live.undo(v)
                self.pruned += 1
                continue
            self.ready.remove(v)
            self.order.append(v)
            for s in self.succs[v]:
                self.missing[s] -= 1
                if self.missing[s] == 0:
                    self.ready.append(s)
            go = self.visit()
            for s in self.succs[v]:
                if self.missing[s] == 0:
                    self.ready.remove(s)
                self.missing[s] += 1
            self.order.pop()
            self.ready.append(v)
            if self.live is not None:
                self.live.undo(v)
            if not go:
                return False
        return True

    def _judge(self) -> bool:
        if self.deadline is not None and self.judged % CLOCK_EVERY == 0 and self.clock() >= self.deadline:
            self.complete, self.cut = False, True
            return False
        self.judged += 1
        if not validate(self.problem, self.order, limit=1):
            ms = simulate(self.graph, self.order).makespan
            if ms < self.best_ms:
                self.best, self.best_ms = list(self.order), ms
            if self.first:  # the listing stops short of its end
                self.complete = False
                return False
        if self.judged >= self.max_orders:
            self.complete = False
            return False
        return True


__all__ = ["Exhaustive", "LiveBytes", "exhaustive"]
