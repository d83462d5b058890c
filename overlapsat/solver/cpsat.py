"""The contained CP-SAT calls: one solve of a built model, under the call's clock and work, on a helper thread
so that Ctrl-C reaches Python, its failures turned into an `Outcome` (never the caller's exception)."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from overlapsat.evaluate import Evaluated
from overlapsat.graph import Graph
from overlapsat.problem import Problem
from overlapsat.solver.model import RELAX, RESTRICT, build
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.result import GapBelow, Progress, StoppingRule
from overlapsat.solver.units import safe_horizon, unit_walk
from overlapsat.validate import validate

log = logging.getLogger(__name__)

# CP-SAT's deterministic time undercounts the wall time of our models: most of the memory cumulative's propagation
# and of the LP lies outside it. A unit of work is a reference second (what the plan search's ledger prices), so an
# LNS window is charged its deterministic time times the factor of its model, and its deterministic limit is its
# work divided by it. Measured 2026-11-30 on the 2-core reference machine, wall seconds per deterministic second:
# over 600 windows of the bundled graphs, median 3.1 without a memory cumulative and 8.1 with one (10th-90th
# percentiles 2.0-4.7 and 2.7-15.5; 6.2-6.7 over all their wall time), and over the windows of two corpus graphs
# (1k and 4k nodes) 4.6 and 2.7. Uncharged, a budgeted 2-s plan search ended by the clock at 0.15 of its work, so
# the same graph listed in two node orders got two plans. At 4 the two node orders were cut again; 6 gave the
# corpus verdict 8 gives (0.27 points behind the uncharged run's against torch) with twice its clock cuts
# (decision 83).
DT_SCALE_PLAIN = 3.0
DT_SCALE_MEMORY = 8.0
# the whole model pays its deterministic time more nearly at face value: 0.7-1.8 wall seconds per deterministic
# second without a memory cumulative, 1.6-5.8 with one, on the bundled graphs (2026-11-30)
DT_SCALE_WHOLE_PLAIN = 1.0
DT_SCALE_WHOLE_MEMORY = 4.0
# the joint model of buckets and order (joint.py; no memory cumulative) pays far more: its optional intervals'
# propagation lies outside the count. 5.2 wall seconds per deterministic second at the median (1.9-20.2, 10th-90th
# percentiles) over 30 solves of the graphs it runs on, most of it CP-SAT's start at short limits; past the start
# (between 0.05 and 0.3 deterministic seconds) 0.9-6.7, median 2.4 (benchmarks/results/joint_dt_2026-12-01.md).
# Priced at 1, it took 1.5 s of a 2-s plan's clock on `tp_small` while charged 0.5, and the clock, not the work,
# then chose the plan (the same graph in two node orders got two plans: decision 98)
DT_SCALE_JOINT = 3.0
JOINT_START_S = 0.3  # reference seconds of the joint model's CP-SAT start, before its deterministic count moves much


def without_lp_dives(p: Any, has_memory: bool) -> None:
    """On a whole model with a memory cumulative, CP-SAT does not follow its LP's solutions in the search (decision
    112): those dives' propagation lies outside the deterministic count. On the bundled `fsdp_small` under its
    input order's peak one whole-model solve took 32 wall seconds for 0.166 deterministic ones with them, 1.8
    without, with the same order and bound, so the work limit, not the clock, ends the search again. An LNS window
    with a memory cumulative follows none either (decision 126: one window of a 7k-node order search ran 36.8 wall
    seconds for 0.08 deterministic ones with them); its price, `DT_SCALE_MEMORY`, holds without them."""
    if has_memory:
        p.exploit_integer_lp_solution = False
        p.exploit_all_lp_solution = False


def without_hint_phase(p: Any, has_memory: bool) -> None:
    """On a model with a memory cumulative, CP-SAT skips its phase that searches around the solution hint
    (`hint_conflict_limit` 0, decision 127). Our hints are complete and feasible, so the hint is the first
    solution without it; with it, that phase's propagation, which the deterministic count leaves out, ran one
    40-node window of a 5k-node graph 48.9 wall seconds for 3 conflicts (0.03 s without), and it was what the
    windows of decisions 125 and 126 and the whole model of decision 112 stalled in: without it each is proven or
    runs its deterministic limit in well under a second, with CP-SAT's probing and LP dives or without them."""
    if has_memory:
        p.hint_conflict_limit = 0


def dt_scale(has_memory: bool, whole: bool = False, joint: bool = False) -> float:
    """Reference seconds per CP-SAT deterministic second, for an LNS window, (`whole`) the whole model, with
    or without a memory cumulative, or (`joint`) the joint model of buckets and order."""
    if joint:
        return DT_SCALE_JOINT
    if whole:
        return DT_SCALE_WHOLE_MEMORY if has_memory else DT_SCALE_WHOLE_PLAIN
    return DT_SCALE_MEMORY if has_memory else DT_SCALE_PLAIN


class _Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, ts_bound: Callable[[int], float], ts_us: Callable[[float], float], tb: TimeBudget,
                 cb: Callable[[Progress], None] | None, stop: StoppingRule | None) -> None:
        super().__init__()
        self.ts_bound, self.ts_us, self.tb, self.cb, self.stop = ts_bound, ts_us, tb, cb, stop
        self.stopped = False
        self.first: float | None = None
        self.best_t: float | None = None
        self.count = 0

    def on_solution_callback(self) -> None:
        now = self.tb.elapsed()
        self.count += 1
        self.first = self.first if self.first is not None else now
        self.best_t = now
        p = Progress(now, self.ts_us(self.objective_value), self.ts_bound(int(self.best_objective_bound)))
        if self.cb is not None:
            self.cb(p)
        if self.stop is not None and self.stop(p):
            self.stopped = True
            self.stop_search()


class _SolveThread(threading.Thread):
    """One `solver.solve` on a daemon thread: its status, or the exception it raised (re-raised by the caller)."""

    def __init__(self, solver: cp_model.CpSolver, m: cp_model.CpModel, cb: Any) -> None:
        super().__init__(name="overlapsat-cpsat", daemon=True)
        self.solver, self.m, self.cb = solver, m, cb
        self.status: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.status = self.solver.solve(self.m, self.cb)
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            self.error = e


def _interruptible_solve(solver: cp_model.CpSolver, m: cp_model.CpModel, cb: Any, *, tb: TimeBudget) -> Any:
    """`solver.solve` on a helper thread, so that Ctrl-C reaches the main thread while CP-SAT runs.

    On Ctrl-C the search is stopped and its solutions are kept (safe: the
    library never interleaves CP-SAT's search, under which stop_search()
    can abort OR-Tools 9.15).
    """
    t = _SolveThread(solver, m, cb)
    t.start()
    while t.is_alive():
        try:
            t.join(0.1)
        except KeyboardInterrupt:
            if not tb.interrupted:
                tb.interrupted = True
                solver.stop_search()
            else:
                raise
    if t.error is not None:
        raise t.error
    return t.status


@dataclass
class Outcome:
    order: list[int] | None = None
    bound_us: float | None = None
    infeasible: bool = False
    error: str = ""
    bound_units: int | None = None  # the proven bound in the model's own units (a floor for a stricter model)


def solve_whole(problem: Problem, ts: Any, params: SolveParams, tb: TimeBudget, incumbent: Evaluated | None,
                 on_progress: Callable[[Progress], None] | None, stop_when: StoppingRule | None,
                 stats: dict[str, Any], work: float) -> Outcome:
    """One CP-SAT solve of the whole graph (the window model's other scope) with `work` units of work."""
    g = problem.graph
    n = len(g.nodes)
    ref = incumbent.order if incumbent is not None else list(range(n))
    # with a valid incumbent, no better order ends later; without one, no order at all can end later
    walk = unit_walk(g, ref, ts)
    horizon = walk.makespan if incumbent is not None else safe_horizon(g, ts)
    t_build = tb.elapsed()
    md = build(problem, ts, ref, horizon=horizon, walk=walk, memory_rounding=RELAX)
    stats["build_s"] = tb.elapsed() - t_build
    if md.memory_quantum == 1:  # bytes exact: one model, whose every answer is a proof
        return solve_model(g, md, ts, params, tb, on_progress, stop_when, stats, work)
    # Bytes counted in units of md.memory_quantum (memory_quantum): the relaxation proves (infeasibility, the
    # bound) but its order may exceed the budget; then a restriction, whose orders are within it, searches on.
    stats["memory_quantum_bytes"] = md.memory_quantum
    relaxed = solve_model(g, md, ts, params, tb, on_progress, stop_when, stats, work / 2)
    if relaxed.infeasible or relaxed.error or (relaxed.order is not None and not validate(
            problem, relaxed.order, limit=1)):
        return relaxed
    md = build(problem, ts, ref, horizon=horizon, walk=walk, memory_rounding=RESTRICT)
    restricted = solve_model(g, md, ts, params, tb, on_progress, stop_when, stats, max(0.01, work / 2))
    # its infeasibility and its bound prove nothing (sizes rounded up): only its order is kept
    return Outcome(restricted.order, relaxed.bound_us, error=restricted.error)


def ended_by_clock(solver: cp_model.CpSolver) -> bool:
    """Whether a solve that neither proved nor was stopped ended by the wall clock: at its time limit, or, with one
    worker, short of its deterministic limit (only the clock ends it there, however late it read the clock)."""
    p = solver.parameters
    short = p.num_workers == 1 and solver.deterministic_time < 0.95 * p.max_deterministic_time
    return solver.wall_time >= 0.99 * p.max_time_in_seconds or short


def solve_model(g: Graph, md: Any, ts: Any, params: SolveParams, tb: TimeBudget,
                 on_progress: Callable[[Progress], None] | None, stop_when: StoppingRule | None,
                 stats: dict[str, Any], work: float) -> Outcome:
    """Solve one built model with `work` units of work: its order, bound, infeasibility or error."""
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.max_time_in_seconds = max(0.01, tb.wall_left())
    p.catch_sigint_signal = False  # Ctrl-C must reach Python, which returns the best order so far
    scale = dt_scale(md.has_memory, whole=True, joint=md.joint)  # work in reference seconds (decisions 83, 98)
    without_lp_dives(p, md.has_memory)
    without_hint_phase(p, md.has_memory)
    if params.deterministic:
        # One worker, never interleaved search: OR-Tools 9.15 aborts the process under `interleave_search`
        # (CHECK fixed_search and CHECK threshold > 0 on models with a memory cumulative; CHECK
        # solution->size() == postsolve_mapping.size() on plain ones when the wall clock or stop_search()
        # ends the search as presolve ends; docs/or_tools_window_crash.md, decision 84). One worker is
        # deterministic by itself.
        p.max_deterministic_time = max(0.001, work / scale)
        p.num_workers = 1
    else:
        p.num_workers = params.n_workers
    if params.log_search:
        p.log_search_progress = True
        p.log_to_stdout = False
        logs: list[str] = []
        solver.log_callback = logs.append
        stats["log"] = logs
    rule = stop_when
    if isinstance(stop_when, GapBelow):
        p.relative_gap_limit = stop_when.ratio  # CP-SAT's own gap test: same definition, any mode
        rule = None
    elif stop_when is not None and params.deterministic:
        # a rule may read the clock: stopping the one deterministic search on it would make the order depend
        # on the machine's load
        log.warning("a custom stopping rule cannot interrupt the deterministic CP-SAT search; it is applied "
                    "between LNS windows only (use GapBelow, or deterministic=False)")
        rule = None
    cb = _Progress(ts.bound_us, lambda u: u / (ts.k * ts.steps_per_us), tb, on_progress, rule)
    try:
        st = _interruptible_solve(solver, md.m, cb, tb=tb)
    except Exception as e:  # noqa: BLE001 - the solver's failure must not become the caller's
        log.exception("CP-SAT failed")
        return Outcome(error=f"{type(e).__name__}: {e}")
    try:
        tb.spend(scale * solver.deterministic_time)
    except RuntimeError as e:  # OR-Tools 9.15: a solve stopped by Ctrl-C can leave no response to read
        if tb.interrupted:
            log.warning("interrupted: CP-SAT left no answer; the best order found before it stands")
            return Outcome()
        return Outcome(error=f"CP-SAT left no answer ({e})")
    if params.deterministic and st not in (cp_model.OPTIMAL, cp_model.INFEASIBLE) and not cb.stopped \
            and not tb.interrupted and ended_by_clock(solver):
        tb.cut_by_wall_clock = True  # the clock, not the work limit, ended it (the work spent is not comparable)
    stats.update(solutions=cb.count, time_to_first_s=cb.first, time_to_best_s=cb.best_t,
                 solver_status=solver.status_name(st), wall_s=solver.wall_time,
                 deterministic_s=solver.deterministic_time, stopped_by_rule=cb.stopped,
                 model_units_per_us=ts.k * ts.steps_per_us)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        bound_units = int(math.floor((solver.best_objective_bound if st == cp_model.FEASIBLE
                                      else solver.objective_value) + 1e-6))
        return Outcome(md.order_from(solver), ts.bound_us(bound_units), bound_units=bound_units)
    if st == cp_model.INFEASIBLE:
        return Outcome(infeasible=True)
    if st == cp_model.MODEL_INVALID:
        return Outcome(error=f"overlapsat built an invalid CP-SAT model: {md.m.validate()}")
    return Outcome()


__all__ = ["Outcome", "solve_model", "solve_whole"]
