"""`optimize(...)`: the heuristic portfolio, then CP-SAT warm-started by the best of it, as phases of one `Search`.

Whatever happens, the order returned has passed the validator and is no worse
than any order of the portfolio that ran; `Result.status` and `Result.gap` are
derived from one comparison of that order with a proven bound (docs/solver.md,
Soundness).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from overlapsat.budget import BudgetLike
from overlapsat.errors import GraphError, NoValidOrderError
from overlapsat.evaluate import Evaluated, evaluate, rank_key
from overlapsat.gc_pause import paused_gc
from overlapsat.graph import Graph
from overlapsat.io import as_graph
from overlapsat.problem import Problem
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.result import GapBelow, Progress, Result, Statistics, Status, StoppingRule, meets
from overlapsat.solver.search import (
    Fill,
    Listing,
    Portfolio,
    Search,
    WitnessSearch,
    budget_error,
    check_floor,
    order_search,
)

log = logging.getLogger(__name__)


@paused_gc()  # a search's tables are millions of small objects, and it leaves no reference cycles (gc_pause.py)
def optimize(graph: Problem | Graph | str, params: SolveParams | None = None, *, memory_budget: BudgetLike = None,
             on_progress: Callable[[Progress], None] | None = None, stop_when: StoppingRule | None = None,
             on_phase: Callable[[Progress], None] | None = None,
             heuristic_results: list[Evaluated] | None = None, extra_orders: dict[str, Any] | None = None,
             clock: TimeBudget | None = None, **options: Any) -> Result:
    """Least exposed communication order of a `Problem`, or of `graph` (a `Graph` or a graph file's path).

    Options come as a `SolveParams` or as its fields by keyword
    (`optimize(g, time_limit=5)`). `heuristic_results` is the portfolio run
    from the input order when the caller already has it (`heuristics.run_all`
    with the same budget and collective order, as `compare` does); the result
    is never worse than any valid order in it. `extra_orders` (name -> order)
    are orders from elsewhere, e.g. torch's FX OverlapScheduler: each is
    validated and reported with the heuristics, and the result is never worse
    than any valid one. `clock`: the budget of a caller that runs this as one
    of its phases; the search then ends by its deadline too.

    Raises `InfeasibleBudgetError` only when no order can meet the budget
    (proven), and `NoValidOrderError` when none was found in time.
    """
    started = TimeBudget.entry(clock)  # the limit counts from here: the checks and the memory floor too
    problem, params = _inputs(graph, params, memory_budget, options)
    params.say_one_worker(clock)
    check_floor(problem)  # a budget below what some step holds in every order: proven before any search
    s = Search.of(problem, params, clock, started=started, on_progress=on_progress, stop_when=stop_when,
                  on_phase=on_phase)
    s.run(Portfolio(heuristic_results, extra_orders))
    if WitnessSearch.applies(s):
        s.run(WitnessSearch())
    if Listing.applies(s):
        s.run(Listing())
    if s.best is not None and meets(s.best.makespan, s.bound):
        s.message = "the best heuristic meets the analytical lower bound"
    elif s.cp.graph.nodes and not s.tb.cut():  # (a deterministic run the clock ended is flagged)
        if Fill.applies(s):
            s.run(Fill())
        order_search(s)
        if s.best is not None and not s.method.startswith("cpsat"):
            s.message = s.message or "the search found no improvement on the best heuristic"
    elif s.best is not None and s.cp.graph.nodes:  # the clock ended it first: the status alone would not say why
        s.message = s.message or "the time limit ended the search before its order search: the best heuristic's order"
    if s.best is None:
        if s.tb.interrupted:  # Ctrl-C before any order was known: nothing to keep, the caller's handler decides
            raise KeyboardInterrupt
        raise budget_error(NoValidOrderError, problem.budget, s.canon + s.from_input, proven=False)
    final = _restored(s)
    if params.interference is not None and not s.tb.interrupted:
        s.announce("polish")
        final, s.stats["contention_polish"] = tie_break(s.judged, final, params)
    return _result(s, final)


def _inputs(graph: Problem | Graph | str, params: SolveParams | None, memory_budget: BudgetLike,
            options: dict[str, Any]) -> tuple[Problem, SolveParams]:
    """The problem (a ratio budget resolved once) and the options, checked: a GraphError names a bad one."""
    given = graph if isinstance(graph, Problem) else None
    if given is not None:  # the problem carries its budget and level
        if memory_budget is not None:
            raise GraphError("a Problem carries its budget: pass memory_budget to Problem.of, not to optimize")
        if params is None:
            options.setdefault("collective_order", given.collective_order)
    if params is None:
        params = SolveParams.from_kwargs(**options)
    elif options:
        raise GraphError(f"pass solver options either as params or as keywords, not both: {sorted(options)}")
    if given is not None and params.collective_order != given.collective_order:
        raise GraphError(f"collective_order {params.collective_order!r} differs from the Problem's "
                         f"{given.collective_order!r}")
    return given or Problem.of(as_graph(graph), memory_budget, params.collective_order), params


def _restored(s: Search) -> Evaluated:
    """The best order on the graph as given, never worse than a valid order of the input order's portfolio, and
    valid (else the best valid heuristic order, flagged as a solver error); the bound never above it."""
    judged, to_orig = s.judged, s.problem.to_given
    assert s.best is not None
    final = evaluate(judged, s.method, [to_orig[v] for v in s.best.order])
    for e in s.from_input:
        if e.valid and e.makespan < final.makespan - 1e-9:
            final, s.method = e, e.name
            s.stats["depends_on_input_order"] = True
            log.info("returning %s: better than every order found on the canonical form", e.name)
    if not final.valid:  # every candidate above was validated; should one still fail, the best valid order stands
        log.error("internal error: the search's order is invalid on the given graph (%s); returning the best valid "
                  "heuristic order instead", final.violations[0])
        fallback = sorted((e for e in s.from_input if e.valid), key=rank_key)
        if not fallback:
            raise budget_error(NoValidOrderError, s.problem.budget, s.canon + s.from_input, proven=False)
        final, s.method, s.solver_error = fallback[0], fallback[0].name, True
        s.message = f"internal error: the search's order was invalid ({final.name} returned instead)"
    if s.bound > final.makespan and not meets(final.makespan, s.bound):
        log.error("internal error: bound %.6f above the makespan %.6f of a valid order; bound dropped", s.bound,
                  final.makespan)
        s.bound = judged.graph.compute_total
        s.message = s.message or "internal error: inconsistent bound dropped"
    return final


def _result(s: Search, final: Evaluated) -> Result:
    """The `Result` of a finished search: status, what stopped it, and its statistics."""
    tb, stats = s.tb, s.stats
    status = _status(final.makespan, s.bound, s.method, s.solver_error)
    if tb.interrupted:
        stats["interrupted"] = True
        s.message = "interrupted: the best valid order found so far" + (f" ({s.message})" if s.message else "")
        if status not in (Status.OPTIMAL, Status.HEURISTIC_OPTIMAL):  # a proof stands, interrupted or not
            status = Status.INTERRUPTED
    stats["total_s"], stats["work_used"] = tb.elapsed(), tb.work_used
    if s.params.deterministic and tb.clock_over() and not tb.interrupted:
        tb.cut_by_wall_clock = True  # it ran to the deadline: some phase may have been cut there (decision 57)
    if tb.cut_by_wall_clock:
        # the work spent can pass the limit (CP-SAT overshoots its deterministic limit a little, and the work prices
        # it, decision 83) while the clock still cut a phase: the message says both, never "before" when it was not
        where = "before its work limit" if tb.work_used < tb.work_total else "as its work limit ran out"
        # a search kept apart (the bound after a plan, decision 98), or one of many its caller counts (a plan's every
        # bucketing): the caller says what the clock cut
        log.log(logging.INFO if tb.cut_said_by_caller else logging.WARNING, "deterministic search ended by the wall clock "
                "%s (%.2f of %.2f): the order may differ across machines; raise time_limit or lower work_limit",
                where, tb.work_used, tb.work_total)
    s.announce("done")
    stopped = ("proof" if meets(final.makespan, s.bound) else "interrupt" if tb.interrupted
               else "rule" if s.stopped_by_rule else "clock" if tb.cut_by_wall_clock or tb.clock_over() else "work")
    base = next(h for h in s.from_input if h.name == "input_order")
    return Result(s.problem.graph, final, status, s.bound, stopped,
                  Statistics(s.method, _baseline(base), [h.as_dict() for h in s.from_input], s.problem.budget, s.message,
                             tb.cut_by_wall_clock, phases=stats))


def order_result(problem: Problem, name: str, order: list[int], message: str) -> Result:
    """A valid order of `problem`'s graph as a `Result`, with no search run: what a caller returns where it has too
    little work left to order that graph again (the plan's polish, decision 121). Its bound is the graph's compute,
    which every order spends; its status says no search proved or improved it."""
    best = evaluate(problem, name, order)
    if not best.valid:
        raise GraphError(f"internal error: {name} is not a valid order ({best.violations[0]})")
    base = evaluate(problem, "input_order", list(range(len(problem.graph.nodes))))
    bound = problem.graph.compute_total
    return Result(problem.graph, best, _status(best.makespan, bound, name, False), bound,
                  "proof" if meets(best.makespan, bound) else "work",
                  Statistics(name, _baseline(base), [], problem.budget, message))


def _baseline(base: Evaluated) -> dict[str, float]:
    """The input order's figures, as `Statistics.baseline` holds them."""
    return {"makespan": base.makespan, "exposed": base.exposed, "peak_memory": base.peak_memory}


def tie_break(problem: Problem, final: Evaluated, params: SolveParams) -> tuple[Evaluated, dict]:
    """Break the plain model's ties by the contended makespan at `params.interference` (cost/polish.py), and
    what it did. The order that comes back is valid, no longer in the plain model and no higher in memory,
    so the status and bound of `final` still hold. `problem`'s graph is the one `final` was judged on (relaxed)."""
    from overlapsat.cost.polish import polish_contended

    graph, budget = problem.graph, problem.budget
    p = polish_contended(graph, final.order, params.interference, memory_budget=budget,
                         collective_order=problem.collective_order, max_evaluations=params.polish_moves(len(graph.nodes)))
    done = {"contended_before_us": p.contended_before, "contended_after_us": p.contended_after, "moves": p.moves,
            "evaluated": p.evaluated}
    if not p.moves:
        return final, done
    out = evaluate(problem, final.name, p.order)
    if not out.valid or out.makespan > final.makespan or out.peak_memory > final.peak_memory:
        raise RuntimeError("internal error: the contention polish broke its promise")  # polish checks each move
    log.info("contention polish: %d moves, contended makespan %.1f -> %.1f us", p.moves, p.contended_before,
             p.contended_after)
    return out, done


def _status(makespan: float, bound: float, method: str, solver_error: bool) -> Status:
    by_solver = method.startswith(("cpsat", "exhaustive"))
    if meets(makespan, bound):
        return Status.OPTIMAL if by_solver else Status.HEURISTIC_OPTIMAL
    if by_solver:
        return Status.IMPROVED
    return Status.HEURISTIC_SOLVER_ERROR if solver_error else Status.HEURISTIC_TIMEOUT


__all__ = ["GapBelow", "Progress", "Result", "SolveParams", "Status", "StoppingRule", "optimize", "order_result"]
