"""`optimize(...)`: the heuristic portfolio, then CP-SAT warm-started by the best of it.

Whatever happens, the order returned has passed the validator and is no worse
than any order of the portfolio; `Result.status` and `Result.gap` are derived
from one comparison of that order with a proven bound (docs/solver.md,
Soundness).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from ortools.sat.python import cp_model

from overlapsat.bounds import lower_bound
from overlapsat.budget import BudgetLike
from overlapsat.errors import GraphError, InfeasibleBudgetError, NoValidOrderError
from overlapsat.evaluate import Evaluated, evaluate, evaluate_named, rank_key
from overlapsat.fmt import fmt_bytes
from overlapsat.graph import Graph
from overlapsat.heuristics.portfolio import pipelines, run_all
from overlapsat.io import as_graph
from overlapsat.plan import Bucket, Plan
from overlapsat.problem import Problem
from overlapsat.solver.exhaustive import MAX_ORDERS, ORDERS_PER_SECOND, exhaustive
from overlapsat.solver.model import RELAX, RESTRICT, build
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.units import EXACT_UNITS, SEARCH_UNITS, choose_scale, safe_horizon, unit_walk
from overlapsat.validate import validate

EXHAUSTIVE_NODES = 8  # every order is judged up to this size (at most 40,320 orders; usually far fewer)
EXHAUSTIVE_NODES_NO_ORDER = 14  # and up to this size when no heuristic order is valid (capped listing)
log = logging.getLogger(__name__)

# timed mode: no pipeline of the input order's portfolio starts past 40 % of the time limit, none of the canonical
# form's past 70 % (the search starts from the latter's orders)
HEURISTICS_CLOCK_SHARE = (0.4, 0.7)
CHEAP_PASSES = ("sink_waits", "raise_comms", "reorder_compute_for_overlap",
                "sink_waits+raise_comms+reorder_compute_for_overlap", "reorder_for_peak_memory",
                "topological_sort_lpmf", "topological_sort_bfs", "topological_sort_dfs")
REL_TOL = 1e-9  # float noise of the simulator's sums; the only slack in an optimality claim


class Status(str, Enum):
    OPTIMAL = "optimal"  # the solver's order meets a proven bound
    IMPROVED = "improved"  # better than every heuristic, not proven optimal
    HEURISTIC_TIMEOUT = "heuristic_timeout"  # the solver found nothing better: a heuristic order, not proven
    HEURISTIC_OPTIMAL = "heuristic_optimal"  # a heuristic order meets a proven bound
    HEURISTIC_SOLVER_ERROR = "heuristic_solver_error"  # the solver failed; the best heuristic order
    INTERRUPTED = "interrupted"  # Ctrl-C: the best valid order found so far, not proven


def meets(makespan: float, bound: float) -> bool:
    """The one test behind every optimality claim and a zero gap."""
    return makespan - bound <= REL_TOL * max(1.0, abs(makespan))


@dataclass
class Progress:
    elapsed_s: float
    makespan_us: float  # the best valid order's (inf while none is known)
    bound_us: float
    phase: str = "search"  # heuristics | model | lns | polish | done (what `on_phase` reports)


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
    """The best valid plan found (`best`: its order, and its buckets where buckets were searched, simulated and
    validated: the one source of its figures), the proven bound, the status, and how it was found (PyVRP's
    `Result` is the size aimed at). `optimize` returns one over the orders of one graph (`over` "orders");
    `optimize_plan` one over every bucketing and order (`over` "plans": `bound`, `status` and `gap` hold over
    every plan, the budget as its `stats["plan"]["bound_scope"]` says; `stats["plan"]` also keeps how the buckets
    were chosen and the chosen bucketing's own bound and status)."""

    graph: Graph  # the graph as given (for orders, `best` walks the same nodes, ids and names)
    best: Evaluated
    status: Status
    bound: float  # proven lower bound on the makespan of any valid order (over "plans": of any plan)
    method: str
    baseline: dict[str, float]  # the input order
    heuristics: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)
    memory_budget: int | None = None
    message: str = ""
    cut_by_wall_clock: bool = False  # deterministic mode: the clock, not the work limit, ended the search
    stopped_by: str = ""  # what ended the search: proof | work | clock | interrupt | rule
    over: str = "orders"  # what `bound` holds over: "orders" (of `graph`) or "plans" (every bucketing and order)
    rows: dict[str, Evaluated] = field(default_factory=dict)  # plans: the peers' bucketings judged, by name

    @property
    def order(self) -> list[int]:
        return self.best.order

    @property
    def makespan(self) -> float:
        return self.best.makespan

    @property
    def exposed(self) -> float:
        return self.best.exposed

    @property
    def peak_memory(self) -> int:
        return self.best.peak_memory

    @property
    def evaluated(self) -> Evaluated:
        """`best` (the name it had)."""
        return self.best

    @property
    def names(self) -> list[str]:
        """The order by name (of the bucketed graph, for a plan)."""
        return self.best.names()

    @property
    def buckets(self) -> tuple[Bucket, ...]:
        return self.best.buckets

    @property
    def bucketed(self) -> Graph:
        """The graph the order is of: `graph` relaxed, or for a plan the graph its buckets make."""
        return self.best.graph

    @property
    def plan(self) -> Plan:
        """The order by name, the buckets and transports, and the fingerprint of the graph as given."""
        return Plan(tuple(self.names), self.best.buckets, self.graph.fingerprint(), self.best.transports, self.layout)

    @property
    def layout(self) -> str:
        """How the plan's buckets are issued ("copy" or "coalesced", decision 55); "copy" for an order."""
        return self.stats.get("plan", {}).get("layout", "copy")

    @property
    def unbucketed(self) -> float:
        """The best unbucketed order's makespan found (us; inf: none judged). For orders, the makespan."""
        if self.over != "plans":
            return self.makespan
        u = self.stats.get("plan", {}).get("unbucketed_us")
        return math.inf if u is None else u

    @property
    def bought(self) -> float:
        """What bucketing bought: the best unbucketed order's makespan less this one's (us; < 0: it lost)."""
        return self.unbucketed - self.makespan

    def __repr__(self) -> str:  # the order and the heuristics' table run to megabytes on large graphs
        return (f"Result(graph={self.graph.name!r}, status={self.status.value!r}, method={self.method!r}, "
                f"makespan_us={self.makespan:.3f}, exposed_us={self.exposed:.3f}, bound_us={self.bound:.3f}, "
                f"over={self.over!r}, buckets={len(self.buckets)}, gap={self.gap:.4f}, "
                f"peak_memory_bytes={self.peak_memory})")

    # the same figures with their units in the name
    @property
    def makespan_us(self) -> float:
        return self.makespan

    @property
    def exposed_us(self) -> float:
        return self.exposed

    @property
    def bound_us(self) -> float:
        return self.bound

    @property
    def exposed_bound_us(self) -> float:
        return self.exposed_bound

    @property
    def peak_memory_bytes(self) -> int:
        return self.peak_memory

    @property
    def exposed_bound(self) -> float:
        """The bound less the compute of the order's graph: for plans, a bound on this bucketing's orders only
        (another bucketing has other copies)."""
        return max(0.0, self.bound - self.best.graph.compute_total)

    @property
    def proven(self) -> bool:
        return meets(self.makespan, self.bound)

    @property
    def gap(self) -> float:
        """Relative gap, 0 exactly when the status is proven: on exposed communication over orders; on the
        makespan over plans (the copies make the compute differ between bucketings)."""
        if self.proven:
            return 0.0
        if self.over == "plans":
            return min(1.0, (self.makespan - self.bound) / self.makespan) if self.makespan > 0 else 0.0
        if self.exposed <= 0:
            return 0.0
        return min(1.0, max(0.0, (self.exposed - self.exposed_bound) / self.exposed))

    def summary(self) -> dict[str, Any]:
        return {"status": self.status.value, "method": self.method, "makespan_us": self.makespan,
                "exposed_us": self.exposed, "peak_memory": self.peak_memory, "bound_us": self.bound,
                "bound_over": self.over, "exposed_bound_us": self.exposed_bound, "gap": self.gap,
                "buckets": len(self.buckets), "memory_budget": self.memory_budget,
                "baseline": self.baseline, "stats": self.stats, "message": self.message,
                "cut_by_wall_clock": self.cut_by_wall_clock, "stopped_by": self.stopped_by}

    def save(self, path: str, graph: Graph | None = None) -> None:
        """Write the order (with its buckets, transports and layout: a plan, schedule version 2 to 4) for `graph` (default:
        the graph solved; give the graph as read where that was priced anew: the file names its fingerprint)."""
        from overlapsat.schedules import save_schedule

        save_schedule(path, graph or self.graph, self.names, metrics=self.summary(), meta={"heuristics": self.heuristics},
                      buckets=self.buckets, transports=self.best.transports, layout=self.layout)


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
    than any valid one. `clock`: the budget of a caller that runs this as one of its phases; the search then
    ends by its deadline too.

    Raises `InfeasibleBudgetError` only when no order can meet the budget
    (proven), and `NoValidOrderError` when none was found in time.
    """
    given_problem = graph if isinstance(graph, Problem) else None
    if given_problem is not None:  # the problem carries its budget and level
        if memory_budget is not None:
            raise GraphError("a Problem carries its budget: pass memory_budget to Problem.of, not to optimize")
        graph = given_problem.graph
        if params is None:
            options.setdefault("collective_order", given_problem.collective_order)
    graph = as_graph(graph)
    if params is None:
        params = SolveParams.from_kwargs(**options)
    elif options:
        raise GraphError(f"pass solver options either as params or as keywords, not both: {sorted(options)}")
    if given_problem is not None and params.collective_order != given_problem.collective_order:
        raise GraphError(f"collective_order {params.collective_order!r} differs from the Problem's "
                         f"{given_problem.collective_order!r}")
    tb = TimeBudget(params, parent=clock)

    def phase(name: str, makespan: float = math.inf, bound_us: float = 0.0) -> None:
        """Tell `on_phase` (a progress display) what runs now: it is never asked to stop the search."""
        if on_phase is not None:
            on_phase(Progress(tb.elapsed(), makespan, bound_us, name))

    phase("heuristics")
    # a ratio budget is resolved here, once
    problem = given_problem or Problem.of(graph, memory_budget, params.collective_order)
    budget, co = problem.budget, problem.collective_order
    given = graph
    judged = problem.on(problem.relaxed)  # Inductor's chain edges belong to the "chain" level only
    graph = judged.graph
    n = len(graph.nodes)

    # The search runs on the canonical form (canonical.py), so its answer does not depend on the
    # file's node order. The portfolio also runs from the input order (Inductor's order): those
    # orders are what `heuristics` reports, and the result is never worse than any of them.
    cp = problem.canonical
    cg = cp.graph
    to_orig = problem.to_given
    to_canon = [0] * n
    for k, v in enumerate(to_orig):
        to_canon[v] = k
    # the iterative passes are quadratic in their moves: on large graphs only the cheap ones run here
    include = None if n <= params.lns_min_nodes else CHEAP_PASSES
    from_input: list[Evaluated] = []
    canon: list[Evaluated] = []
    # the portfolios also stop on the clock (between two pipelines), each at its share of the time limit; in
    # deterministic mode that cut is flagged (the work limit, not the clock, should end them)
    def deadline(share: float) -> float:
        return time.monotonic() + max(0.0, tb.at(share) - tb.clock())

    try:
        # the graph as given: the passes see Inductor's chain edges as Inductor's do (run_all judges their orders
        # at `co`), so these rows are run_all's rows exactly (compare's too)
        from_input = heuristic_results if heuristic_results is not None else run_all(
            problem, work_limit=params.portfolio_steps, deadline=deadline(HEURISTICS_CLOCK_SHARE[0]))
        canon = [h for h in run_all(cp, include=include, work_limit=params.portfolio_steps,
                                    deadline=deadline(HEURISTICS_CLOCK_SHARE[1]))
                 if h.name != "input_order"]
    except KeyboardInterrupt:  # Ctrl-C during the portfolio: what has been evaluated, and the input order
        tb.interrupted = True
        log.warning("interrupted during the heuristics: returning the best order evaluated so far")
    if not any(h.name == "input_order" for h in from_input):
        from_input = [evaluate(judged, "input_order", list(range(n))), *from_input]
    have = {h.name for h in from_input}  # (compare passes them evaluated already)
    from_input = [*from_input, *evaluate_named(judged, {k: v for k, v in (extra_orders or {}).items() if k not in have})]
    canon.append(evaluate(cp, "topological_order", list(range(n))))
    canon.sort(key=rank_key)
    base = next(h for h in from_input if h.name == "input_order")
    baseline = {"makespan": base.makespan, "exposed": base.exposed, "peak_memory": base.peak_memory}
    stats: dict[str, Any] = {"heuristics_s": tb.elapsed()}
    ran_input, ran_canon = {h.name for h in from_input}, {h.name for h in canon}
    skipped = {"input order": [nm for nm in pipelines() if heuristic_results is None and nm not in ran_input],
               "canonical form": [nm for nm in pipelines() if nm not in ran_canon
                                  and (include is None or nm in include)]}
    skipped = {k: v for k, v in skipped.items() if v}
    if skipped and not tb.interrupted:
        stats["portfolio_cut_by_clock"] = skipped
        if params.deterministic:
            tb.cut_by_wall_clock = True
        log.info("heuristics not started past their share of the time limit: %s",
                 "; ".join(f"{k}: {', '.join(v)}" for k, v in skipped.items()))
    cut = sorted({h.name for h in from_input + canon if h.note})
    if cut:  # the result is never worse than these cut orders, but may be worse than the complete passes
        stats["portfolio_cut_by_work_limit"] = cut
        log.info("heuristics cut short by the work limit (raise time_limit to run them in full): %s", ", ".join(cut))
    lb = lower_bound(cg, co).makespan
    valid = [h for h in canon if h.valid]
    incumbent = valid[0] if valid else None
    if incumbent is None:
        fallback = [h for h in from_input if h.valid]
        if fallback:  # no canonical candidate meets the budget: warm-start from the input order's best
            h = fallback[0]
            incumbent = evaluate(cp, h.name, [to_canon[v] for v in h.order])
            stats["warm_start"] = h.name
            stats["depends_on_input_order"] = True
    proven_by_listing = False
    if n <= EXHAUSTIVE_NODES or (incumbent is None and n <= EXHAUSTIVE_NODES_NO_ORDER):
        # a small graph: every order judged by the arbiters (exhaustive.py); a search may miss its answer
        ex = exhaustive(cp, max_orders=exhaustive_orders(params), deadline=tb.deadline, clock=tb.clock)
        if ex.cut_by_clock and params.deterministic:
            tb.cut_by_wall_clock = True
        stats["exhaustive"] = {"orders": ex.judged, "complete": ex.complete}
        if ex.complete and ex.order is None and budget is not None and exhaustive(
                Problem(cg, None, co), max_orders=exhaustive_orders(params), deadline=tb.deadline,
                clock=tb.clock).order is not None:
            # the budget, not the collective-order policy, is what no order meets (a policy no order satisfies
            # is reported below as such)
            raise _budget_error(InfeasibleBudgetError, budget, canon + from_input, proven=True)
        if ex.order is not None and (incumbent is None or ex.makespan < incumbent.makespan - 1e-9):
            incumbent = evaluate(cp, "exhaustive", ex.order)
        proven_by_listing = ex.complete and ex.order is not None

    best: Evaluated | None = incumbent
    method = incumbent.name if incumbent else ""
    bound = max(lb, incumbent.makespan) if proven_by_listing and incumbent is not None else lb
    message = ""
    solver_error = False
    if incumbent is not None and meets(incumbent.makespan, lb):
        message = "the best heuristic meets the analytical lower bound"
    elif n:  # the time scales (a linear pass) are chosen only when a search runs
        # windows (and memory proofs) slow down with the horizon's size: LNS always runs at the search scale; the
        # monolithic model without a budget gets exact time, so that its optimum converts into a proof
        ts = choose_scale(cg, SEARCH_UNITS if budget is not None else EXACT_UNITS)
        ts_lns = choose_scale(cg, SEARCH_UNITS)
        stats["resolution_us"] = ts.resolution_us
        stats["exact_durations"] = ts.exact
        # Up to lns_min_nodes: window LNS first (it improves faster than the monolithic model at the same work,
        # docs/solver.md), then the monolithic model, hinted with the result, for the proof; without a valid
        # incumbent the monolithic model goes first (it finds an order or proves there is none).
        # Larger graphs: window LNS only. Graphs under lns_min_window_nodes: the monolithic model only.
        small = n <= params.lns_min_nodes
        use_lns = n >= params.lns_min_window_nodes
        best_ms = [best.makespan if best is not None else math.inf]

        def improved(o: list[int], ms: float) -> bool:
            if ms >= best_ms[0] - 1e-9:  # a restart's own progress is reported once it leads
                return False
            best_ms[0] = ms
            p = Progress(tb.elapsed(), ms, bound)
            if on_progress is not None:
                on_progress(p)
            stats.setdefault("time_to_first_s", tb.elapsed())
            stats["time_to_best_s"] = tb.elapsed()
            stop = bool(stop_when is not None and stop_when(p))
            if stop:
                stats["stopped_by_rule"] = True
            return stop

        def searching() -> bool:
            return not (stats.get("stopped_by_rule") or tb.interrupted  # set by improved(), whichever search asked
                        or tb.exhausted(params.deterministic) or (best is not None and meets(best.makespan, bound)))

        def run_whole(work: float) -> None:
            nonlocal best, method, bound, solver_error, message
            phase("model", best.makespan if best is not None else math.inf, bound)
            out = _solve_whole(cp, ts, params, tb, best, on_progress, stop_when, stats, work=work)
            if out.error:
                solver_error, message = True, out.error
            if out.infeasible:
                if best is not None:  # the model is exact: a valid order contradicts this
                    solver_error, message = True, "CP-SAT proved infeasible a model a valid heuristic order satisfies"
                    log.error(message)
                else:
                    raise _budget_error(InfeasibleBudgetError, budget, canon, proven=True)
            if out.bound_us is not None:
                bound = max(bound, out.bound_us)
            if out.order is not None:
                cand = evaluate(cp, "cpsat", out.order)
                if not cand.valid:
                    solver_error, message = True, f"solver order rejected by the validator: {cand.violations[0]}"
                    log.error(message)
                elif best is None or cand.makespan < best.makespan - 1e-9:
                    best, method = cand, "cpsat"
            elif not out.infeasible and not out.error:
                message = "no solution within the time limit"

        def run_lns(work: float) -> None:
            nonlocal best, method
            from overlapsat.solver.lns import lns

            # restarts: when the search from the best order converges with work left, the next distinct
            # heuristic orders get the rest (they may lie in another basin)
            assert best is not None
            phase("lns", best.makespan, bound)
            starts = [best.order] + [h.order for h in valid if h.order != best.order][:params.lns_restarts]
            spent0 = tb.work_used
            for k, start in enumerate(starts):
                left = work - (tb.work_used - spent0)
                if k and (not searching() or left <= 0):
                    break
                order, lstats = lns(cp, ts_lns, start, params, tb, target=bound, on_improve=improved,
                                    work_cap=left)
                total = stats.setdefault("lns", {})
                for key, val in lstats.items():
                    total[key] = total.get(key, 0) + val
                total["restarts"] = k
                cand = evaluate(cp, "cpsat-lns", order)
                if cand.valid and cand.makespan < best.makespan - 1e-9:
                    best, method = cand, "cpsat-lns"

        try:
            if best is None:
                if small and not tb.interrupted:
                    run_whole((params.monolithic_share if use_lns else 1.0) * tb.work_left())
                if best is not None and use_lns and searching():
                    run_lns(tb.work_left())
            else:  # searching() is False once interrupted
                if use_lns and searching():
                    if small and not params.deterministic:  # timed: the monolithic model keeps its share of time
                        tb.until(1.0 - params.monolithic_share)
                    run_lns((1.0 - params.monolithic_share) * tb.work_left() if small else tb.work_left())
                    tb.until(None)
                if small and searching():
                    run_whole(tb.work_left())
        except KeyboardInterrupt:  # between two searches: `best` is always an evaluated, valid order
            tb.interrupted = True
        if best is not None and not method.startswith("cpsat"):
            message = message or "the search found no improvement on the best heuristic"
    if best is None:
        raise _budget_error(NoValidOrderError, budget, canon + from_input, proven=False)

    order = [to_orig[v] for v in best.order]
    final = evaluate(judged, method, order)
    # the input order's portfolio and the caller's orders: never return worse than any of them
    for e in from_input:
        if e.valid and e.makespan < final.makespan - 1e-9:
            final, method = e, e.name
            stats["depends_on_input_order"] = True
            log.info("returning %s: better than every order found on the canonical form", e.name)
    if not final.valid:  # every candidate above was validated; should one still fail, the best valid order stands
        log.error("internal error: the search's order is invalid on the given graph (%s); returning the best valid "
                  "heuristic order instead", final.violations[0])
        fallback = sorted((e for e in from_input if e.valid), key=rank_key)
        if not fallback:
            raise _budget_error(NoValidOrderError, budget, canon + from_input, proven=False)
        final, method, solver_error = fallback[0], fallback[0].name, True
        message = f"internal error: the search's order was invalid ({final.name} returned instead)"
    if bound > final.makespan and not meets(final.makespan, bound):
        log.error("internal error: bound %.6f above the makespan %.6f of a valid order; bound dropped", bound,
                  final.makespan)
        bound = graph.compute_total
        message = message or "internal error: inconsistent bound dropped"
    if params.interference is not None and not tb.interrupted:
        phase("polish", final.makespan, bound)
        final, stats["contention_polish"] = tie_break(judged, final, params)
    status = _status(final.makespan, bound, method, solver_error)
    if tb.interrupted:
        stats["interrupted"] = True
        message = "interrupted: the best valid order found so far" + (f" ({message})" if message else "")
        if status not in (Status.OPTIMAL, Status.HEURISTIC_OPTIMAL):  # a proof stands, interrupted or not
            status = Status.INTERRUPTED
    stats["total_s"] = tb.elapsed()
    stats["work_used"] = tb.work_used
    if params.deterministic and tb.clock_over() and not tb.interrupted:
        tb.cut_by_wall_clock = True  # it ran to the deadline: some phase may have been cut there (decision 57)
    if tb.cut_by_wall_clock:
        log.warning("deterministic search ended by the wall clock before its work limit (%.2f of %.2f): the order "
                    "may differ across machines; raise time_limit or lower work_limit", tb.work_used, tb.work_total)
    heur_orig = [h.as_dict() for h in from_input]
    phase("done", final.makespan, bound)
    stopped = ("proof" if meets(final.makespan, bound) else "interrupt" if tb.interrupted
               else "rule" if stats.get("stopped_by_rule") else "clock" if tb.cut_by_wall_clock or tb.clock_over()
               else "work")
    return Result(given, final, status, bound, method, baseline, heur_orig, stats, budget, message,
                  tb.cut_by_wall_clock, stopped)


def exhaustive_orders(params: SolveParams) -> int:
    """Orders the listing may judge: a function of the options, so that a deterministic answer is too."""
    return max(1000, min(MAX_ORDERS, int(ORDERS_PER_SECOND * params.time_limit)))


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


def _interruptible_solve(solver: cp_model.CpSolver, m: cp_model.CpModel, cb: Any, *, stoppable: bool,
                         tb: TimeBudget) -> Any:
    """`solver.solve` on a helper thread, so that Ctrl-C reaches the main thread while CP-SAT runs.

    On Ctrl-C the search is stopped when that is safe; OR-Tools 9.15 aborts the
    process on stop_search() under interleave_search, so there the current call
    runs to its work limit. Either way its solutions are kept.
    """
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["status"] = solver.solve(m, cb)
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, name="overlapsat-cpsat", daemon=True)
    t.start()
    while t.is_alive():
        try:
            t.join(0.1)
        except KeyboardInterrupt:
            if not tb.interrupted:
                tb.interrupted = True
                if stoppable:
                    solver.stop_search()
                else:
                    log.warning("interrupted: the running CP-SAT call ends at its work limit (stopping it under "
                                "interleaved search would abort the process); press Ctrl-C again to quit at once")
            else:
                raise
    if "error" in box:
        raise box["error"]
    return box["status"]


@dataclass
class _Outcome:
    order: list[int] | None = None
    bound_us: float | None = None
    infeasible: bool = False
    error: str = ""


def _solve_whole(problem: Problem, ts: Any, params: SolveParams, tb: TimeBudget, incumbent: Evaluated | None,
                 on_progress: Callable[[Progress], None] | None, stop_when: StoppingRule | None,
                 stats: dict[str, Any], work: float) -> _Outcome:
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
        return _solve_model(g, md, ts, params, tb, incumbent, on_progress, stop_when, stats, work)
    # Bytes counted in units of md.memory_quantum (memory_quantum): the relaxation proves (infeasibility, the
    # bound) but its order may exceed the budget; then a restriction, whose orders are within it, searches on.
    stats["memory_quantum_bytes"] = md.memory_quantum
    relaxed = _solve_model(g, md, ts, params, tb, incumbent, on_progress, stop_when, stats, work / 2)
    if relaxed.infeasible or relaxed.error or (relaxed.order is not None and not validate(
            problem, relaxed.order, limit=1)):
        return relaxed
    md = build(problem, ts, ref, horizon=horizon, walk=walk, memory_rounding=RESTRICT)
    restricted = _solve_model(g, md, ts, params, tb, incumbent, on_progress, stop_when, stats, max(0.01, work / 2))
    # its infeasibility and its bound prove nothing (sizes rounded up): only its order is kept
    return _Outcome(restricted.order, relaxed.bound_us, error=restricted.error)


def _solve_model(g: Graph, md: Any, ts: Any, params: SolveParams, tb: TimeBudget, incumbent: Evaluated | None,
                 on_progress: Callable[[Progress], None] | None, stop_when: StoppingRule | None,
                 stats: dict[str, Any], work: float) -> _Outcome:
    """Solve one built model with `work` units of work: its order, bound, infeasibility or error."""
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.max_time_in_seconds = max(0.01, tb.wall_left())
    p.catch_sigint_signal = False  # Ctrl-C must reach Python, which returns the best order so far
    workers = params.n_workers
    if params.deterministic:
        p.max_deterministic_time = max(0.01, work)
        # OR-Tools 9.15 aborts the process under interleaved search on models with a memory cumulative:
        # CHECK fixed_search (an infeasible budgeted model) and CHECK threshold > 0 (a feasible one, hinted;
        # tests/solver/test_or_tools_aborts.py reproduces both in a child process). Interleave (deterministic
        # with several workers) only where there is no cumulative, and where a validated complete hint proves
        # the model feasible.
        if workers > 1 and incumbent is not None and not md.has_memory:
            p.num_workers = workers
            p.interleave_search = True
            # interleaved workers each count their deterministic time, and the solver reports their sum: the
            # limit is shared so that the work spent stays within `work`
            p.max_deterministic_time = max(0.01, work / workers)
        else:
            p.num_workers = 1
    else:
        p.num_workers = workers
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
        # OR-Tools 9.15 aborts (postsolve CHECK) on stop_search() under interleave_search
        log.warning("a custom stopping rule cannot interrupt the deterministic CP-SAT search; it is applied "
                    "between LNS windows only (use GapBelow, or deterministic=False)")
        rule = None
    cb = _Progress(ts.bound_us, lambda u: u / (ts.k * ts.steps_per_us), tb, on_progress, rule)
    try:
        st = _interruptible_solve(solver, md.m, cb, stoppable=not p.interleave_search, tb=tb)
    except Exception as e:  # noqa: BLE001 - the solver's failure must not become the caller's
        log.exception("CP-SAT failed")
        return _Outcome(error=f"{type(e).__name__}: {e}")
    tb.spend(solver.deterministic_time)
    if params.deterministic and st not in (cp_model.OPTIMAL, cp_model.INFEASIBLE) and not cb.stopped \
            and solver.wall_time >= 0.99 * p.max_time_in_seconds and not tb.interrupted:
        tb.cut_by_wall_clock = True  # the clock, not the work limit, ended it (the work spent is not comparable)
    stats.update(solutions=cb.count, time_to_first_s=cb.first, time_to_best_s=cb.best_t,
                 solver_status=solver.status_name(st), wall_s=solver.wall_time, stopped_by_rule=cb.stopped,
                 model_units_per_us=ts.k * ts.steps_per_us)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        bound_units = solver.best_objective_bound if st == cp_model.FEASIBLE else solver.objective_value
        return _Outcome(md.order_from(solver), ts.bound_us(int(math.floor(bound_units + 1e-6))))
    if st == cp_model.INFEASIBLE:
        return _Outcome(infeasible=True)
    if st == cp_model.MODEL_INVALID:
        return _Outcome(error=f"overlapsat built an invalid CP-SAT model: {md.m.validate()}")
    return _Outcome()


def _budget_error(cls: type[GraphError], budget: int | None, heur: list[Evaluated], proven: bool) -> GraphError:
    """The lowest peak reached by an order that is valid apart from memory, in human units."""
    others = [h for h in heur if all(v.startswith("[memory]") for v in h.violations)]
    low = min(others or heur, key=lambda h: (h.peak_memory, h.name))
    b = fmt_bytes(budget or 0)
    if proven:
        msg = (f"memory budget of {b} ({budget} B) is unreachable: no order of this graph peaks that low (proven); "
               f"the lowest peak found is {fmt_bytes(low.peak_memory)} ({low.name})")
    else:
        msg = (f"no order within the memory budget of {b} ({budget} B) was found within the time limit; this is not "
               f"a proof that none exists. The lowest peak reached by an order valid in every other respect is "
               f"{fmt_bytes(low.peak_memory)} ({low.name}); raise time_limit or the budget")
    err = cls(msg)
    err.budget, err.lowest_peak = budget, low.peak_memory  # type: ignore[attr-defined]
    return err


__all__ = ["GapBelow", "Progress", "Result", "SolveParams", "Status", "StoppingRule", "optimize"]
