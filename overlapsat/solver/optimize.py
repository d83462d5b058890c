"""`optimize(...)`: heuristics, then CP-SAT warm-started by the best of them.

Whatever happens, the order returned has passed the validator and is no worse
than the best valid heuristic; `Result.status` says how it was found.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from ortools.sat.python import cp_model

from overlapsat.bounds import lower_bound
from overlapsat.budget import BudgetLike, resolve_budget
from overlapsat.errors import GraphError, InfeasibleBudgetError
from overlapsat.graph import Graph
from overlapsat.heuristics.portfolio import HeuristicResult, run_all
from overlapsat.simulate import simulate
from overlapsat.solver.model import build, model_units
from overlapsat.validate import assert_valid, validate

log = logging.getLogger(__name__)

RESOLUTION_US = 0.01  # model time unit (microseconds)
OPTIMALITY_TOL_US = 1e-6
MONOLITHIC_MAX_NODES = 1200  # above this, window LNS (docs/solver.md)


class Status(str, Enum):
    OPTIMAL = "optimal"  # proven optimal (within the stated resolution)
    IMPROVED = "improved"  # better than every heuristic, not proven optimal
    HEURISTIC_TIMEOUT = "heuristic_timeout"  # solver found nothing better in time
    HEURISTIC_OPTIMAL = "heuristic_optimal"  # the best heuristic is proven optimal
    HEURISTIC_SOLVER_ERROR = "heuristic_solver_error"  # solver failed; best heuristic returned


@dataclass
class Progress:
    elapsed_s: float
    makespan_us: float
    bound_us: float


class StoppingRule(Protocol):
    """Called on every improvement; returning True stops the search early."""

    def __call__(self, progress: Progress) -> bool: ...


@dataclass(frozen=True)
class GapBelow:
    """Stop once (makespan - bound) / makespan is at most `ratio`."""

    ratio: float

    def __post_init__(self) -> None:
        if not (isinstance(self.ratio, (int, float)) and 0 <= self.ratio < 1):
            raise GraphError(f"GapBelow.ratio must be in [0, 1), got {self.ratio!r}")

    def __call__(self, progress: Progress) -> bool:
        return progress.makespan_us <= 0 or (progress.makespan_us - progress.bound_us) / progress.makespan_us <= self.ratio


@dataclass
class Result:
    """The best valid order found, its simulated figures and how it was found."""

    graph: Graph
    order: list[int]
    status: Status
    makespan: float
    exposed: float
    peak_memory: int
    bound: float  # lower bound on the makespan of any valid order
    method: str
    baseline: dict[str, float]  # input order
    heuristics: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)
    memory_budget: int | None = None
    message: str = ""

    @property
    def names(self) -> list[str]:
        return [self.graph.names[i] for i in self.order]

    @property
    def exposed_bound(self) -> float:
        return max(0.0, self.bound - self.graph.compute_total)

    @property
    def gap(self) -> float:
        """Relative gap on exposed communication (0 when optimal)."""
        if self.exposed <= 1e-9:
            return 0.0
        return max(0.0, (self.exposed - self.exposed_bound) / self.exposed)

    def summary(self) -> dict[str, Any]:
        return {"status": self.status.value, "method": self.method, "makespan_us": self.makespan,
                "exposed_us": self.exposed, "peak_memory": self.peak_memory, "bound_us": self.bound,
                "exposed_bound_us": self.exposed_bound, "gap": self.gap, "memory_budget": self.memory_budget,
                "baseline": self.baseline, "stats": self.stats, "message": self.message}

    def save(self, path: str) -> None:
        from overlapsat.io import save_schedule

        save_schedule(path, self.graph, self.order, metrics=self.summary(),
                      meta={"heuristics": self.heuristics})


def _h_dict(h: HeuristicResult) -> dict[str, Any]:
    return {"name": h.name, "makespan": h.makespan, "exposed": h.exposed, "peak_memory": h.peak_memory,
            "valid": h.valid, "violations": h.violations, "runtime_s": h.runtime_s}


class _Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, scale: float, t0: float, cb: Callable[[Progress], None] | None,
                 stop: StoppingRule | None = None) -> None:
        super().__init__()
        self.scale, self.t0, self.cb, self.stop = scale, t0, cb, stop
        self.stopped = False
        self.first: float | None = None
        self.best_t: float | None = None
        self.count = 0

    def on_solution_callback(self) -> None:
        now = time.monotonic() - self.t0
        self.count += 1
        self.first = self.first if self.first is not None else now
        self.best_t = now
        p = Progress(now, self.objective_value / self.scale, self.best_objective_bound / self.scale)
        if self.cb is not None:
            self.cb(p)
        if self.stop is not None and self.stop(p):
            self.stopped = True
            self.stop_search()


def optimize(graph: Graph, *, time_limit: float = 10.0, memory_budget: BudgetLike = None, workers: int | None = None,
             deterministic: bool = True, collective_order: str = "group",
             on_progress: Callable[[Progress], None] | None = None, stop_when: StoppingRule | None = None,
             log_search: bool = False, heuristic_results: list[HeuristicResult] | None = None) -> Result:
    """Least exposed communication order of `graph` within `time_limit` seconds (wall clock, whole call).

    `heuristic_results` (from `heuristics.run_all` with the same budget and
    collective order) skips re-running the portfolio, as `compare` does.

    Overshoot: model building is not interruptible, so very large graphs can
    overrun by the build time (measured in docs/solver.md).
    """
    if not (isinstance(time_limit, (int, float)) and math.isfinite(time_limit) and time_limit > 0):
        raise GraphError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if collective_order not in ("group", "global"):
        raise GraphError(f"collective_order must be 'group' or 'global', got {collective_order!r}")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise GraphError(f"workers must be a positive integer, got {workers!r}")
    t0 = time.monotonic()
    deadline = t0 + time_limit
    budget = resolve_budget(graph, memory_budget)
    heur = heuristic_results if heuristic_results is not None else run_all(
        graph, memory_budget=budget, collective_order=collective_order,  # type: ignore[arg-type]
        deadline=t0 + 0.3 * time_limit)
    inp = next((h for h in heur if h.name == "input_order"), None)  # run_all always evaluates it
    if inp is None:
        base = simulate(graph)
        baseline = {"makespan": base.makespan, "exposed": base.exposed, "peak_memory": base.peak_memory}
    else:
        baseline = {"makespan": inp.makespan, "exposed": inp.exposed, "peak_memory": inp.peak_memory}
    valid = [h for h in heur if h.valid]
    lb = lower_bound(graph).makespan
    stats: dict[str, Any] = {"heuristics_s": time.monotonic() - t0}
    incumbent = valid[0] if valid else None

    n = len(graph.nodes)
    scale = 1.0 / RESOLUTION_US
    ref = incumbent.order if incumbent else list(range(n))
    horizon = model_units(graph, ref, scale)
    while horizon > 2**40:
        scale /= 10
        horizon = model_units(graph, ref, scale)
    stats["resolution_us"] = 1 / scale

    order, method, status, message = (incumbent.order, incumbent.name, Status.HEURISTIC_TIMEOUT, "") if incumbent \
        else (None, "", Status.HEURISTIC_TIMEOUT, "")
    bound = lb
    remaining = deadline - time.monotonic()
    nworkers = workers or min(8, max(1, os.cpu_count() or 1))
    if incumbent is not None and incumbent.makespan - lb <= OPTIMALITY_TOL_US:
        remaining = 0.0  # the best heuristic meets a lower bound: nothing left to search
        status = Status.HEURISTIC_OPTIMAL
    if n > MONOLITHIC_MAX_NODES and incumbent is not None and remaining > 0.05:
        from overlapsat.solver.lns import lns

        def improved(o: list[int], ms: float) -> bool:
            p = Progress(time.monotonic() - t0, ms, lb)
            if on_progress is not None:
                on_progress(p)
            stats.setdefault("time_to_first_s", time.monotonic() - t0)
            stats["time_to_best_s"] = time.monotonic() - t0
            return bool(stop_when is not None and stop_when(p))

        best_order, lstats = lns(graph, incumbent.order, scale=scale, budget=budget, collective_order=collective_order,
                                 deadline=deadline, deterministic=deterministic, workers=nworkers,
                                 det_budget=0.35 * time_limit if deterministic else None, on_improve=improved,
                                 target=lb)
        stats["lns"] = lstats
        if lstats.get("stopped_by_wall_clock") and deterministic:
            log.warning("LNS stopped by the wall clock before its deterministic budget: the order may differ across "
                        "machines; raise time_limit for a reproducible result")
        if simulate(graph, best_order).makespan < incumbent.makespan - 1e-9:
            order, method, status = best_order, "cpsat-lns", Status.IMPROVED
        else:
            message = "window LNS found no improvement on the best heuristic"
        remaining = 0.0
    if n and remaining > 0.05:
        try:
            t_build = time.monotonic()
            md = build(graph, scale=scale, horizon=horizon, collective_order=collective_order, memory_budget=budget)
            if incumbent is not None:
                md.hint_order(incumbent.order)
            stats["build_s"] = time.monotonic() - t_build
            solver = cp_model.CpSolver()
            p = solver.parameters
            p.num_workers = nworkers
            remaining = max(0.01, deadline - time.monotonic())
            p.max_time_in_seconds = remaining
            if deterministic:
                p.interleave_search = True
                p.max_deterministic_time = remaining
            if log_search:
                p.log_search_progress = True
                p.log_to_stdout = False
                logs: list[str] = []
                solver.log_callback = logs.append
                stats["log"] = logs
            rule = stop_when
            if isinstance(stop_when, GapBelow):
                p.relative_gap_limit = stop_when.ratio  # CP-SAT's own gap test: same definition, any mode
                rule = None
            elif stop_when is not None and deterministic:
                # OR-Tools 9.15 aborts (postsolve CHECK) on stop_search() under interleave_search
                log.warning("a custom stopping rule cannot interrupt the deterministic CP-SAT search; it is "
                            "applied between LNS windows only (use GapBelow, or deterministic=False)")
                rule = None
            cb = _Progress(scale, t0, on_progress, rule)
            st = solver.solve(md.m, cb)
            stats.update(solutions=cb.count, time_to_first_s=cb.first, time_to_best_s=cb.best_t,
                         solver_status=solver.status_name(st), wall_s=solver.wall_time, stopped_by_rule=cb.stopped)
            if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                # the model charges at most one unit per collective/wait slot and < 1 unit of
                # rounding per compute/collective duration: n + #collectives units in all
                inflation = n + len(graph.coll_seq)
                bound = max(lb, (solver.best_objective_bound - inflation) / scale)
                cand = md.order_from(solver)
                vs = validate(graph, cand, budget, collective_order=collective_order)  # type: ignore[arg-type]
                sim = simulate(graph, cand)
                if vs:
                    message = f"solver order rejected by the validator: {vs[0]}"
                    log.error(message)
                    status = Status.HEURISTIC_SOLVER_ERROR
                elif incumbent is None or sim.makespan < incumbent.makespan - 1e-9:
                    order, method = cand, "cpsat"
                    status = Status.OPTIMAL if st == cp_model.OPTIMAL else Status.IMPROVED
                else:
                    status = Status.HEURISTIC_OPTIMAL if st == cp_model.OPTIMAL else Status.HEURISTIC_TIMEOUT
                if st == cp_model.OPTIMAL:
                    # proven optimal in model units: the true optimum is within the rounding of it
                    bound = max(bound, (solver.objective_value - inflation) / scale)
            elif st == cp_model.INFEASIBLE:
                if incumbent is None:
                    raise _infeasible(budget, heur)
                status, message = Status.HEURISTIC_SOLVER_ERROR, "model infeasible though a heuristic is valid"
                log.error(message)
            elif st == cp_model.MODEL_INVALID:
                raise RuntimeError(f"overlapsat built an invalid CP-SAT model: {md.m.validate()}")
            else:
                message = "no solution within the time limit"
        except InfeasibleBudgetError:
            raise
        except RuntimeError:
            raise
        except Exception as e:  # solver crash: fall back, say so
            log.exception("CP-SAT failed")
            status, message = Status.HEURISTIC_SOLVER_ERROR, f"{type(e).__name__}: {e}"
    if order is None:
        raise _infeasible(budget, heur)
    assert_valid(graph, order, budget, collective_order=collective_order, what="optimize result")  # type: ignore[arg-type]
    sim = simulate(graph, order)
    bound = min(bound, sim.makespan)
    if sim.makespan - bound <= OPTIMALITY_TOL_US and status in (Status.IMPROVED, Status.HEURISTIC_TIMEOUT):
        # a bound (analytical or the solver's) meets the order: optimal, whoever found it
        status = Status.OPTIMAL if method.startswith("cpsat") else Status.HEURISTIC_OPTIMAL
    stats["total_s"] = time.monotonic() - t0
    return Result(graph, order, status, sim.makespan, sim.exposed, sim.peak_memory, bound, method, baseline,
                  [_h_dict(h) for h in heur], stats, budget, message)


def _infeasible(budget: int | None, heur: list[HeuristicResult]) -> InfeasibleBudgetError:
    low = min(heur, key=lambda h: h.peak_memory)
    return InfeasibleBudgetError(
        f"memory budget of {budget} B is unreachable: no valid order found; the lowest peak any heuristic "
        f"reached is {low.peak_memory} B ({low.name})")


__all__ = ["GapBelow", "Progress", "Result", "Status", "StoppingRule", "optimize", "RESOLUTION_US"]
