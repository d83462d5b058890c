"""Large-neighbourhood search over windows of the current best order.

Each window is re-ordered by the same `Model` as the whole graph, with the
window scope: entry state fixed by the prefix, exit state no worse than
today's (model.py, `add_exit_state`). Windows never split an atomic group.
Every accepted order is re-simulated and validated; in deterministic mode a
window is one CP-SAT worker with a work limit, so the sequence of windows is
a function of the graph and the options.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from ortools.sat.python import cp_model

from overlapsat.graph import Graph
from overlapsat.problem import Problem
from overlapsat.simulate import makespan_of, simulate
from overlapsat.solver.cpsat import dt_scale, ended_by_clock, without_hint_phase, without_lp_dives
from overlapsat.solver.model import Scope, build
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.units import TimeScale, UnitWalk, unit_walk
from overlapsat.validate import validate

log = logging.getLogger(__name__)

# Deterministic charges for the Python side of one window, which CP-SAT's deterministic time leaves out, so
# that the work budget tracks the wall clock (CP-SAT does about one unit per second on this 2-core machine):
# a part linear in the graph (positions, the reference's memory constant, checks of an accepted order) and a
# part linear in the window (its model's build and presolve, reading the solution). Measured 2026-11-22:
# about 12 ms per 40-position window at 16k nodes, 87 ms per window of 40 to 640 positions on a 295-node
# graph; without the window part a 60 s limit ran 70 s there, with the old 1.5e-6 per node a 16k-node graph
# spent its work three times faster than its time.
WORK_PER_NODE = 3e-7
WORK_PER_WINDOW_NODE = 5e-4
# a budgeted window's solve ends once its best order is within this many time units of its bound: OR-Tools 9.15
# can stall one unit from the optimum of a window with a memory cumulative, its deterministic time almost still,
# until the wall clock ends it (a 161-variable window of a 4k-node graph ran 4.6 s at 0.05 deterministic seconds;
# docs/or_tools_window_crash.md, 4), which made a deterministic search end by the clock; one unit (the resolution)
# is worth no wall time. Windows without a budget keep CP-SAT's default: there the same limit slowed the search
# of the bundled tp_small about 2x (its LNS then took another path)
WINDOW_GAP_UNITS = 1.0
# a window's own clock: at most this many times the reference seconds it may be charged, and at least
# WINDOW_CLOCK_FLOOR_S. CP-SAT's propagation on windows with a memory cumulative has stalled outside its
# deterministic count in ways each found one at a time (decisions 125-127: 6-49 wall seconds for a window charged
# under 1); a window ended by its own clock is flagged as the search's clock would flag it, and the search goes on
# with the rest of its work instead of losing it to one window
WINDOW_CLOCK_FACTOR = 10.0
WINDOW_CLOCK_FLOOR_S = 1.0


def widen_to_atomic(g: Graph, order: list[int], i: int, j: int) -> tuple[int, int]:
    """Grow [i, j) until it splits no atomic group."""
    if not g.atomic:
        return i, j
    pos = [0] * len(order)
    for k, v in enumerate(order):
        pos[v] = k
    changed = True
    while changed:
        changed = False
        for end in (i, j - 1):
            if 0 <= end < len(order):
                a = g.atomic_of[order[end]]
                if a >= 0:
                    lo = min(pos[v] for v in g.atomic[a])
                    hi = max(pos[v] for v in g.atomic[a]) + 1
                    if lo < i or hi > j:
                        i, j, changed = min(i, lo), max(j, hi), True
    return i, j


def windows(g: Graph, order: list[int], window: int) -> list[tuple[int, int]]:
    """The windows of one sweep, most promising first (a function of the order only, so deterministic).

    First, for every wait that stalls (largest stall first), a window over its
    collective's overlap region: from the collective's issue to the wait when
    that fits, else the `window` positions before the wait; whatever the
    groups of the nodes inside. Then windows sliding by half their size,
    ranked by the stall they contain.
    """
    n = len(order)
    sim = simulate(g, order)
    stall = sim.stall
    pos = [0] * n
    for k, v in enumerate(order):
        pos[v] = k
    out: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()

    stalled = sorted((w for w in range(n) if stall[w] > 0), key=lambda w: (-stall[w], pos[w]))
    for w in stalled:
        pw, pc = pos[w], pos[g.coll_of[w]]
        margin = max(1, window // 4)
        if pw - pc + 2 * margin <= window:
            _add_window(out, seen, n, pc - margin, pc - margin + window)
        else:
            _add_window(out, seen, n, pw + margin - window, pw + margin)
    step = max(1, window // 2)
    prefix = [0.0]
    for v in order:
        prefix.append(prefix[-1] + stall[v])
    for i in sorted(range(0, max(1, n - step), step), key=lambda i: (-(prefix[min(n, i + window)] - prefix[i]), i)):
        _add_window(out, seen, n, i, i + window)
    return out


def _add_window(out: list[tuple[int, int]], seen: set[tuple[int, int]], n: int, i: int, j: int) -> None:
    """Add the window [i, j) clipped to the order, once, where it holds two positions or more."""
    i, j = max(0, i), min(n, j)
    if j - i >= 2 and (i, j) not in seen:
        seen.add((i, j))
        out.append((i, j))


def contained_solve(solver: cp_model.CpSolver, model: cp_model.CpModel) -> int | None:
    """`solver.solve(model)`, retried without the hint and then without presolve where OR-Tools raises
    (9.15 raised `IndexError: absl::btree_map::at` on one window of a 9,879-node graph, from presolve with
    the hint; docs/or_tools_window_crash.md); None if every attempt raised. Each failure is logged."""
    for attempt in ("as built", "without the hint", "without presolve"):
        if attempt == "without the hint":
            model.clear_hints()
        elif attempt == "without presolve":
            solver.parameters.cp_model_presolve = False
        try:
            return solver.solve(model)
        except Exception as e:  # noqa: BLE001 - a solver failure must not end the search
            log.warning("overlapsat: CP-SAT raised on an LNS window (%s): %s: %s", attempt, type(e).__name__, e)
    return None


def window_solver(dt: float, deterministic: bool, workers: int, max_time: float,
                  budgeted: bool = True) -> cp_model.CpSolver:
    """The solver of one window: `dt` deterministic seconds and the wall clock left, one worker in deterministic
    mode; a budgeted window stops within `WINDOW_GAP_UNITS` of its bound."""
    s = cp_model.CpSolver()
    p = s.parameters
    p.max_time_in_seconds = max(0.01, max_time)
    p.catch_sigint_signal = False  # Ctrl-C must reach Python, which returns the best order so far
    p.max_deterministic_time = dt
    if budgeted:
        p.absolute_gap_limit = WINDOW_GAP_UNITS
        # probing's propagation on a window with a memory cumulative lies outside the deterministic count: one
        # 40-node window of a 13k-node graph took 23 wall seconds for 0.1 deterministic ones with it, 0.02 without
        # (decision 125)
        p.cp_model_probing_level = 0
        # nor does it follow its LP's solutions: those dives' propagation lies outside the count too (one window
        # of a 5k-node peer order ran 36.8 wall seconds at 0.08 deterministic ones with them, 0.01 without;
        # decision 126, as decision 112 for whole models)
        without_lp_dives(p, True)
        without_hint_phase(p, True)  # whose search around the hint also stalled these windows (decision 127)
        # and CP-SAT's older linear propagator: the newer one ran a 40-node window of a 5k-node graph 6.3 wall
        # seconds for 0.02 deterministic ones (its bounds pushed a few units at a time), 0.02 s with the older
        p.new_linear_propagation = False
    p.num_workers = 1 if deterministic else workers  # one worker is deterministic by itself
    return s


def solve_window(problem: Problem, ts: TimeScale, order: list[int], i: int, j: int, *, work: float,
                 deterministic: bool, workers: int, max_time: float, walk: UnitWalk | None = None,
                 dt_cap: float = math.inf) -> tuple[list[int] | None, float, bool]:
    """A better re-ordering of order[i:j] with no worse exit state, or None; the work spent (CP-SAT's deterministic
    time priced by `dt_scale`, so within `work`); and whether a clock (`max_time`, or the window's own,
    `WINDOW_CLOCK_FACTOR` times its price), not the work limit, ended the solve. `dt_cap` caps the window's
    deterministic time whatever its work."""
    walk = walk if walk is not None else unit_walk(problem.graph, order, ts)
    md = build(problem, ts, order, horizon=walk.makespan, scope=Scope(i, j), walk=walk)
    scale = dt_scale(md.has_memory)
    dt = max(1e-4, min(dt_cap, work / scale))
    own_clock = max(WINDOW_CLOCK_FLOOR_S, WINDOW_CLOCK_FACTOR * scale * dt)
    s = window_solver(dt, deterministic, workers, min(max_time, own_clock), md.has_memory)
    st = contained_solve(s, md.m)
    spent = scale * s.deterministic_time
    if st is None:  # failed however it was asked: this window is skipped, the incumbent stands
        return None, spent, False
    cut = st != cp_model.OPTIMAL and ended_by_clock(s)  # the clock ended it
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, spent, cut
    cand = md.order_from(s)
    if cand == order or s.objective_value >= md.horizon:
        return None, spent, cut
    return cand, spent, cut


def lns(problem: Problem, ts: TimeScale, order: list[int], params: SolveParams, tb: TimeBudget, *,
        target: float | None = None, work_cap: float | None = None,
        on_improve: Callable[[list[int], float], bool | None] | None = None) -> tuple[list[int], dict[str, float]]:
    """Improve `order` window by window until `work_cap` (default: the budget's) or the deadline is spent.

    Sweeps visit windows around the largest stalls first; a sweep that does not
    lower the makespan doubles the window, up to `lns_max_window`, and one that
    does goes back to `lns_window`. It stops early once the makespan reaches
    `target` (a lower bound).
    """
    g = problem.graph
    best = list(order)
    best_ms = makespan_of(g, best)
    stats: dict[str, Any] = {"windows": 0, "accepted": 0, "improvements": 0, "work": 0.0, "sweeps": 0,
                             "cut_by_clock": 0}
    window = params.lns_window
    walk = unit_walk(g, best, ts)  # recomputed only when an order is accepted
    try:
        best, stats = _sweep(problem, ts, best, best_ms, walk, window, params, tb, target, work_cap, on_improve,
                             stats)
    except KeyboardInterrupt:  # Ctrl-C: `stats["best"]` is always a validated order (or absent: the start)
        tb.interrupted = True
        stats["interrupted"] = 1
        best = stats.get("best", best)
    stats.pop("best", None)
    return best, stats


def _sweep(problem: Problem, ts: TimeScale, best: list[int], best_ms: float, walk: Any, window: int,
           params: SolveParams, tb: TimeBudget, target: float | None, work_cap: float | None,
           on_improve: Callable[[list[int], float], bool | None] | None,
           stats: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    """The sweeps of `lns`; each accepted order is also stored in `stats["best"]` for an interrupt."""
    g = problem.graph
    n = len(best)
    while window <= params.lns_max_window:
        start_ms = best_ms
        for i0, j0 in windows(g, best, window):
            if target is not None and best_ms <= target + 1e-9 * max(1.0, target):
                return best, stats
            if tb.exhausted(params.deterministic) or (work_cap is not None and stats["work"] >= work_cap):
                return best, stats
            i, j = widen_to_atomic(g, best, i0, j0)
            py_work = WORK_PER_NODE * n + WORK_PER_WINDOW_NODE * (j - i)  # the Python side, deterministically
            # the window's share is reserved first, so that the work spent stays within the budget
            room = min(tb.work_left(), work_cap - stats["work"] if work_cap is not None else math.inf) - py_work
            if room <= 0:
                return best, stats
            cand, spent, cut = solve_window(problem, ts, best, i, j, work=room,
                                            dt_cap=params.lns_window_work * window / params.lns_window,
                                            deterministic=params.deterministic, workers=params.n_workers,
                                            max_time=tb.wall_left(), walk=walk)
            spent += py_work
            tb.spend(spent)
            if cut:  # by the search's clock or the window's own; the search goes on while work and time are left
                stats["cut_by_clock"] += 1
                if params.deterministic:
                    tb.cut_by_wall_clock = True
            stats["windows"] += 1
            stats["work"] += spent
            if cand is None:
                continue
            ms = makespan_of(g, cand)
            if ms <= best_ms + 1e-9 and not validate(problem, cand, limit=1):
                stats["accepted"] += 1
                improved = ms < best_ms - 1e-9
                stats["best"] = cand  # one store: what an interrupt returns
                best, best_ms = cand, ms
                walk = unit_walk(g, best, ts)
                if improved:
                    stats["improvements"] += 1
                    if on_improve is not None and on_improve(cand, ms):
                        stats["stopped_by_rule"] = 1
                        return best, stats
        stats["sweeps"] += 1
        # variable neighbourhoods: a sweep that brings nothing doubles the window; one that improves the order
        # goes back to the smallest, since the improvement changed what the small windows see
        window = window * 2 if best_ms >= start_ms - 1e-9 else params.lns_window
    return best, stats
