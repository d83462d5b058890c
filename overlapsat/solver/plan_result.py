"""What a plan search returns: `optimize`'s result on the chosen bucketing as a result over every plan, and the
steps that may keep another plan in its place (the caller's ordered bucketings or unbucketed order), list it as the
graph as given lists it, or say why there is none. Shared by the search (`plan_search`) and the ordering of every
bucketing of a small space (`every_bucketing`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from overlapsat.errors import GraphError, InfeasibleBudgetError, NoValidOrderError
from overlapsat.evaluate import Evaluated, evaluate
from overlapsat.fmt import fmt_bytes
from overlapsat.graph import Graph
from overlapsat.plan import Bucket, Pricing, bucketable_by_key, laid_out, materialize
from overlapsat.problem import Problem
from overlapsat.solver.optimize import Result, Status, meets
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.plan_bound import (
    KEPT_APART,
    KERNELS_ONLY,
    LIFT_NODES,
    LIFTED_UNDER_BUDGET,
    NO_PLAN_WITHIN_BUDGET,
    OVERLAP_SHUT_BY_BUDGET,
    bound_over_bucketings,
)
from overlapsat.solver.result import PlanInfo

log = logging.getLogger(__name__)


def plan_status(s: Status, proven: bool) -> Status:
    """The status over every plan, from `optimize`'s over the chosen bucketing's orders: optimal only where the
    bound over every plan is met."""
    if proven:
        return s if s in (Status.OPTIMAL, Status.HEURISTIC_OPTIMAL) else Status.OPTIMAL
    return {Status.OPTIMAL: Status.IMPROVED, Status.HEURISTIC_OPTIMAL: Status.HEURISTIC_TIMEOUT}.get(s, s)


def as_plan(problem: Problem, res: Result, bs: tuple[Bucket, ...], bound: float, notes: Sequence[str],
            stats: dict[str, Any], rows: dict[str, Evaluated] | None = None,
            baseline: dict[str, float] | None = None) -> Result:
    """`optimize`'s result on the bucketing `bs` as the result over every plan of `problem`: the same best order
    (with its buckets), the bound over every plan, the status and gap against it, the input order's figures of the
    graph as given (`baseline`, where the caller has them already); the bucketing's own bound and status kept in
    `stats["plan"]["bucketing"]`."""
    best = replace(res.best, buckets=bs)
    if baseline is None:
        g = problem.relaxed
        base = evaluate(problem.on(g), "input_order", list(range(len(g.nodes))))
        baseline = {"makespan": base.makespan, "exposed": base.exposed, "peak_memory": base.peak_memory}
    plan_stats = {**stats, "bucketing": {"status": res.status.value, "bound_us": res.bound, "method": res.method},
                  "bound_notes": list(notes),
                  "bound_scope": bound_scope(problem, stats, notes)}
    plan_stats.setdefault("unbucketed_us", None)
    plan_stats["layout"] = problem.bucket_layout
    info = PlanInfo(problem.bucket_layout, plan_stats["unbucketed_us"], res.status.value, res.bound,
                    plan_stats["bound_scope"], tuple(notes), stats.get("every_bucketing"),
                    "unbucketed" if stats.get("kept_unbucketed") else stats.get("kept_solved", ""),
                    budget_source=problem.budget_source, scored=stats.get("bucketings_scored", 0),
                    moves_kept=stats.get("moves", {}).get("accepted", 0), starts=dict(stats.get("starts", {})),
                    no_bucket_reason="" if bs else why_no_bucket(problem, stats.get("starts", {})),
                    relaxation_reach_us=stats.get("relaxation_reach_us"))
    # the order search's message speaks of the bucketed graph's own bound, not of the bound over every plan
    msg = f"the chosen bucketing's order: {res.message}" if res.message else ""
    stats = replace(res.stats, baseline=baseline, rows=dict(rows or {}), message=msg,
                    phases={**res.stats.phases, "plan": plan_stats})
    return replace(res, graph=problem.graph, best=best, status=plan_status(res.status, meets(best.makespan, bound)),
                   bound=bound, stats=stats, plan_info=info)


def why_no_bucket(problem: Problem, starts: dict[str, float]) -> str:
    """Why a plan has no bucket, in the order the causes are checked: no two collectives may merge, the cap
    forbids every merge, the budget left the starting bucketings no order, or no merge was worth its cost."""
    g = problem.relaxed
    keys = bucketable_by_key(g)
    if not keys:
        return "no two collectives may share a bucket (none has a partner of its kind, group, size and dtype)"
    def smallest_pair(cs: list[int]) -> Bucket:
        return Bucket(tuple(g.names[c] for c in sorted(cs, key=lambda c: g.nodes[c].nbytes or 0)[:2]))

    if problem.bucket_cap is not None and all(problem.over_cap([smallest_pair(cs)]) for cs in keys.values()):
        return f"the bucket cap ({fmt_bytes(problem.bucket_cap)}) is below the two smallest collectives of every key"
    blocked = [name for name, us in starts.items() if not math.isfinite(us)]
    if problem.budget is not None and blocked:
        return (f"the budget: {len(blocked)} of the {len(starts)} starting bucketings found no order within it "
                f"({', '.join(blocked[:3])}{', ...' if len(blocked) > 3 else ''}), and no bucketing judged within it "
                "was shorter than the best unbucketed order")
    return "no merge paid: no bucketing judged was shorter than the best unbucketed order"


def bound_scope(problem: Problem, stats: dict[str, Any], notes: Sequence[str]) -> str:
    """What the bound over every plan holds over, and how the budget entered it."""
    if problem.budget is None:
        return "every bucketing and order"
    how = ("each bucketing ordered under it" if "every_bucketing" in stats
           else "the joint model of buckets and order under it" if JOINT_UNDER_BUDGET in notes
           else "the relaxation ordered under it" if LIFTED_UNDER_BUDGET in notes
           else "the relaxation's buckets and overlaps read under it" if KEPT_APART in notes
           or OVERLAP_SHUT_BY_BUDGET in notes
           else "the budget not used by the bound" if KERNELS_ONLY in notes
           else "read by the relaxation's buckets and overlaps, of which it shut none")
    return f"every bucketing and order within the budget ({how})"


def finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


INPUT_PORTFOLIO = "input order's portfolio"
JOINT_UNDER_BUDGET = "the joint model of buckets and order, within the budget, proved the bound (decision 103)"
BOUND_CUT_BY_CLOCK = ("the clock, not the work, ended the bound's search after the plan (the plan is the work's; a "
                      "bound either way: a faster machine may prove a higher one)")
BOUND_CUT_WITH_THE_PLAN = ("the clock, not the work, ended the bound's search after the plan, as it cut the plan's "
                           "own search (a bound either way: a faster machine may prove a higher one)")


def bound_cut_note(tb: TimeBudget) -> str:
    """The note for a bound's search the clock cut: the plan is the work's unless the clock cut it too (then its
    own flag says so, and this note does not claim otherwise)."""
    return BOUND_CUT_WITH_THE_PLAN if tb.cut_by_wall_clock else BOUND_CUT_BY_CLOCK


def said_to_depend_on_input_order(r: Result, **stats: Any) -> Result:
    """`r` said to depend on the file's node order, in its plan statistics (with `stats`) and its `plan_info`."""
    r.stats["plan"].update(depends_on_input_order=True, **stats)
    return with_info(r, depends_on_input_order=True)


def with_info(r: Result, **figures: Any) -> Result:
    """`r` with some of its plan figures replaced."""
    assert r.plan_info is not None
    return replace(r, plan_info=replace(r.plan_info, **figures))


def on_given_graph(given: Problem, price: Pricing, tb: TimeBudget, r: Result) -> Result:
    """A plan searched on the canonical form, as a result of the problem as given: its graph, its buckets
    listed as the given graph lists them (`relisted`), and the figures of its input order; with what the clock
    cut (`clocked`)."""
    g = given.relaxed
    base = evaluate(given.on(g), "input_order", list(range(len(g.nodes))))
    baseline = {"makespan": base.makespan, "exposed": base.exposed, "peak_memory": base.peak_memory}
    return clocked(tb, replace(relisted(given, price, r), graph=given.graph).with_stats(baseline=baseline))


def in_graph_order(g: Graph, bs: Sequence[Bucket]) -> tuple[tuple[Bucket, ...], dict[str, str]]:
    """`bs` with each bucket's members in `g`'s order (another listing of the graph may order them otherwise),
    and the new name of each bucket node whose name that changes."""
    new = tuple(Bucket(tuple(sorted(b.members, key=g.index.__getitem__))) for b in bs)
    return new, {o: n for b, nb in zip(bs, new) for o, n in zip((b.name, *b.nodes), (nb.name, *nb.nodes)) if o != n}


def relisted(given: Problem, price: Pricing, r: Result) -> Result:
    """`r` with each bucket's members in the given graph's group input order, as MODEL.md lists them. At free the
    canonical form may number a group's collectives otherwise (a backward graph's all_gathers, named in forward
    order, run in reverse), and a plan listed in its order is refused where the plan is saved or applied. Only
    names change: the bucketed graph is rebuilt on the given graph and the same order, renamed, evaluated on it."""
    g = given.relaxed
    new, renamed = in_graph_order(g, r.buckets)
    if new == r.buckets:
        return r
    h = materialize(g, list(new), laid_out(price, r.layout))
    e = r.best
    best = evaluate(given.on(h), e.name, h.order_indices([renamed.get(nm, nm) for nm in e.names()]),
                    runtime_s=e.runtime_s, stats=e.stats, note=e.note)
    return replace(r, best=replace(best, buckets=new, transports=tuple(renamed.get(t, t) for t in e.transports)))


def none_within(problem: Problem, price: Pricing, params: SolveParams, tb: TimeBudget) -> bool:
    """Whether the relaxation over every bucketing provably has no order within the budget, in the time left:
    then no plan has one (decision 65). (The memory floor's proof, decision 71, ran before the search:
    `optimize_plan`'s `check_floor`.)"""
    if problem.budget is None or len(problem.relaxed.nodes) > LIFT_NODES or tb.cut():
        return False
    over = bound_over_bucketings(problem, price, replace(params, time_limit=max(0.01, tb.wall_left())), clock=tb)
    return NO_PLAN_WITHIN_BUDGET in over.notes


def no_plan_error(problem: Problem, errors: list[GraphError], proven: bool) -> GraphError:
    """The error over every plan: infeasibility only where it is proven (every legal bucketing proven to have no
    order within the budget, or the relaxation over every bucketing none), with the lowest peak any reached."""
    lows = [low for e in errors if (low := getattr(e, "lowest_peak", None)) is not None]
    low = f"; the lowest peak found is {fmt_bytes(min(lows))}" if lows else ""
    b = problem.budget or 0
    if proven:
        err: GraphError = InfeasibleBudgetError(
            f"memory budget of {fmt_bytes(b)} ({b} B) is unreachable: no plan (no bucketing, no order) peaks that "
            f"low (proven over every legal bucketing){low}")
    else:
        err = NoValidOrderError(
            f"no plan within the memory budget of {fmt_bytes(b)} ({b} B) was found within the time limit; this is "
            f"not a proof that none exists{low}; raise time_limit or the budget")
    err.budget, err.lowest_peak = b, min(lows) if lows else None  # type: ignore[attr-defined]
    return err


def clocked(tb: TimeBudget, r: Result) -> Result:
    """`r` saying whether the call's clock cut a deterministic search in any phase."""
    if not tb.cut_by_wall_clock or r.cut_by_wall_clock:
        return r
    return replace(r, stopped_by=r.stopped_by if r.stopped_by == "proof" else "clock").with_stats(cut_by_wall_clock=True)


def keep_solved(problem: Problem, r: Result, solved: dict[str, tuple[tuple[Bucket, ...], Result]]) -> Result:
    """The plan, or the shortest of the caller's ordered bucketings where that is shorter (its order search ran
    longer on that bucketing than the plan search could)."""
    for name, (bs, res) in solved.items():
        if res.makespan < r.makespan - 1e-9 * max(1.0, r.makespan):
            log.info("plan: the ordered bucketing %r given (%.1f us) is shorter than the plan (%.1f us)", name,
                     res.makespan, r.makespan)
            r = as_plan(problem, res, bs, r.bound, r.stats["plan"]["bound_notes"],
                        {**r.stats["plan"], "kept_solved": name}, r.rows, r.baseline)
    return r


def keep_unbucketed(problem: Problem, r: Result, unbucketed: Result | None) -> Result:
    """The plan, or the caller's unbucketed order where that is shorter (its order search ran longer on that
    graph than the plan's final one on the bucketed graph)."""
    if unbucketed is None:
        return r
    ps = r.stats["plan"]
    ps["unbucketed_us"] = finite_or_none(min(r.unbucketed, unbucketed.makespan))
    r = with_info(r, unbucketed_us=ps["unbucketed_us"])
    if unbucketed.makespan >= r.makespan - 1e-9 * max(1.0, r.makespan):
        return r
    log.info("plan: the unbucketed order given (%.1f us) is shorter than the best bucketed plan (%.1f us)",
             unbucketed.makespan, r.makespan)
    return as_plan(problem, unbucketed, (), r.bound, ps["bound_notes"], {**ps, "kept_unbucketed": True}, r.rows,
                   r.baseline)


__all__ = ["BOUND_CUT_BY_CLOCK", "BOUND_CUT_WITH_THE_PLAN", "INPUT_PORTFOLIO", "JOINT_UNDER_BUDGET", "as_plan",
           "bound_cut_note", "bound_scope", "clocked", "finite_or_none", "in_graph_order", "keep_solved",
           "keep_unbucketed", "no_plan_error", "none_within", "on_given_graph", "plan_status", "relisted",
           "said_to_depend_on_input_order", "why_no_bucket", "with_info"]
