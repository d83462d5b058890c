"""A plan: buckets and an order, found in four steps, each free to keep what the one before found.

1. Small spaces (at most `EXHAUSTIVE_BUCKETINGS` legal bucketings) are ordered whole: `optimize` on each.
2. Otherwise a hill climb over bucketings from warm starts (none, torch's greedy bucketer at several caps, the
   peers' buckets given), each scored by a few of Inductor's passes on its bucketed graph (`materialize`).
3. Bucket moves that edit the best orders in place (`bucket_moves`, decision 45; at a stricter level than free
   or under a budget, each move kept is first confirmed valid, decision 46), and on small graphs the joint
   CP-SAT model of buckets and order (`joint`, decision 43; at free without a budget, its plan checked).
4. `optimize` orders the chosen bucketing's graph.

The result is a `Result` over every plan (`over` "plans"): its bound, status and gap hold over every bucketing
and order (MODEL.md "Bounds over every bucketing", decisions 40 and 43); `optimize`'s status and bound for the
chosen bucketing's orders are kept in `stats["plan"]["bucketing"]`.
"""
from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from overlapsat.bounds import lower_bound
from overlapsat.errors import GraphError, InfeasibleBudgetError, NoValidOrderError
from overlapsat.evaluate import Evaluated, evaluate, rank_key
from overlapsat.fmt import fmt_bytes
from overlapsat.graph import Graph, NodeKind
from overlapsat.heuristics.bucketing import greedy_buckets
from overlapsat.heuristics.portfolio import pipelines, run_all
from overlapsat.plan import (
    Bucket,
    Pricing,
    any_bucketing_relaxation,
    bucket_key,
    bucket_problems,
    bucketable_by_key,
    collective_sequence,
    crossing_buckets,
    laid_out,
    materialize,
)
from overlapsat.problem import Problem
from overlapsat.solver.bucket_moves import Confirm, MovesResult, order_preserving_search
from overlapsat.solver.joint import JointResult, solve_joint, with_time
from overlapsat.solver.optimize import Progress, Result, Status, meets, optimize
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.validate import validate

log = logging.getLogger(__name__)

MIB = 1024 * 1024
CAPS_MB = (2000.0, 1000.0, 500.0, 250.0, 100.0, 25.0)  # torch's default cap first
DEFAULT_PEER = f"torch greedy, {CAPS_MB[0]:g} MB"  # the row of the bucketing a user gets from torch by default
SCORE_PASSES = ("raise_comms", "sink_waits+raise_comms+reorder_compute_for_overlap", "reorder_compute_for_overlap")
SEARCH_SHARE = 0.4  # of the time limit: the rest orders the chosen bucketing
FINALISTS = 3  # best scored bucketings judged with the whole portfolio before the order search
# bucketings scored per second of the search's share: about 25 at 1k nodes and 3 at 8k on this 2-core machine
NODE_EVALUATIONS_PER_SECOND = 25_000
FINAL_SHARE_MIN = 0.1  # of the time limit: the least the final `optimize` of the chosen bucketing gets
BOUND_SHARE = 0.1  # of the time limit: CP-SAT on the relaxation over every bucketing, for a higher bound
LIFT_NODES = 2000  # beyond this the whole-graph model proves little in that share
SEARCH_SHARE_LARGE = 0.7  # timed mode above LARGE_NODES: judging a bucketing costs about 0.5 s at 16k nodes
LARGE_NODES = 4000  # timed mode above this: warm starts scored by the few passes, not judged by the portfolio
EXHAUSTIVE_BUCKETINGS = 32  # up to this many legal bucketings, every one is ordered (a bound at the level and budget)
MOVES_SHARE = 0.2  # of the time limit: bucket moves that keep the order (solver/bucket_moves.py)
MOVES_SHARE_LARGE = 0.35  # timed mode above LARGE_NODES, taken from the hill climb's share
MOVE_STARTS = 3  # the best finalists the moves start from
MOVE_NODE_VISITS_PER_SECOND = 4_000_000  # one move walks the order once: about 400 moves a second at 10k nodes
JOINT_SHARE = 0.25  # of the time limit: the joint model of buckets and order (solver/joint.py), small graphs
MAX_KEY_ENUMERATED = 64  # collectives of one key beyond which bucketings are not listed (recursion depth, time)


def _plan_status(s: Status, proven: bool) -> Status:
    """The status over every plan, from `optimize`'s over the chosen bucketing's orders: optimal only where the
    bound over every plan is met."""
    if proven:
        return s if s in (Status.OPTIMAL, Status.HEURISTIC_OPTIMAL) else Status.OPTIMAL
    return {Status.OPTIMAL: Status.IMPROVED, Status.HEURISTIC_OPTIMAL: Status.HEURISTIC_TIMEOUT}.get(s, s)


def _as_plan(problem: Problem, res: Result, bs: tuple[Bucket, ...], bound: float, notes: Sequence[str],
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
                  "bound_scope": "every bucketing and order" + (", each bucketing ordered under the budget"
                                                                if "every_bucketing" in stats else ", the budget left out")}
    plan_stats.setdefault("unbucketed_us", None)
    plan_stats["layout"] = problem.bucket_layout
    return replace(res, graph=problem.graph, best=best, status=_plan_status(res.status, meets(best.makespan, bound)),
                   bound=bound, baseline=baseline,
                   stats={**res.stats, "plan": plan_stats}, over="plans", rows=dict(rows or {}))


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def optimize_plan(problem: Problem, price: Pricing, params: SolveParams | None = None, *,
                  transport: Any = None, **options: Any) -> Result:
    """Buckets and an order for `problem` (see `_optimize_plan` for the options). `transport`: a copy-engine
    table (`overlapsat.cost.transport.copy_engine`'s argument: "h100", a transport.json, a `CopyEngine`), under
    which each all_gather the table offers takes the cheaper transport (MODEL.md "Transport", decision 50): the
    plan is searched, bounded and proven on those prices, and `plan.transports` names the collectives of its
    bucketed graph that take the copy engine."""
    _check_call(problem, price, options.get("starts"))
    if transport is None:
        return _optimize_plan(problem, price, params, **options)
    if problem.bucket_layout != "copy":  # torch's copy-engine gather moves one tensor; a group call is several
        raise GraphError(f"optimize_plan: `transport` moves single all_gathers by copy engine; with bucket_layout "
                         f"{problem.bucket_layout!r} leave it out")
    from overlapsat.cost.transport import copy_engine

    table = copy_engine(transport)
    if options.get("unbucketed") is not None or options.get("solved"):
        raise GraphError("optimize_plan: `unbucketed` and `solved` were priced without the transport; with "
                         "`transport`, leave them out")
    group = table.group_of(problem.graph)
    inner = problem.on(table.repriced(problem.graph, group))
    r = _optimize_plan(inner, table.pricing(price, group), params, **options)
    given = {nd.name: nd.duration for nd in problem.graph.nodes}  # an unbucketed collective's NCCL price
    chosen = table.chosen(r.bucketed, group, lambda nd: given[nd.name] if nd.name in given else float(price(nd)))
    r.stats["plan"]["transport"] = {"table": table.source, "group": group, "copy_engine": len(chosen),
                                    "offered": sum(table.offered(nd, group) for nd in r.bucketed.nodes)}
    return replace(r, graph=problem.graph, best=replace(r.best, transports=chosen))


def _optimize_plan(problem: Problem, price: Pricing, params: SolveParams | None = None, *,
                   max_evaluations: int | None = None, on_phase: Callable[[Progress], None] | None = None,
                   starts: dict[str, Sequence[Bucket | Sequence[str]]] | None = None,
                   unbucketed: Result | None = None,
                   solved: dict[str, tuple[Sequence[Bucket | Sequence[str]], Result]] | None = None,
                   joint: bool = True, clock: TimeBudget | None = None, **options: Any) -> Result:
    """Buckets and an order for `problem` (its graph unbucketed), priced by `price` (a cost model's
    `duration`). Deterministic: the bucket search is bounded by `max_evaluations` bucketings scored, the order
    by `params`. Without `max_evaluations`, the count follows the time limit and the graph's size
    (`NODE_EVALUATIONS_PER_SECOND` / nodes over its `SEARCH_SHARE`) in deterministic mode; in timed mode the clock
    ends the search at that share of the time limit (`SEARCH_SHARE_LARGE` above `LARGE_NODES` nodes).
    `starts`: more warm starts by name (a peer's buckets, such as torch's OverlapScheduler's with bucketing on);
    each is judged by the whole portfolio and is a finalist, so the plan is never worse than the best order the
    portfolio finds for it (deterministic mode). An illegal one raises GraphError. `unbucketed`: `optimize`'s
    result on the same problem, where the caller has one; the plan is then never longer than it. `solved`:
    bucketings the caller has ordered already (name -> its buckets and `optimize`'s result on their bucketed graph,
    priced by `price`); the plan is never longer than any of them either. `joint=False`
    leaves out the joint CP-SAT model of buckets and order (decision 43; it runs only on small graphs, with
    `JOINT_SHARE` of the time). `clock`: the budget of a caller that runs this as one of its phases."""
    starts_given = starts
    price = laid_out(price, problem.bucket_layout)  # every bucketed graph below is the problem's layout
    if unbucketed is not None:
        if not isinstance(unbucketed, Result) or unbucketed.over != "orders":
            raise GraphError(f"unbucketed: expected optimize's Result on this problem, got {type(unbucketed).__name__}"
                             + (" over plans" if isinstance(unbucketed, Result) else ""))
        if unbucketed.graph.fingerprint() != problem.graph.fingerprint():
            raise GraphError(f"unbucketed: its result is of another graph ({unbucketed.graph.name!r}, fingerprint "
                             f"{unbucketed.graph.fingerprint()[:12]}) than this problem's ({problem.graph.name!r}, "
                             f"{problem.graph.fingerprint()[:12]}): other nodes or other prices")
        bad = validate(problem, unbucketed.names, limit=1)
        if bad:
            raise GraphError(f"unbucketed: not a valid order of this problem ({bad[0]})")
    if params is None:
        options.setdefault("collective_order", problem.collective_order)
        params = SolveParams.from_kwargs(**options)
    if params.collective_order != problem.collective_order:
        raise GraphError(f"collective_order {params.collective_order!r} differs from the Problem's "
                         f"{problem.collective_order!r}")
    if max_evaluations is None and params.deterministic:  # a count, not a clock: the same buckets on every machine
        rate = NODE_EVALUATIONS_PER_SECOND / max(1000, len(problem.graph.nodes))
        max_evaluations = max(10, int(rate * SEARCH_SHARE * params.time_limit))
    elif max_evaluations is None:  # timed: the clock (its share of the time limit) ends the search
        max_evaluations = 2**62
    tb = TimeBudget(params, parent=clock)  # the one clock of the call: every phase below ends by its deadline
    if on_phase is not None:
        on_phase(Progress(0.0, math.inf, 0.0, "buckets"))
    g = problem.relaxed
    solved_given = _solved_plans(problem, price, solved or {})
    starts_given = {name: as_buckets(g, given) for name, given in (starts_given or {}).items()}
    for name, given in starts_given.items():
        bad = bucket_problems(g, given)
        if bad:
            raise GraphError.from_problems(f"warm start {name!r}: illegal buckets", bad)
        bad = problem.over_cap(given)
        if bad:
            raise GraphError.from_problems(f"warm start {name!r}: outside the bucket policy", bad)
    try:
        return _search(problem, price, params, tb, g, starts_given, solved_given, unbucketed, max_evaluations,
                       on_phase, joint)
    except (InfeasibleBudgetError, NoValidOrderError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - valid input: a failure inside the search keeps the unbucketed order
        log.exception("plan: the search failed; returning the best unbucketed order")
        return _unbucketed_fallback(problem, price, params, tb, unbucketed, e)


def _search(problem: Problem, price: Pricing, params: SolveParams, tb: TimeBudget, g: Graph,
            starts_given: dict[str, tuple[Bucket, ...]], solved_given: dict[str, tuple[tuple[Bucket, ...], Result]],
            unbucketed: Result | None, max_evaluations: int, on_phase: Callable[[Progress], None] | None,
            joint: bool) -> Result:
    """The search of `_optimize_plan` on inputs it has checked."""
    t0 = tb.t0
    # The search runs on the canonical form (canonical.py), so that the plan does not depend on how the file
    # lists the nodes; only the peer a user gets from torch by default is taken from the given order (torch's
    # bucketer walks it), and a plan built on it says so
    given = problem
    peer_given = _greedy(given, g, CAPS_MB[0])
    problem = problem.canonical
    g = problem.relaxed
    starts_given = {name: as_buckets(g, bs) for name, bs in starts_given.items()}
    space = all_bucketings(g, EXHAUSTIVE_BUCKETINGS)
    if space is not None:  # the bucket policy's: every legal bucketing within the cap
        space = [bs for bs in space if not problem.over_cap(bs)]
    if space is not None:  # few enough to order each (the starts are among them)
        return _given(given, tb, _keep_solved(problem, _keep_unbucketed(
            problem, _every_bucketing(problem, price, params, space, tb), unbucketed), solved_given))
    scored: dict[tuple[Bucket, ...], Evaluated | None] = {}  # by the few passes of the hill climb
    full: dict[tuple[Bucket, ...], Evaluated | None] = {}  # by the whole portfolio
    passes: list[str] = list(SCORE_PASSES)

    def best_row(bs: tuple[Bucket, ...], include: list[str] | None) -> Evaluated | None:
        """The best valid order of the passes `include` (None: the whole portfolio) on the bucketed graph."""
        try:
            h = materialize(g, list(bs), price)
        except GraphError:  # buckets that leave no valid place (a cycle, an atomic group): no plan
            return None
        rows = [r for r in run_all(problem.on(h), include=include, work_limit=params.portfolio_steps,
                                   deadline=_monotonic(tb, tb.deadline)) if r.valid]
        return min(rows, key=rank_key) if rows else None

    def score(bs: tuple[Bucket, ...]) -> Evaluated | None:
        if bs not in scored:
            scored[bs] = best_row(bs, passes)
        return scored[bs]

    def judge(bs: tuple[Bucket, ...]) -> Evaluated | None:
        if bs not in full:
            full[bs] = best_row(bs, None)
        return full[bs]

    def best_known(bs: tuple[Bucket, ...]) -> Evaluated | None:
        """The better of what the portfolio and the score found for `bs`, as far as they ran."""
        cands = [x for x in (full.get(bs), scored.get(bs)) if x is not None]
        return min(cands, key=rank_key) if cands else None

    def ms(bs: tuple[Bucket, ...]) -> float:
        if bs not in scored and late():  # not scored in time: no figure
            return math.inf
        e = score(bs)
        return e.makespan if e is not None else math.inf

    # timed mode on a large graph: the order search after it rarely improves on the best pass's order (16k nodes),
    # while judging one bucketing there costs about half a second, so the bucket search gets the larger share
    large_timed = not params.deterministic and len(g.nodes) > LARGE_NODES
    share = SEARCH_SHARE_LARGE if large_timed else SEARCH_SHARE
    moves_share = MOVES_SHARE
    if large_timed:  # there a move costs milliseconds and a bucketing scored half a second
        share, moves_share = SEARCH_SHARE_LARGE - MOVES_SHARE_LARGE, MOVES_SHARE_LARGE

    def late() -> bool:  # timed: past the search's share; deterministic: past the deadline (flagged)
        return tb.cut() or (not params.deterministic and tb.elapsed() > share * params.time_limit)

    def out_of_budget() -> bool:
        return len(scored) + len(full) >= max_evaluations or late()

    starts: dict[str, tuple[Bucket, ...]] = {"no buckets": ()}
    for cap in CAPS_MB:
        if cap != CAPS_MB[0] and late():  # torch's bucketer walks the graph once per bucket: seconds at 36k nodes
            break
        bs = as_buckets(g, peer_given) if cap == CAPS_MB[0] else _greedy(problem, g, cap)
        if bs not in starts.values():
            starts[f"torch greedy, {cap:g} MB"] = bs
    peers: list[tuple[Bucket, ...]] = []
    for name, bs in starts_given.items():
        peers.append(bs)
        if bs not in starts.values():
            starts[name] = bs
    # the warm starts are judged by the whole portfolio; the pass that wins on the best of them joins the few
    # the hill climb scores by (on a graph where Inductor's iterative passes win, the linear ones mislead)
    # (timed mode on a large graph: only the unbucketed start, as the rest would take the search's whole share; the
    # finalists are judged later)
    start_rows = {name: (None if late() else judge(bs) if name == "no buckets" or not large_timed else score(bs))
                  for name, bs in starts.items()}
    start_scores = {name: e.makespan if e is not None else math.inf for name, e in start_rows.items()}
    order_of_starts = sorted(starts, key=lambda k: (start_scores[k], len(starts[k])))
    best = starts[order_of_starts[0]]
    won = full.get(best)
    if won is not None and won.name in pipelines() and won.name not in passes:
        passes.insert(0, won.name)
    tried = accepted = 0
    first_move_s: float | None = None  # when a move first beat the best warm start
    # a hill climb from the best warm start; while the count allows, again from the next ones (another basin)
    climbed: list[tuple[Bucket, ...]] = []
    for k, name in enumerate(order_of_starts):
        if k and out_of_budget():
            break
        cur = starts[name]
        improved = True
        while improved and not out_of_budget():
            improved = False
            here = best_known(cur)
            for cand in _neighbours(g, cur, here.sim.collective_exposure() if here is not None else None):
                if out_of_budget():
                    break
                if problem.over_cap(cand):  # outside the bucket policy: not a plan of this problem
                    continue
                tried += 1
                if ms(cand) < ms(cur) - 1e-9:
                    cur, improved = cand, True
                    accepted += 1
                    if k == 0 and first_move_s is None:
                        first_move_s = time.monotonic() - t0
                    break
        climbed.append(cur)
    best = min(climbed, key=lambda bs: (ms(bs), len(bs)))
    # The finalists are judged with the whole portfolio (the three passes of the score can mislead): the best
    # scored bucketings, and the peer a user gets from torch by default (its greedy buckets at 2000 MB, then its
    # best pass), so the plan is never worse than that peer
    peer = starts[DEFAULT_PEER] if DEFAULT_PEER in starts else ()
    ranked = sorted((bs for bs, e in scored.items() if e is not None), key=lambda bs: (ms(bs), len(bs)))
    finalists = list(dict.fromkeys([best, *ranked[:FINALISTS], peer, *peers]))
    for bs in finalists:
        if not late():  # timed mode, out of the search's share: the scores alone decide (the peer promise is dropped)
            judge(bs)

    def judged(bs: tuple[Bucket, ...]) -> float:
        e = best_known(bs)
        return e.makespan if e is not None else math.inf

    best = min(finalists, key=lambda bs: (judged(bs), len(bs), finalists.index(bs)))  # ties: fewer buckets
    row = best_known(best)
    extra = {f"best scoring pass ({row.name})": row.order} if row is not None else {}
    h = materialize(g, list(best), price)
    # bucket moves that keep the order, from the best bucketing's best order: no graph is built per move, so many
    # more are tried than the hill climb scores (module docstring of bucket_moves)
    mstats: dict[str, Any] = {}
    if row is not None:
        try:
            t_moves = time.monotonic()
            budget_moves = max(100, int(MOVE_NODE_VISITS_PER_SECOND * moves_share * params.time_limit / len(g.nodes)))
            # from the best finalists, each with its best order (another basin each), the budget shared
            origins = [bs for bs in sorted(finalists, key=lambda bs: (judged(bs), len(bs))) if best_known(bs) is not None]
            origins = list(dict.fromkeys([best, *origins]))[:MOVE_STARTS]
            runs = []
            for k, bs in enumerate(origins):
                hk = h if bs == best else materialize(g, list(bs), price)
                end_k = t_moves + (k + 1) / len(origins) * moves_share * params.time_limit
                runs.append(_alternate(g, price, bs, [hk.names[v] for v in best_known(bs).order],  # type: ignore[union-attr]
                                       budget_moves // len(origins) if params.deterministic else 2**62,
                                       lambda end_k=end_k: tb.cut() or (not params.deterministic
                                                                        and time.monotonic() > end_k),
                                       score, _confirmer(problem, price), _sequences(problem)))
            mv = min(runs, key=lambda r: r.makespan)
            firsts = [t for r in runs if (t := r.first_s) is not None]
            mstats = {"starts": len(runs), "tried": sum(r.tried for r in runs), "accepted": sum(r.accepted for r in runs),
                      "refused": sum(r.refused for r in runs),
                      "seconds": time.monotonic() - t_moves,
                      "first_kept_s": t_moves - t0 + min(firsts) if firsts else None}
            kept = _checked(problem, price, mv.buckets, mv.order) if mv.accepted else None
            if kept is not None and kept[2] < judged(best) - 1e-9 * max(1.0, judged(best)):
                best, h = kept[0], kept[1]
                extra = {"bucket moves keeping the order": [h.index[nm] for nm in mv.order]}
                mstats["used"] = True
        except Exception as e:  # noqa: BLE001 - a failure here must not cost the search's plan (the brief)
            log.exception("plan: the bucket moves failed; the search's plan is kept")
            mstats = {"error": f"{type(e).__name__}: {e}"}
    # the joint model, warm-started from the best plan so far: a better plan where it finds one, and a bound over
    # every plan where its candidates are every legal bucket
    jr = JointResult(stats={"skipped": "joint=False"})
    start_order = extra[next(iter(extra))] if extra else None
    if joint:
        try:
            jr = solve_joint(problem, price, with_time(params, JOINT_SHARE),
                             (best, [h.names[v] for v in start_order]) if start_order is not None else None,
                             clock=tb)
        except Exception as e:  # noqa: BLE001 - solve_joint contains CP-SAT; this catches the rest (the brief)
            log.exception("plan: the joint model failed; the search's plan is kept")
            jr = JointResult(stats={"error": f"{type(e).__name__}: {e}"})
    jstats: dict[str, Any] = {k: jr.stats.get(k) for k in ("skipped", "candidates", "complete", "solver_status",
                                                          "error") if k in jr.stats}
    jstats["bound_us"] = jr.bound
    better = _checked(problem, price, jr.buckets, jr.order)
    if better is not None and better[2] < judged(best) - 1e-9 * max(1.0, judged(best)):
        best, h = better[0], better[1]
        extra = {"joint model": [h.index[nm] for nm in jr.order]}  # type: ignore[union-attr]
        jstats["used"] = True
    lift = replace(params, time_limit=max(0.2, BOUND_SHARE * params.time_limit))
    lifted = len(g.nodes) <= LIFT_NODES
    if params.deterministic:  # the shares of the phases that ran, as work: the same plan on every machine
        share_left = 1.0 - SEARCH_SHARE - (moves_share if mstats and "error" not in mstats else 0.0) \
            - (BOUND_SHARE if lifted else 0.0) - (JOINT_SHARE if "skipped" not in jr.stats else 0.0)
        share_left = max(FINAL_SHARE_MIN, share_left)
        final_params = replace(params, time_limit=share_left * params.time_limit,
                               work_limit=None if params.work_limit is None else share_left * params.work_limit)
    else:  # the clock: what is left of the time limit, less the bound's share
        spent = tb.elapsed() + (lift.time_limit if lifted else 0.0)
        final_params = replace(params, time_limit=max(0.01, params.time_limit - spent))
    try:
        inner = problem if h is g else problem.on(h)  # no buckets: the canonical problem as it is (its views kept)
        res = optimize(inner, final_params, on_phase=on_phase, extra_orders=extra or None, clock=tb)
    except (InfeasibleBudgetError, NoValidOrderError) as e:  # this bucketing has no order within the budget
        log.info("plan: no order of the chosen bucketing meets the budget (%s); trying the others", e)
        best, h, res = _rescue(problem, price, final_params, tb, [best, *finalists, *ranked], e)
    bound, notes = bound_over_bucketings(problem, price, lift, clock=tb) if not tb.clock_over() else _kernel_bound(g)
    bound = max(bound, jr.bound)
    unb = full.get(())
    log.info("plan: %d buckets, makespan %.1f us (%d bucketings scored, %d moves accepted)", len(best),
             res.makespan, len(scored), accepted)
    rows = {name: replace(e, buckets=bs) for name, bs in [(DEFAULT_PEER, peer), *starts_given.items()]
            if (e := full.get(bs)) is not None}
    out = _as_plan(problem, res, best, bound, notes,
                   {"starts": start_scores, "moves": {"tried": tried, "accepted": accepted},
                    "bucketings_scored": len(scored), "bucketings_judged": len(full), "first_move_s": first_move_s,
                    "plan_search_s": time.monotonic() - t0 - res.stats.get("total_s", 0.0), "joint": jstats,
                    "order_moves": mstats, "unbucketed_us": _finite(unb.makespan) if unb is not None else None},
                   rows)
    out = _given(given, tb, _keep_solved(problem, _keep_unbucketed(problem, out, unbucketed), solved_given))
    if best == starts.get(DEFAULT_PEER) and peer_given != _greedy(problem, g, CAPS_MB[0]):
        out.stats["plan"]["depends_on_input_order"] = True  # torch's buckets of the given order won
    return out


def _check_call(problem: object, price: object, starts: object) -> None:
    """Refuse, by name, arguments of the wrong kind (a graph where a Problem is expected, warm starts that are
    not buckets of collectives by name) before any search."""
    if not isinstance(problem, Problem):
        raise GraphError(f"optimize_plan: expected a Problem (Problem.of(graph, budget, collective_order)), got "
                         f"{type(problem).__name__}")
    if not callable(price):
        raise GraphError(f"optimize_plan: price must be a pricing (node -> us), got {type(price).__name__}")
    if starts is None:
        return
    if not isinstance(starts, dict):
        raise GraphError(f"optimize_plan: starts must be a dict of name -> buckets, got {type(starts).__name__}")
    names = set(problem.graph.index)
    for name, bs in starts.items():
        if not isinstance(name, str):
            raise GraphError(f"optimize_plan: warm start names must be strings, got {name!r}")
        if isinstance(bs, (str, bytes)) or not isinstance(bs, (list, tuple)):
            raise GraphError(f"warm start {name!r}: expected a list of buckets, got {type(bs).__name__}")
        for b in bs:
            members = b.members if isinstance(b, Bucket) else b
            if isinstance(members, (str, bytes)) or not isinstance(members, (list, tuple)):
                raise GraphError(f"warm start {name!r}: a bucket must be a Bucket or a list of collective names, "
                                 f"got {b!r}")
            for m in members:
                if not isinstance(m, str) or m not in names:
                    raise GraphError(f"warm start {name!r}: {m!r} is not a node name of graph {problem.graph.name!r}")


def _unbucketed_fallback(problem: Problem, price: Pricing, params: SolveParams, tb: TimeBudget,
                         unbucketed: Result | None, error: Exception) -> Result:
    """The best unbucketed order as a plan with no buckets (the caller's where given, else `optimize`'s in the
    time left), after an internal failure of the search, with the analytical bound over every plan."""
    res = unbucketed or optimize(problem, replace(params, time_limit=max(0.01, tb.wall_left())), clock=tb)
    why = f"internal error in the plan search ({type(error).__name__}: {error}); the best unbucketed order instead"
    bound, notes = bound_over_bucketings(problem, price)
    out = _as_plan(problem, res, (), bound, notes, {"error": why, "unbucketed_us": _finite(res.makespan)})
    return _clocked(tb, replace(out, message=why))


def _greedy(problem: Problem, g: Graph, cap_mb: float) -> tuple[Bucket, ...]:
    """torch's greedy buckets of `g` (in its node order) at `cap_mb`, cut to legal runs within the bucket policy."""
    return _acyclic(g, _within_cap(problem, _legal(g, tuple(greedy_buckets(g, int(cap_mb * MIB))))))


def _given(given: Problem, tb: TimeBudget, r: Result) -> Result:
    """A plan searched on the canonical form, as a result of the problem as given: its graph, and the figures of
    its input order; with what the clock cut (`_clocked`)."""
    g = given.relaxed
    base = evaluate(given.on(g), "input_order", list(range(len(g.nodes))))
    baseline = {"makespan": base.makespan, "exposed": base.exposed, "peak_memory": base.peak_memory}
    return _clocked(tb, replace(r, graph=given.graph, baseline=baseline))


RESCUE_BUCKETINGS = 512  # bucketings listed (each ordered) when the search's choice has no order within the budget


def _rescue(problem: Problem, price: Pricing, params: SolveParams, tb: TimeBudget, tried: list[tuple[Bucket, ...]],
            first: GraphError) -> tuple[tuple[Bucket, ...], Graph, Result]:
    """Where the chosen bucketing has no order within the budget: order the others, the search's candidates
    (`tried`, best first), then no buckets, then every legal bucketing where there are at most
    `RESCUE_BUCKETINGS`, until one has a valid order. Raises InfeasibleBudgetError only when every legal bucketing
    was proven to have none, else NoValidOrderError (no proof)."""
    g = problem.relaxed
    space = all_bucketings(g, RESCUE_BUCKETINGS)
    listed = [bs for bs in space if not problem.over_cap(bs)] if space is not None else []
    todo = list(dict.fromkeys([*tried, (), *listed]))
    errors: list[GraphError] = [first]
    proven: set[tuple[Bucket, ...]] = {tried[0]} if isinstance(first, InfeasibleBudgetError) else set()
    for k, bs in enumerate(todo[1:], start=1):
        if tb.cut():
            break
        per = replace(params, time_limit=max(0.01, tb.wall_left() / (len(todo) - k)), work_limit=None
                      if params.work_limit is None else params.work_limit / len(todo))
        try:
            h = materialize(g, list(bs), price)
            return bs, h, optimize(problem.on(h), per, clock=tb)
        except InfeasibleBudgetError as e:
            proven.add(bs)
            errors.append(e)
        except GraphError as e:  # no order found (not proven), or buckets with no valid place
            errors.append(e)
            if not isinstance(e, NoValidOrderError):
                proven.add(bs)  # no bucketed graph: not a plan at all
    raise _no_plan(problem, errors, proven=space is not None and all(bs in proven for bs in listed))


def _no_plan(problem: Problem, errors: list[GraphError], proven: bool) -> GraphError:
    """The error over every plan: infeasibility only where every legal bucketing was proven to have no order
    within the budget, with the lowest peak any of them reached."""
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


def _kernel_bound(g: Graph) -> tuple[float, list[str]]:
    """A bound over every plan that costs one pass: the compute stream runs every kernel of `g`, in any bucketing
    (a bucket adds copies and merges launches, never removes a kernel). Where the clock left no time for more."""
    total = sum(nd.duration for nd in g.nodes if nd.kind is NodeKind.COMPUTE)
    return total, ["the clock left no time for the bound over every bucketing: the kernels' total time"]


def _monotonic(tb: TimeBudget, at: float) -> float:
    """`at` on `tb`'s clock as a `time.monotonic()` time (what the portfolio's deadline is read on)."""
    return time.monotonic() + (at - tb.clock())


def _clocked(tb: TimeBudget, r: Result) -> Result:
    """`r` saying whether the call's clock cut a deterministic search in any phase."""
    if not tb.cut_by_wall_clock or r.cut_by_wall_clock:
        return r
    return replace(r, cut_by_wall_clock=True, stopped_by=r.stopped_by if r.stopped_by == "proof" else "clock")


def _solved_plans(problem: Problem, price: Pricing, solved: dict[str, tuple[Sequence[Bucket | Sequence[str]], Result]]
                  ) -> dict[str, tuple[tuple[Bucket, ...], Result]]:
    """The caller's ordered bucketings, checked: legal buckets, and a result on the very graph they make here
    (the same prices), whose order is valid at the problem's level and budget. Raises GraphError naming one that
    is not."""
    g, out = problem.relaxed, {}
    for name, (given, res) in solved.items():
        bs = tuple(sorted(as_buckets(g, given), key=lambda b: g.index[b.members[0]]))
        bad = bucket_problems(g, bs) or problem.over_cap(bs)
        if bad:
            raise GraphError.from_problems(f"solved {name!r}: illegal buckets, or outside the bucket policy", bad)
        h = materialize(g, list(bs), price)
        if res.graph.fingerprint() != h.fingerprint():
            raise GraphError(f"solved {name!r}: its result is not of the graph its buckets make here (another "
                             "graph, or other prices)")
        bad = validate(problem.on(h), res.order, limit=1)
        if bad:
            raise GraphError(f"solved {name!r}: not a valid order at this level and budget ({bad[0]})")
        out[name] = (bs, res)
    return out


def _keep_solved(problem: Problem, r: Result, solved: dict[str, tuple[tuple[Bucket, ...], Result]]) -> Result:
    """The plan, or the shortest of the caller's ordered bucketings where that is shorter (its order search ran
    longer on that bucketing than the plan search could)."""
    for name, (bs, res) in solved.items():
        if res.makespan < r.makespan - 1e-9 * max(1.0, r.makespan):
            log.info("plan: the ordered bucketing %r given (%.1f us) is shorter than the plan (%.1f us)", name,
                     res.makespan, r.makespan)
            r = _as_plan(problem, res, bs, r.bound, r.stats["plan"]["bound_notes"],
                         {**r.stats["plan"], "kept_solved": name}, r.rows, r.baseline)
    return r


def _alternate(g: Graph, price: Pricing, bs: tuple[Bucket, ...], order: list[str], max_moves: int,
               late: Callable[[], bool], score: Callable[[tuple[Bucket, ...]], Evaluated | None],
               confirm: Confirm | None = None, sequences: list[list[int]] | None = None,
               rounds: int = 10) -> MovesResult:
    """Bucket moves that keep the order, then the few scoring passes on the bucketing they reach (whose order may
    be better than the edited one), then moves again from the better order, while a round improves."""
    t0 = time.monotonic()
    tried = accepted = refused = 0
    first: float | None = None
    out = MovesResult(bs, order, math.inf, 0, 0, None)
    for _ in range(rounds):
        started = time.monotonic() - t0
        r = order_preserving_search(g, price, bs, order, max(0, max_moves - tried), late, confirm, sequences)
        tried, accepted, refused = tried + r.tried, accepted + r.accepted, refused + r.refused
        if r.first_s is not None and first is None:
            first = started + r.first_s
        out = MovesResult(r.buckets, r.order, r.makespan, tried, accepted, first, refused)
        if not r.accepted or tried >= max_moves or late():
            break
        e = score(r.buckets)
        if e is None or e.makespan >= r.makespan - 1e-9 * max(1.0, r.makespan):
            break
        bs, order = r.buckets, [e.sim.graph.names[v] for v in e.order]
    return out


def _sequences(problem: Problem) -> list[list[int]] | None:
    """The collective sequences `problem`'s level keeps, by input index (None at free)."""
    g = problem.relaxed
    return None if problem.collective_order == "free" else \
        g.group_colls if problem.collective_order == "group" else [g.coll_seq]


def _confirmer(problem: Problem, price: Pricing) -> Confirm | None:
    """What a bucket move must pass before it is kept (decisions 46 and 52): within the bucket cap (a sum per
    bucket, checked first), then the level's and the budget's check (`_level_check`). None where nothing is to be
    checked."""
    check = _level_check(problem, price)
    if problem.bucket_cap is None:
        return check
    return lambda bs, order: not problem.over_cap(bs) and (check is None or check(bs, order))


def _level_check(problem: Problem, price: Pricing) -> Confirm | None:
    """None at level free without a budget: the edit is a valid order by construction there. Without a budget
    at levels group and global, the edit keeps every dependency by construction as well, so the collective
    sequences of its bucketed graph are compared with the order's (`collective_sequence`, a third of building
    the graph). Otherwise the edited plan is built and validated at the problem's level and budget."""
    level, g = problem.collective_order, problem.relaxed
    if level == "free" and problem.budget is None:
        return None
    if problem.budget is None and level in ("group", "global"):
        def in_sequence(bs: tuple[Bucket, ...], order: list[str]) -> bool:
            try:
                seq = collective_sequence(g, bs, price)
            except GraphError:  # buckets that depend on each other both ways
                return False
            group = {nd.name: nd.group if level == "group" else "" for nd in seq}
            mine: dict[str | None, list[str]] = {}
            for nm in order:
                if nm in group:
                    mine.setdefault(group[nm], []).append(nm)
            want: dict[str | None, list[str]] = {}
            for nd in seq:
                want.setdefault(group[nd.name], []).append(nd.name)
            return mine == want

        return in_sequence

    def valid(bs: tuple[Bucket, ...], order: list[str]) -> bool:
        return _valid_plan(problem, price, bs, order) is not None

    return valid


def _valid_plan(problem: Problem, price: Pricing, bs: Sequence[Bucket],
                order: list[str]) -> tuple[Graph, list[int]] | None:
    """The bucketed graph of `bs` and `order` in its node ids, where the buckets are legal (`materialize` checks
    them) and within the bucket policy, and the order is valid at the problem's level and budget; None
    otherwise."""
    if problem.over_cap(bs):
        return None
    try:
        h = materialize(problem.relaxed, list(bs), price)
        ids = [h.index[nm] for nm in order]
    except (GraphError, KeyError):  # illegal buckets, or a name the bucketed graph does not have
        return None
    return None if validate(problem.on(h), ids, limit=1) else (h, ids)


def _checked(problem: Problem, price: Pricing, buckets: tuple[Bucket, ...] | None,
             order: list[str] | None) -> tuple[tuple[Bucket, ...], Graph, float] | None:
    """A plan found by a search that does not see the whole problem (the joint model's, at free without a
    budget; the bucket moves'), if it is legal and valid at the problem's level and budget: its buckets, bucketed
    graph and makespan."""
    if buckets is None or order is None:
        return None
    g = problem.relaxed
    bs = tuple(sorted(buckets, key=lambda b: g.index[b.members[0]]))
    found = _valid_plan(problem, price, bs, order)
    if found is None:
        return None
    h, ids = found
    return bs, h, evaluate(problem.on(h), "joint model", ids).makespan


def _keep_unbucketed(problem: Problem, r: Result, unbucketed: Result | None) -> Result:
    """The plan, or the caller's unbucketed order where that is shorter (its order search ran longer on that
    graph than the plan's final one on the bucketed graph)."""
    if unbucketed is None:
        return r
    ps = r.stats["plan"]
    ps["unbucketed_us"] = _finite(min(r.unbucketed, unbucketed.makespan))
    if unbucketed.makespan >= r.makespan - 1e-9 * max(1.0, r.makespan):
        return r
    log.info("plan: the unbucketed order given (%.1f us) is shorter than the best bucketed plan (%.1f us)",
             unbucketed.makespan, r.makespan)
    return _as_plan(problem, unbucketed, (), r.bound, ps["bound_notes"], {**ps, "kept_unbucketed": True}, r.rows,
                    r.baseline)


def _within_cap(problem: Problem, bs: tuple[Bucket, ...]) -> tuple[Bucket, ...]:
    """`bs` with each bucket above the problem's bucket cap cut, in member order, into the longest runs within
    it (torch's greedy bucketer closes a bucket only once it reaches its cap, so one may pass it); a run of one
    is no bucket. Parts of a bucket stay legal and acyclic: a cycle through them would be one through the whole."""
    if problem.bucket_cap is None:
        return bs
    out: list[Bucket] = []
    for b in bs:
        if not problem.over_cap([b]):
            out.append(b)
            continue
        run: list[str] = []
        size = 0
        for m in b.members:
            nb = int(problem.graph.node(m).nbytes)
            if run and size + nb > problem.bucket_cap:
                if len(run) > 1:
                    out.append(Bucket(tuple(run)))
                run, size = [], 0
            run.append(m)
            size += nb
        if len(run) > 1 and size <= problem.bucket_cap:
            out.append(Bucket(tuple(run)))
    return tuple(out)


def _legal(g: Graph, bs: tuple[Bucket, ...]) -> tuple[Bucket, ...]:
    """`bs` with each bucket that breaks MODEL.md's legality rules cut, in member order, into the longest legal
    runs (torch's greedy bucketer does not check every rule overlapsat's model has, such as a member depending on
    another); a run of one is no bucket."""
    out: list[Bucket] = []
    for b in bs:
        if not bucket_problems(g, [b]):
            out.append(b)
            continue
        run: list[str] = []
        for m in b.members:
            if run and bucket_problems(g, [Bucket((*run, m))]):
                if len(run) > 1:
                    out.append(Bucket(tuple(run)))
                run = []
            run.append(m)
        if len(run) > 1:
            out.append(Bucket(tuple(run)))
    return tuple(out)


def _acyclic(g: Graph, bs: tuple[Bucket, ...]) -> tuple[Bucket, ...]:
    """`bs`, or where its buckets depend on each other both ways (keys bucketed apart can), those of them kept in
    order that do not close a cycle with the ones kept before."""
    if len(bs) < 2 or not crossing_buckets(g, bs):
        return bs
    kept: list[Bucket] = []
    for b in bs:
        if not crossing_buckets(g, [*kept, b]):
            kept.append(b)
    return tuple(kept)


def as_buckets(g: Graph, given: Sequence[Bucket | Sequence[str]]) -> tuple[Bucket, ...]:
    """A peer's buckets (members by name, in any order: torch lists them in its merge order) as this graph's:
    each bucket's members in their group's input order, buckets by their first member."""
    def pos(nm: str) -> int:
        return g.index.get(nm, len(g.nodes))

    bs = [Bucket(tuple(sorted(b.members if isinstance(b, Bucket) else tuple(b), key=pos))) for b in given]
    return tuple(sorted(bs, key=lambda b: pos(b.members[0]) if b.members else -1))


def all_bucketings(g: Graph, limit: int) -> list[tuple[Bucket, ...]] | None:
    """Every legal bucketing of `g` (MODEL.md "Buckets"), or None when there are more than `limit` (or a key has
    more than `MAX_KEY_ENUMERATED` collectives): per bucket key, every partition of its collectives into legal
    buckets and collectives left alone."""
    options: list[list[list[Bucket]]] = []
    total = 1
    for cs in bucketable_by_key(g).values():
        if len(cs) > MAX_KEY_ENUMERATED:  # not listed (it may still have few legal bucketings): searched instead
            return None
        found: list[list[Bucket]] = []
        if not _partitions(g, [g.names[c] for c in cs], [], found, limit):
            return None
        options.append(found)
        total *= len(found)
        if total > limit:
            return None
    if total > limit:
        return None
    out = [tuple(sorted((b for part in combo for b in part), key=lambda b: g.index[b.members[0]]))
           for combo in itertools.product(*options)]
    # buckets legal alone may still depend on each other both ways (MODEL.md rule 2): such a set is no bucketing
    return sorted((bs for bs in out if len(bs) < 2 or not crossing_buckets(g, bs)), key=len)


def _partitions(g: Graph, rest: list[str], blocks: list[list[str]], out: list[list[Bucket]], limit: int) -> bool:
    """Extend `blocks` by every placement of `rest` (each collective joins an earlier block or opens one);
    append each legal partition's buckets to `out`. False once `out` passes `limit`."""
    if not rest:
        out.append([Bucket(tuple(b)) for b in blocks if len(b) >= 2])
        return len(out) <= limit
    head, tail = rest[0], rest[1:]
    for b in blocks:
        b.append(head)
        ok = not bucket_problems(g, [Bucket(tuple(b))])
        if ok and not _partitions(g, tail, blocks, out, limit):
            b.pop()
            return False
        b.pop()
    blocks.append([head])
    more = _partitions(g, tail, blocks, out, limit)
    blocks.pop()
    return more


def _every_bucketing(problem: Problem, price: Pricing, params: SolveParams, space: list[tuple[Bucket, ...]],
                     tb: TimeBudget) -> Result:
    """Order every legal bucketing with `optimize` (a share of the time limit each): the best plan, and a bound
    at the problem's level and budget, the least of the bucketings' own bounds (a bucketing proven to have no
    order within the budget has none), beside the relaxation's."""
    g = problem.relaxed
    bound_time = BOUND_SHARE * params.time_limit if len(g.nodes) <= LIFT_NODES else 0.0
    per = replace(params, time_limit=max(0.01, (params.time_limit - bound_time) / len(space)),
                  work_limit=None if params.work_limit is None else params.work_limit / len(space))
    best: tuple[tuple[Bucket, ...], Graph, Result] | None = None
    bounds: list[float] = []
    errors: list[GraphError] = []
    unb = math.inf
    for bs in space:
        try:
            h = materialize(g, list(bs), price)
        except GraphError:  # no valid place for these buckets (an atomic group between): not a plan
            continue
        try:
            res = optimize(problem.on(h), per, clock=tb)
        except InfeasibleBudgetError as e:  # proven: no order of this bucketing is within the budget
            errors.append(e)
            continue
        except NoValidOrderError as e:  # not proven either way: the analytical bound of its schedules
            errors.append(e)
            bounds.append(lower_bound(problem.on(h)).makespan)
            continue
        bounds.append(res.bound)
        if not bs:
            unb = res.makespan
        if best is None or (res.makespan, len(bs)) < (best[2].makespan, len(best[0])):
            best = (bs, h, res)
    if best is None:
        raise _no_plan(problem, errors, proven=len(errors) == len(space))
    bs, h, res = best
    relaxed_bound, notes = bound_over_bucketings(
        problem, price, replace(params, time_limit=max(0.01, bound_time)) if bound_time else None, clock=tb)
    return _as_plan(problem, res, bs, max(relaxed_bound, min(bounds)), notes,
                    {"starts": {}, "moves": {"tried": len(space), "accepted": 0}, "bucketings_scored": 0,
                     "bucketings_judged": 0, "every_bucketing": len(space), "plan_search_s": tb.elapsed(),
                     "unbucketed_us": _finite(unb)})


def bound_over_bucketings(problem: Problem, price: Pricing, params: SolveParams | None = None,
                          clock: TimeBudget | None = None) -> tuple[float, list[str]]:
    """A lower bound on every plan's makespan, over every legal bucketing and every order, and the notes of the
    relaxation it comes from (MODEL.md "Bounds over every bucketing"): the bounds of `any_bucketing_relaxation`
    with no collective order and no budget. With `params`, on a graph of at most `LIFT_NODES` nodes, `optimize`
    on the relaxation also runs, and its proven bound lifts the analytical one."""
    rg, notes = any_bucketing_relaxation(problem.relaxed, price)
    pb = Problem(rg, None, "free")
    bound = lower_bound(pb).makespan
    if params is not None and len(rg.nodes) <= LIFT_NODES:
        try:
            bound = max(bound, optimize(pb, replace(params, collective_order="free"), clock=clock).bound)
        except (NoValidOrderError, InfeasibleBudgetError):  # no budget here: none proven; the analytical bound
            pass
    return bound, notes


def _neighbours(g: Graph, bs: tuple[Bucket, ...],
                exposure: dict[str, float] | None = None) -> Iterator[tuple[Bucket, ...]]:
    """Bucketings one move away, each once. First the moves the current order points at (`exposure`, each
    collective's stall in it, by name of the bucketed graph): halving the buckets whose wait stalls, most stalled
    first, and merging neighbouring buckets of one key neither of which stalls. Then every legal merge of two
    buckets of one key (nearest), new bucket of two neighbouring collectives left alone, drop of a bucket, and
    split of one in two; none whose buckets depend on each other both ways. The first improving one is taken, so
    the later ones are not built."""
    pos = g.index
    seen: set[tuple[Bucket, ...]] = set()

    def with_(drop: set[int], add: list[Bucket]) -> tuple[Bucket, ...]:
        kept = [b for i, b in enumerate(bs) if i not in drop] + [b for b in add if len(b.members) >= 2]
        return tuple(sorted(kept, key=lambda b: pos[b.members[0]]))

    def merge_with_next(i: int) -> tuple[int, Bucket] | None:
        """The nearest later bucket of i's key and the two merged, if legal."""
        ka = bucket_key(g.node(bs[i].members[0]))
        for j in range(i + 1, len(bs)):
            if bucket_key(g.node(bs[j].members[0])) != ka:
                continue
            merged = Bucket(tuple(sorted(bs[i].members + bs[j].members, key=pos.__getitem__)))
            return (j, merged) if not bucket_problems(g, [merged]) else None
        return None

    def moves() -> Iterator[tuple[Bucket, ...]]:
        if exposure:
            stalled = sorted((i for i, b in enumerate(bs) if exposure.get(b.name, 0.0) > 0.0),
                             key=lambda i: (-exposure[bs[i].name], i))
            for i in stalled:
                half = len(bs[i].members) // 2
                yield with_({i}, [Bucket(bs[i].members[:half]), Bucket(bs[i].members[half:])])
            for i, a in enumerate(bs):
                if exposure.get(a.name, 0.0) == 0.0:
                    m = merge_with_next(i)
                    if m is not None and exposure.get(bs[m[0]].name, 0.0) == 0.0:
                        yield with_({i, m[0]}, [m[1]])
        for i in range(len(bs)):  # merges of two buckets with one key, nearest first: fewer latencies
            m = merge_with_next(i)
            if m is not None:
                yield with_({i, m[0]}, [m[1]])
        for a, b in _free_pairs(g, bs):  # two collectives left alone, nearest of one key: a new bucket
            yield with_(set(), [Bucket((a, b))])
        for i in range(len(bs)):  # drops: the members go back to their own transfers
            yield with_({i}, [])
        for i, b in enumerate(bs):  # splits in halves, then at every other point
            half = len(b.members) // 2
            for k in [half] + [k for k in range(1, len(b.members)) if k != half]:
                yield with_({i}, [Bucket(b.members[:k]), Bucket(b.members[k:])])

    for cand in moves():
        if cand not in seen and cand != bs:
            seen.add(cand)
            if len(cand) >= 2 and crossing_buckets(g, cand):  # a merge can make two buckets depend both ways
                continue
            yield cand


def _free_pairs(g: Graph, bs: tuple[Bucket, ...]) -> Iterator[tuple[str, str]]:
    """Each collective in no bucket with the next one of its key also in none, where the two may share a bucket."""
    taken = {m for b in bs for m in b.members}
    for cs in bucketable_by_key(g).values():
        free = [g.names[c] for c in cs if g.names[c] not in taken]
        for a, b in zip(free, free[1:]):
            if not bucket_problems(g, [Bucket((a, b))]):
                yield a, b


__all__ = ["optimize_plan"]
