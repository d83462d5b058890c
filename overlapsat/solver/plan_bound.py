"""The proof side of plans: a lower bound on every plan's makespan, over every legal bucketing and order
(MODEL.md "Bounds over every bucketing")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from overlapsat.bounds import lower_bound
from overlapsat.errors import InfeasibleBudgetError, NoValidOrderError
from overlapsat.fmt import fmt_us
from overlapsat.graph import Graph, NodeKind
from overlapsat.plan import KEPT_APART, Pricing, any_bucketing_relaxation
from overlapsat.problem import Problem
from overlapsat.solver.memory_bound import kept_apart, overlap_capacity_bound, share_tables
from overlapsat.solver.optimize import meets, optimize
from overlapsat.solver.params import SolveParams, TimeBudget

LIFT_NODES = 2000  # beyond this the whole-graph model proves little in its share
BOUND_SHARE = 0.1  # of the time limit: CP-SAT on the relaxation over every bucketing, for a higher bound


@dataclass(frozen=True)
class OverBucketings:
    """The bound over every plan (`bound_over_bucketings`), the notes on how it was reached, and `reach_us`: the
    makespan of the best order of the relaxation found within the budget where it was ordered (None: not ordered).
    No bound from the relaxation can pass `reach_us`, so a plan above it has a gap that only a tighter relaxation
    or a better plan closes, and the plan's result says so (decision 113)."""

    bound: float
    notes: list[str] = field(default_factory=list)
    reach_us: float | None = None


def bound_over_bucketings(problem: Problem, price: Pricing, params: SolveParams | None = None,
                          clock: TimeBudget | None = None,
                          analytical: tuple[Graph, float, list[str]] | None = None) -> OverBucketings:
    """A lower bound on the makespan of every plan within the problem's budget, over every legal bucketing and
    every order, and the notes of the relaxation it comes from (MODEL.md "Bounds over every bucketing"): the
    analytical bounds of `any_bucketing_relaxation` with no collective order (they hold with or without a
    budget). With `params`, on a graph of at most `LIFT_NODES` nodes, `optimize` on the relaxation under the
    problem's budget also runs, and its proven bound lifts the analytical one: a plan's order read on the
    unbucketed graph peaks no higher (decision 65), so every plan within the budget has an order of the
    relaxation within it that takes no longer. The best order that solve finds is the relaxation's reach."""
    rg, bound, notes = analytical if analytical is not None else analytical_over_bucketings(problem, price)
    notes, reach = list(notes), None
    if params is not None and len(rg.nodes) <= LIFT_NODES:
        try:
            lifted = optimize(Problem(rg, problem.budget, "free"), replace(params, collective_order="free"),
                              clock=clock)
            if problem.budget is not None:
                notes.append(LIFTED_UNDER_BUDGET)
            bound, reach = max(bound, lifted.bound), lifted.makespan
        except InfeasibleBudgetError:  # proven: no order of the relaxation, so no plan, within the budget
            notes.append(NO_PLAN_WITHIN_BUDGET)
        except NoValidOrderError:  # none found, none proven: the analytical bound
            pass
    return OverBucketings(bound, notes, reach)


def reach_note(bound: float, makespan: float, reach_us: float | None, budget: int | None) -> str:
    """Where the relaxation's best order found (`reach_us`, within `budget` where there is one) is below the plan
    and the bound reported is not above it: the sentence that says how much of the gap no bound from that
    relaxation can close (decision 113), else ""."""
    if reach_us is None or not math.isfinite(makespan) or makespan <= 0 or not reach_us < makespan \
            or bound > reach_us or meets(makespan, bound):
        return ""
    within = "within the budget" if budget is not None else "with no budget"
    return (f"the relaxation over every bucketing has an order of {fmt_us(reach_us)} {within}, so no bound "
            f"from it passes that: {100 * (makespan - reach_us) / makespan:.1f}% of the plan's makespan is closed "
            "only by a tighter relaxation or a shorter plan")


LIFTED_UNDER_BUDGET = "the relaxation was ordered within the budget"
NO_PLAN_WITHIN_BUDGET = "the relaxation has no order within the budget (proven): no plan has one"
OVERLAP_SHUT_BY_BUDGET = "the budget leaves too little memory for some transfers to overlap kernels (decision 71)"
KERNELS_ONLY = "the clock left no time for the bound over every bucketing: the kernels' total time"


def analytical_over_bucketings(problem: Problem, price: Pricing,
                               memory_pairs: bool = True) -> tuple[Graph, float, list[str]]:
    """The relaxation over every bucketing, its analytical bound and notes: the part of `bound_over_bucketings`
    that costs one pass over the graph (about 1.5e-5 s a node; under a budget, with the memory floor and the
    overlap bound, 5-7e-5 s measured on 2k-13k nodes, 2026-12-02), computed before a search where there is time.
    Under a budget, pairs of collectives whose bucket would pass it are no partners (decision 106);
    `memory_pairs=False` leaves that out, and the overlap bound's check of later steps, for comparison."""
    apart = kept_apart(problem.relaxed, problem.budget) if problem.budget is not None and memory_pairs else None
    rg, notes = any_bucketing_relaxation(problem.relaxed, price, problem.bucket_cap, apart or None)  # notes a shut
    bound = lower_bound(Problem(rg, None, "free")).makespan
    if problem.budget is not None:  # a plan within the budget orders the relaxation within it (decision 65)
        share_tables(problem.relaxed, rg)  # the relaxation changes prices only
        by_memory = overlap_capacity_bound(rg, problem.budget, memory_pairs)
        if by_memory > bound:
            notes.append(OVERLAP_SHUT_BY_BUDGET)
            bound = by_memory
    return rg, bound, notes


def kernel_bound(g: Graph) -> OverBucketings:
    """A bound over every plan that costs one pass: the compute stream runs every kernel of `g`, in any bucketing
    (a bucket adds copies and merges launches, never removes a kernel). Where the clock left no time for more."""
    total = sum(nd.duration for nd in g.nodes if nd.kind is NodeKind.COMPUTE)
    return OverBucketings(total, [KERNELS_ONLY])


__all__ = ["KEPT_APART", "KERNELS_ONLY", "LIFTED_UNDER_BUDGET", "LIFT_NODES", "NO_PLAN_WITHIN_BUDGET", "OVERLAP_SHUT_BY_BUDGET",
           "OverBucketings", "analytical_over_bucketings", "bound_over_bucketings", "kernel_bound", "reach_note"]
