"""A small space of bucketings (at most `plan_search.EXHAUSTIVE_BUCKETINGS` legal ones) ordered whole, in two
rounds (decision 107): every bucketing once, then the few shortest not yet proven again. Its bound holds at the
problem's level and budget: the least of the bucketings' own bounds, beside the relaxation's."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

from overlapsat.bounds import lower_bound
from overlapsat.errors import GraphError, InfeasibleBudgetError, NoValidOrderError
from overlapsat.graph import Graph
from overlapsat.plan import Bucket, Pricing, materialize
from overlapsat.problem import Problem
from overlapsat.solver.optimize import Result, meets, optimize
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.plan_bound import BOUND_SHARE, LIFT_NODES, bound_over_bucketings
from overlapsat.solver.plan_result import (
    INPUT_PORTFOLIO,
    as_plan,
    bound_cut_note,
    finite_or_none,
    no_plan_error,
    none_within,
    said_to_depend_on_input_order,
)

log = logging.getLogger(__name__)

FIRST_ROUND = 0.3  # of an exhaustive search's time: every bucketing ordered once, an equal part each (decision 107)
SECOND_ROUND = (0.6, 0.25, 0.15)  # the parts of the rest for the unproven bucketings with the shortest orders


def order_every_bucketing(problem: Problem, price: Pricing, params: SolveParams, space: list[tuple[Bucket, ...]],
                          tb: TimeBudget, as_given: dict[str, list[str]]) -> Result:
    """Order every legal bucketing with `optimize`, in two rounds (decision 107): each gets an equal part of
    `FIRST_ROUND` of the time limit; the rest goes to the few whose first order is shortest among those not proven
    optimal and whose bound leaves them a chance, each from its first order. The best plan, and a bound at the
    problem's level and budget, the least of the bucketings' own bounds (a bucketing proven to have no order within
    the budget has none), beside the relaxation's."""
    g = problem.relaxed
    bound_time = BOUND_SHARE * params.time_limit if len(g.nodes) <= LIFT_NODES else 0.0
    avail = params.time_limit - bound_time
    first = _share(params, FIRST_ROUND * avail / len(space), FIRST_ROUND / len(space))
    done: dict[tuple[Bucket, ...], tuple[Graph, Result]] = {}
    bound_of: dict[tuple[Bucket, ...], float] = {}
    errors: list[GraphError] = []
    each = tb.counting_cuts()  # dozens of short searches: what the clock cut is said once, below
    runs = cut = 0
    for bs in space:
        try:
            h = materialize(g, list(bs), price)
        except GraphError:  # no valid place for these buckets (an atomic group between): not a plan
            continue
        runs += 1
        try:
            res = optimize(problem.on(h), first, clock=each, extra_orders=None if bs else as_given)
        except InfeasibleBudgetError as e:  # proven: no order of this bucketing is within the budget
            errors.append(e)
            continue
        except NoValidOrderError as e:  # not proven either way: the analytical bound of its schedules
            errors.append(e)
            bound_of[bs] = lower_bound(problem.on(h)).makespan
            continue
        done[bs], bound_of[bs] = (h, res), res.bound
        cut += res.cut_by_wall_clock
    rest = (1.0 - FIRST_ROUND) * avail
    for bs, part in _second_round(done):
        h, res = done[bs]
        again = {"the first round's order": res.names, **({} if bs else as_given)}
        runs += 1
        try:
            more = optimize(problem.on(h), _share(params, part * rest, part * (1.0 - FIRST_ROUND)), clock=each,
                            extra_orders=again)
        except GraphError:  # the first round's order stands (it is valid: the same problem)
            continue
        cut += more.cut_by_wall_clock
        bound_of[bs] = max(res.bound, more.bound)
        if more.makespan < res.makespan:
            done[bs] = (h, more)
    if cut:
        log.warning("deterministic plan search ended by the wall clock in %d of its %d orderings of %d bucketings: "
                    "the plan may differ across machines; raise time_limit or lower work_limit", cut, runs, len(space))
    bounds = list(bound_of.values())
    best = min(((bs, h, res) for bs, (h, res) in done.items()), key=lambda t: (t[2].makespan, len(t[0])),
               default=None)
    unb = done[()][1].makespan if () in done else math.inf
    if best is None:
        # proven only where every bucketing that makes a graph was proven to have no order within the budget
        raise no_plan_error(problem, errors, proven=all(isinstance(e, InfeasibleBudgetError) for e in errors)
                            or none_within(problem, price, params, tb))
    bs, h, res = best
    bclock = tb.apart()  # the bound does not change the plan: a cut is said of the bound (decision 98)
    over = bound_over_bucketings(
        problem, price, replace(params, time_limit=max(0.01, bound_time)) if bound_time else None, clock=bclock)
    notes = [*over.notes, bound_cut_note(tb)] if params.deterministic and bclock.cut_by_wall_clock else over.notes
    out = as_plan(problem, res, bs, max(over.bound, min(bounds)), notes,
                  {"starts": {}, "moves": {"tried": len(space), "accepted": 0}, "bucketings_scored": 0,
                   "bucketings_judged": 0, "bucketings_unreachable": 0, "every_bucketing": len(space),
                   "plan_search_s": tb.elapsed(),
                   "unbucketed_us": finite_or_none(unb), "relaxation_reach_us": over.reach_us})
    if not bs and res.method.startswith(INPUT_PORTFOLIO):  # the passes from the order as given won (decision 85)
        out = said_to_depend_on_input_order(out, unbucketed_from=res.method)
    return out


def _share(params: SolveParams, seconds: float, of_work: float) -> SolveParams:
    """`params` with `seconds` of time limit, and that part (`of_work`) of its work limit where it has one."""
    return replace(params, time_limit=max(0.01, seconds),
                   work_limit=None if params.work_limit is None else params.work_limit * of_work)


def _second_round(done: dict[tuple[Bucket, ...], tuple[Graph, Result]]) -> list[tuple[tuple[Bucket, ...], float]]:
    """The bucketings a second round orders again, each with its part of the time left: those whose first order
    is not proven optimal and whose bound is below the best order found, shortest first (fewer buckets on a
    tie), at most as many as `SECOND_ROUND` has parts, the parts scaled to sum to 1."""
    if not done:
        return []
    best = min(res.makespan for _, res in done.values())
    open_ = sorted((bs for bs, (_, res) in done.items()
                    if not meets(res.makespan, res.bound) and not meets(best, res.bound)),
                   key=lambda bs: (done[bs][1].makespan, len(bs)))[:len(SECOND_ROUND)]
    total = sum(SECOND_ROUND[:len(open_)])
    return [(bs, part / total) for bs, part in zip(open_, SECOND_ROUND)]


__all__ = ["FIRST_ROUND", "SECOND_ROUND", "order_every_bucketing"]
