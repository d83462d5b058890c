"""Every valid order of a small graph, for the answers a search may miss there.

A search can end without an order on a graph of a few nodes (one worker over a long horizon, a budget no
heuristic meets), and an order found is not proven best. On a small graph, listing every order that keeps the
ordering constraints, and judging each with the validator and the simulator (the arbiters, not a model),
answers both exactly: the best valid order, and, when the listing was complete, a proof that it is optimal,
or that no order meets the budget. The listing is capped; a capped listing proves nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from overlapsat.problem import Problem
from overlapsat.simulate import simulate
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


def exhaustive(problem: Problem, max_orders: int = MAX_ORDERS, deadline: float | None = None,
               clock: Callable[[], float] = time.monotonic) -> Exhaustive:
    """Judge every order of the problem's graph that keeps its ordering constraints (at most `max_orders`, and
    none after `deadline` on `clock`)."""
    lister = _Lister(problem, max_orders, deadline, clock)
    lister.visit()
    return Exhaustive(lister.best, lister.best_ms, lister.complete, lister.judged, lister.cut)


class _Lister:
    """The listing's state: the order being built, what is ready, and the best complete order judged so far."""

    def __init__(self, problem: Problem, max_orders: int, deadline: float | None, clock: Callable[[], float]) -> None:
        self.problem, self.graph, self.max_orders, self.deadline, self.clock = problem, problem.graph, max_orders, \
            deadline, clock
        n = len(self.graph.nodes)
        self.missing = [len(p) for p in self.graph.preds]
        self.ready = [v for v in range(n) if self.missing[v] == 0]
        self.order: list[int] = []
        self.best: list[int] | None = None
        self.best_ms = float("inf")
        self.judged = 0
        self.complete = True
        self.cut = False

    def visit(self) -> bool:
        """Extend the order by each ready node in turn; False once the cap or the deadline is reached."""
        g = self.graph
        if len(self.order) == len(g.nodes):
            return self._judge()
        for v in sorted(self.ready):
            self.ready.remove(v)
            self.order.append(v)
            for s in g.succs[v]:
                self.missing[s] -= 1
                if self.missing[s] == 0:
                    self.ready.append(s)
            go = self.visit()
            for s in g.succs[v]:
                if self.missing[s] == 0:
                    self.ready.remove(s)
                self.missing[s] += 1
            self.order.pop()
            self.ready.append(v)
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
        if self.judged >= self.max_orders:
            self.complete = False
            return False
        return True


__all__ = ["Exhaustive", "exhaustive"]
