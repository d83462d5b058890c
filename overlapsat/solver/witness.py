"""An order within a tight budget, found by a search over the sets of nodes a prefix holds.

On a small graph whose budget no heuristic meets (often the least peak itself), the bytes live after a prefix
depend on which nodes it holds, not on their order (MODEL.md "Memory": a buffer is allocated at its producer's
step and freed at its last reader's). So a depth-first search over those sets, which never enters again a set
that led nowhere, finds an order within the budget where one exists, visiting each set at most once. It claims
nothing: its order is judged by the validator like any other, and a search that finds none proves nothing (the
listing and CP-SAT give the proofs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from overlapsat.graph import Graph
from overlapsat.problem import Problem

CLOCK_EVERY = 64  # sets entered between two looks at the clock


@dataclass(frozen=True)
class Witness:
    """An order (node ids) within the budget that keeps every ordering rule, or None; the sets entered, the
    placements tried (the work), and whether every reachable set was entered (then none exists, by this search's
    own reading of the rules)."""

    order: list[int] | None
    states: int
    complete: bool
    cut_by_clock: bool = False
    steps: int = 0


class _Stop(Exception):
    pass


class PrefixSets:
    """The graph's rules as bit masks over node ids, and the bytes each step allocates and frees: what a prefix
    holds decides what may come next and the bytes live (the listing, exhaustive.py, walks orders with it too)."""

    def __init__(self, g: Graph, collective_order: str) -> None:
        n = len(g.nodes)
        self.n, self.full = n, (1 << n) - 1
        self.need = [sum(1 << u for u in set(g.preds[v])) for v in range(n)]
        seqs = [] if collective_order == "free" else g.group_colls if collective_order == "group" else [g.coll_seq]
        for seq in seqs:
            for a, b in zip(seq, seq[1:]):
                self.need[b] |= 1 << a
                if collective_order == "chain":  # one collective in flight: its waits come before the next
                    self.need[b] |= sum(1 << w for w in g.waits_of[a])
        self.block = [[v] for v in range(n)]  # what placing v places: an atomic group's members, in their order
        for grp in g.atomic:
            if grp:
                for v in grp:
                    self.block[v] = []
                self.block[grp[0]] = list(grp)
        self.alloc = [0] * n
        self.first_alloc = self.first_free = 0  # inputs: allocated at the first step; unread ones freed there
        self.frees: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # v -> (mask of readers, bytes) it may free
        for j, p in enumerate(g.b_prod):
            if p < 0 and not g.b_fin[j]:
                continue  # a parameter: a constant, not counted
            size = g.b_alloc[j] if p >= 0 else g.b_free[j]
            if p >= 0:
                self.alloc[p] += size
            else:
                self.first_alloc += size
            if g.b_out[j]:
                continue
            readers = list(dict.fromkeys(g.b_cons[j])) or ([p] if p >= 0 else [])
            if not readers:
                self.first_free += g.b_free[j]
                continue
            mask = sum(1 << c for c in readers)
            for c in readers:
                self.frees[c].append((mask, g.b_free[j]))

    def ready(self, v: int, held: int) -> bool:
        """Whether v's block may follow the set `held`: v starts a block not yet placed, each member's rules met."""
        if not self.block[v] or held >> v & 1:
            return False
        for u in self.block[v]:
            if self.need[u] & ~held:
                return False
            held |= 1 << u
        return True

    def place(self, v: int, held: int, live: int, budget: int) -> tuple[int, int] | None:
        """Place v's block after the set `held` with `live` bytes: the new set and live bytes, or None where a
        member is not ready or a step peaks above `budget`."""
        for u in self.block[v]:
            if self.need[u] & ~held:
                return None
            first = held == 0
            live += self.alloc[u] + (self.first_alloc if first else 0)
            if live > budget:
                return None
            held |= 1 << u
            live -= sum(size for mask, size in self.frees[u] if not mask & ~held) + (self.first_free if first else 0)
        return held, live


def witness(problem: Problem, prefer: Sequence[int] | None = None, max_steps: int = 1_000_000,
            deadline: float | None = None, clock: Callable[[], float] = time.monotonic) -> Witness:
    """An order of the problem's graph within its budget, trying nodes in the order `prefer` gives them (say the
    lowest-peak heuristic order: the witness then stays close to it), trying at most `max_steps` placements and
    none after `deadline` on `clock`."""
    w = _Walker(problem, prefer, max_steps, deadline, clock)
    try:
        found = w.visit(0, 0)
    except _Stop:
        return Witness(None, w.entered, False, w.steps <= max_steps, w.steps)
    return Witness(w.order if found else None, w.entered, True, False, w.steps)


class _Walker:
    """The search's state: the order being built, the sets that led nowhere, the count of sets entered."""

    def __init__(self, problem: Problem, prefer: Sequence[int] | None, max_steps: int, deadline: float | None,
                 clock: Callable[[], float]) -> None:
        self.sets = sets = PrefixSets(problem.relaxed, problem.collective_order)
        self.budget = problem.budget if problem.budget is not None else 1 << 62
        rank = {v: k for k, v in enumerate(prefer or ())}
        self.tries = sorted((v for v in range(sets.n) if sets.block[v]), key=lambda v: (rank.get(v, sets.n), v))
        self.max_steps, self.deadline, self.clock = max_steps, deadline, clock
        self.dead: set[int] = set()
        self.order: list[int] = []
        self.entered = self.steps = 0

    def visit(self, held: int, live: int) -> bool:
        """Complete the order from the set `held`; False where no completion stays within the budget."""
        sets = self.sets
        if held == sets.full:
            return True
        if held in self.dead:
            return False
        self.entered += 1
        if self.deadline is not None and self.entered % CLOCK_EVERY == 0 and self.clock() >= self.deadline:
            raise _Stop
        for v in self.tries:
            if held >> v & 1:
                continue
            self.steps += 1
            if self.steps > self.max_steps:
                raise _Stop
            nxt = sets.place(v, held, live, self.budget)
            if nxt is None:
                continue
            self.order.extend(sets.block[v])
            if self.visit(*nxt):
                return True
            del self.order[len(self.order) - len(sets.block[v]):]
        self.dead.add(held)
        return False


__all__ = ["PrefixSets", "Witness", "witness"]
