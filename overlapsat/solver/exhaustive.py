"""Every valid order of a small graph, for the answers a search may miss there.

A search can end without an order on a graph of a few nodes (one worker over a long horizon, a budget no
heuristic meets), and an order found is not proven best. On a small graph, listing every order that keeps the
ordering constraints, and judging each with the validator and the simulator (the arbiters, not a model),
answers both exactly: the best valid order, and, when the listing was complete, a proof that it is optimal,
or that no order meets the budget. The listing is capped; a capped listing proves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from overlapsat.problem import Problem
from overlapsat.simulate import simulate
from overlapsat.validate import validate

MAX_ORDERS = 50_000  # orders judged at most: every order of an 8-node graph (40,320 at most)


@dataclass(frozen=True)
class Exhaustive:
    """The best valid order (None: none met every rule), its makespan, and whether every order was judged."""

    order: list[int] | None
    makespan: float
    complete: bool
    judged: int


def exhaustive(problem: Problem, max_orders: int = MAX_ORDERS) -> Exhaustive:
    """Judge every order of the problem's graph that keeps its ordering constraints (at most `max_orders`)."""
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

    def visit() -> bool:
        """False once the cap is reached."""
        nonlocal best, best_ms, judged, complete
        if len(order) == n:
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
    return Exhaustive(best, best_ms, complete, judged)


__all__ = ["Exhaustive", "exhaustive"]
