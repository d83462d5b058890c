"""Break the plain model's ties by interference: a valid order no longer in MODEL.md's terms, shorter contended.

The solver minimises MODEL.md's makespan, and many orders share the optimum
(a wait may sit anywhere in its slack). `simulate_contended` tells them apart:
where a transfer overlaps which compute changes how much both slow down. This
local search moves one collective or wait at a time and keeps a move only if
the order stays valid, its plain makespan does not grow, its peak memory does
not grow, and its contended makespan shrinks. So every figure and certificate
of the plain solve (status, bound, gap) still holds for the polished order;
only the contended estimate improves. Deterministic: a fixed sweep, first
improvement, and a budget counted in evaluated moves, not seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from overlapsat.budget import BudgetLike
from overlapsat.cost.hold import H200_HOLD, check_hold, simulate_held
from overlapsat.cost.interference import H200_STEP, Interference, simulate_contended
from overlapsat.errors import GraphError
from overlapsat.graph import COMPUTE, Graph
from overlapsat.simulate import order_ids, simulate
from overlapsat.validate import assert_valid, is_valid

SHIFTS = (-40, -20, -10, -5, -2, -1, 1, 2, 5, 10, 20, 40)  # places a collective or wait is tried at


def moved(ids: list[int], i: int, j: int) -> list[int]:
    """`ids` with the node at place i moved to place j (the others keep their order)."""
    out = ids[:i] + ids[i + 1:]
    out.insert(j, ids[i])
    return out


@dataclass(frozen=True)
class Polished:
    """The polished order and what it changed (us, bytes)."""

    order: list[int]
    contended_before: float
    contended_after: float
    makespan: float  # MODEL.md's, never above the input order's
    peak_memory: int  # never above the input order's
    moves: int  # kept moves
    evaluated: int  # moves tried (the work budget counts these)


def polish_contended(graph: Graph, order: Sequence[int | str], interference: Interference = H200_STEP, *,
                     memory_budget: BudgetLike = None, collective_order: str = "group",
                     max_evaluations: int = 5000) -> Polished:
    """Move collectives and waits to shorten the contended makespan without lengthening MODEL.md's makespan
    or raising peak memory (see the module's docstring). The input order must be valid: it is the fallback."""
    if not isinstance(interference, Interference):
        raise GraphError(f"interference: expected an Interference, got {type(interference).__name__}")
    if not isinstance(max_evaluations, int) or isinstance(max_evaluations, bool) or max_evaluations < 0:
        raise GraphError(f"max_evaluations must be an integer >= 0, got {max_evaluations!r}")
    ids = order_ids(graph, order)
    assert_valid(graph, ids, memory_budget, collective_order=collective_order, what="order to polish")  # type: ignore[arg-type]
    return polish_by(graph, ids, lambda o: simulate_contended(graph, o, interference).makespan,
                     memory_budget=memory_budget, collective_order=collective_order, max_evaluations=max_evaluations)


def polish_held(graph: Graph, order: Sequence[int | str], hold: float = H200_HOLD, *,
                memory_budget: BudgetLike = None, collective_order: str = "group",
                max_evaluations: int = 20000) -> Polished:
    """The same search scored by the exposure under the partial hold (`simulate_held`: transfers held back by a
    running GEMM), an estimate beside MODEL.md like the contended one: MODEL.md's makespan and peak never grow,
    so a plain solve's status and bound still hold. Its before/after figures are the held exposure (us).
    (Measured once on 2 H200s as `d_hold`: not faster there; benchmarks/results/gpu_runs.md, runs 27-30.)"""
    hold = check_hold(hold)
    if not isinstance(max_evaluations, int) or isinstance(max_evaluations, bool) or max_evaluations < 0:
        raise GraphError(f"max_evaluations must be an integer >= 0, got {max_evaluations!r}")
    ids = order_ids(graph, order)
    assert_valid(graph, ids, memory_budget, collective_order=collective_order, what="order to polish")  # type: ignore[arg-type]
    return polish_by(graph, ids, lambda o: simulate_held(graph, o, hold).exposed, memory_budget=memory_budget,
                     collective_order=collective_order, max_evaluations=max_evaluations)


def polish_by(graph: Graph, ids: list[int], score: Callable[[list[int]], float], *, memory_budget: BudgetLike = None,
              collective_order: str = "group", max_evaluations: int = 5000) -> Polished:
    """The search behind `polish_contended`, for any secondary `score` of an order (lower is better): keep a
    move only if the order stays valid, `score` shrinks, and MODEL.md's makespan and peak do not grow. `ids`
    must be a valid order (it is the fallback). Figures in `Polished` are `score`'s."""
    plain = kept_sim = simulate(graph, ids)
    limit_ms, limit_peak = plain.makespan, plain.peak_memory
    before = best = score(ids)
    movable = [v for v in ids if graph.kind[v] != COMPUTE]
    kept = tried = 0
    improved = True
    while improved and tried < max_evaluations:
        improved = False
        for v in movable:
            i = ids.index(v)
            for d in SHIFTS:
                j = i + d
                if not 0 <= j < len(ids) or tried >= max_evaluations:
                    continue
                cand = moved(ids, i, j)
                tried += 1
                if not is_valid(graph, cand, memory_budget, collective_order=collective_order):  # type: ignore[arg-type]
                    continue
                c = score(cand)
                if c >= best - 1e-6:
                    continue
                s = simulate(graph, cand)
                if s.makespan > limit_ms or s.peak_memory > limit_peak:  # strict: a proof of the input still holds
                    continue
                ids, best, i, kept_sim = cand, c, j, s
                kept += 1
                improved = True
    return Polished(ids, before, best, kept_sim.makespan, kept_sim.peak_memory, kept, tried)
