"""Every valid order of a small graph, for the answers a search may miss there.

A search can end without an order on a graph of a few nodes (one worker over a long horizon, a budget no
heuristic meets), and an order found is not proven best. On a small graph, listing every order that keeps the
ordering constraints, and judging each with the validator and the simulator (the arbiters, not a model),
answers both exactly: the best valid order, and, when the listing was complete, a proof that it is optimal,
or that no order meets the budget. The listing is capped; a capped listing proves nothing.

Under a budget, a prefix whose live bytes already exceed it is not extended: the memory model's live bytes at a
step depend only on the nodes placed up to it (a buffer is freed at its last consumer's step; the witness search
reads them so too, `witness.PrefixSets`), so every order that starts with that prefix breaks the budget. Such
prefixes count as listed, not as judged: the proof stands.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from overlapsat.problem import Problem
from overlapsat.simulate import simulate
from overlapsat.solver.witness import PrefixSets
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


class _Lister:
    """The listing's state: the order being built, the set of nodes it holds and their live bytes (the rules and
    the memory model as bit masks, `witness.PrefixSets`), and the best complete order judged so far."""

    def __init__(self, problem: Problem, max_orders: int, deadline: float | None, clock: Callable[[], float],
                 first: bool = False) -> None:
        self.problem, self.graph, self.max_orders, self.deadline, self.clock = problem, problem.relaxed, max_orders, \
            deadline, clock
        self.first = first
        # an order is extended only by a block (a node, or an atomic group's members) whose dependencies and level's
        # collective order are met (the validator still judges every order listed)
        self.sets = PrefixSets(self.graph, problem.collective_order)
        self.budget = problem.budget if problem.budget is not None else 1 << 62
        self.order: list[int] = []
        self.best: list[int] | None = None
        self.best_ms = float("inf")
        self.judged = 0
        self.complete = True
        self.cut = False
        self.pruned = 0

    def visit(self, held: int = 0, live: int = 0) -> bool:
        """Extend the order by each block that may come next; False once the cap or the deadline is reached."""
        sets = self.sets
        if held == sets.full:
            return self._judge()
        for v in range(sets.n):
            if not sets.ready(v, held):
                continue
            nxt = sets.place(v, held, live, self.budget)
            if nxt is None:  # a step past the budget: no order from here meets it
                self.pruned += 1
                continue
            self.order.extend(sets.block[v])
            go = self.visit(*nxt)
            del self.order[len(self.order) - len(sets.block[v]):]
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


__all__ = ["Exhaustive", "exhaustive"]
