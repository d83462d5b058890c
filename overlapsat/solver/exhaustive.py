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
    graph = problem.graph
    n = len(graph.nodes)
    preds = graph.preds
    succs = graph.succs
    missing = [len(p) for p in preds]
    ready = [v for v in range(n) if missing[v] == 0]
    order: list[int] = []
    best: list[int] | None = None
    best_ms = float("inf")
    judged = 0
    complete = True
    cut = False

    def visit() -> bool:
        """False once the cap is reached."""
        nonlocal best, best_ms, judged, complete, cut
        if len(order) == n:
            if deadline is not None and judged % CLOCK_EVERY == 0 and clock() >= deadline:
                complete, cut = False, True
                return False
            judged += 1
            if not validate(problem, order, limit=1):
                ms = simulate(graph, order).makespan
                if ms < best_ms:
                    best, best_ms = list(order), ms
            if judged >= max_orders:
                complete = False
                return False
            return True
        for v in sorted(ready):
            ready.remove(v)
            order.append(v)
            for s in succs[v]:
                missing[s] -= 1
                if missing[s] == 0:
                    ready.append(s)
            go = visit()
            for s in succs[v]:
                if missing[s] == 0:
                    ready.remove(s)
                missing[s] += 1
            order.pop()
            ready.append(v)
            if not go:
                return False
        return True

    visit()
    return Exhaustive(best, best_ms, complete, judged, cut)


__all__ = ["Exhaustive", "exhaustive"]
