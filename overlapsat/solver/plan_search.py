"""A plan: buckets and an order, found in four steps, each free to keep what the one before found.

1. Small spaces (at most `EXHAUSTIVE_BUCKETINGS` legal bucketings) are ordered whole (`every_bucketing`):
   `optimize` on each, then again on the few shortest not yet proven (decision 107).
2. Otherwise a hill climb over bucketings from warm starts (none, torch's greedy bucketer at several caps, the
   peers' buckets given), each scored by a few of Inductor's passes on its bucketed graph (`materialize`).
3. Bucket moves that edit the best orders in place (`bucket_moves`, decision 45; at a stricter level than free
   or under a budget, each move kept is first confirmed valid, decision 46), and on small graphs the joint
   CP-SAT model of buckets and order (`joint`, decision 43; at free without a budget, its plan checked).
4. `optimize` orders the chosen bucketing's graph.

The result is a `Result` over every plan (`over` "plans"): its bound, status and gap hold over every bucketing
and order (MODEL.md "Bounds over every bucketing", decisions 40 and 43); `optimize`'s status and bound for the
chosen bucketing's orders are kept in `stats["plan"]["bucketing"]` (`plan_result`, which also keeps the caller's
shorter plan where it has one and lists the plan as the graph as given lists it).
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from overlapsat.canonical import is_kept, kept_canonical
from overlapsat.errors import GraphError, InfeasibleBudgetError, NoValidOrderError
from overlapsat.evaluate import Evaluated, evaluate, evaluate_named, rank_key
from overlapsat.gc_pause import paused_gc
from overlapsat.graph import Graph
from overlapsat.heuristics.portfolio import FIT_ORDERS, PREFETCH_ORDERS, pipelines, run_all
from overlapsat.plan import Bucket, Pricing, bucket_problems, laid_out, materialize
from overlapsat.problem import Problem
from overlapsat.solver.bucket_moves import order_preserving_search
from overlapsat.solver.bucketings import (  # noqa: F401 - re-exported: the plan search's public names
    MAX_KEY_ENUMERATED,
    MIB,
    all_bucketings,
    as_buckets,
    torch_greedy,
)
from overlapsat.solver.bucketings import within_cap as _within_cap  # noqa: F401 - tests import it from here
from overlapsat.solver.climb import alternate, neighbours
from overlapsat.solver.every_bucketing import order_every_bucketing
from overlapsat.solver.joint import solve_joint, with_time
from overlapsat.solver.ledger import FINAL_FIT, STEP_S, Ledger
from overlapsat.solver.memory_bound import peak_floor
from overlapsat.solver.optimize import Progress, Result, optimize, order_result
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.plan_bound import (
    BOUND_SHARE,
    LIFT_NODES,
    analytical_over_bucketings,
    bound_over_bucketings,
    kernel_bound,
)
from overlapsat.solver.plan_checks import check_call, checked, early_merges, move_checks, sequences, solved_plans
from overlapsat.solver.plan_checks import confirmer as _confirmer  # noqa: F401 - tests import it from here
from overlapsat.solver.plan_checks import sequences as _sequences  # noqa: F401 - tests import it from here
from overlapsat.solver.plan_result import (
    INPUT_PORTFOLIO,
    JOINT_UNDER_BUDGET,
    as_plan,
    bound_cut_note,
    clocked,
    finite_or_none,
    in_graph_order,
    keep_solved,
    keep_unbucketed,
    no_plan_error,
    none_within,
    on_given_graph,
    said_to_depend_on_input_order,
    with_info,
)
from overlapsat.solver.room import Checks, room_buckets
from overlapsat.solver.search import CANONICAL_S_PER_NODE, check_floor, floor_checked
from overlapsat.validate import validate

log = logging.getLogger(__name__)

CAPS_MB = (2000.0, 1000.0, 500.0, 250.0, 100.0, 25.0)  # torch's default cap first
# the buckets within the budget's room (room.py), a start at each cap, in this order (on the corpus the best
# were 1000-2000 MB on the 1-D Llama3 graphs and 100-250 MB on the 2-D ones), as many exact checks as ROOM_SHARE
# of the time limit pays for at the ledger's price (ledger.py), a count in every mode; each repair of a start is
# one more check from that count (under a tight budget on a 5k-node MoE graph every start ran its 6 repairs)
ROOM_CAPS_MB = (1000.0, 250.0, 2000.0, 100.0, 500.0)
ROOM_SHARE = 0.15
DEFAULT_PEER = f"torch greedy, {CAPS_MB[0]:g} MB"  # the row of the bucketing a user gets from torch by default
SCORE_PASSES = ("raise_comms", "sink_waits+raise_comms+reorder_compute_for_overlap", "reorder_compute_for_overlap")
# deterministic mode: the phases draw on one ledger of the time limit (ledger.py, decision 79) and each ends where
# the account reaches its share, counted from the call's start: the hill climb's scores at SEARCH_SHARE, the
# judgments by the whole portfolio at JUDGE_END, the bucket moves at SEARCH_SHARE + MOVES_SHARE; the final order
# gets what is left (the bound's share kept back); timed mode: the clock ends each phase at its share
SEARCH_SHARE = 0.4
JUDGE_END = 0.5
FINALISTS = 3  # best scored bucketings judged with the whole portfolio before the order search
FINAL_SHARE_MIN = 0.1  # of the time limit: the least the final `optimize` of the chosen bucketing gets
SEARCH_SHARE_LARGE = 0.7  # timed mode above LARGE_NODES: judging a bucketing costs about 0.5 s at 16k nodes
LARGE_NODES = 4000  # timed mode above this: warm starts scored by the few passes, not judged by the portfolio
EXHAUSTIVE_BUCKETINGS = 32  # up to this many legal bucketings, every one is ordered (a bound at the level and budget)
# what building and ordering the chosen bucketing costs before any search, per node (its memory floor, portfolio and
# bounds: 0.30-1.43 s at 4.2k-13.4k nodes of the FX corpus, 7e-5 to 1.1e-4 s a node, on this 2-core machine,
# 2026-12-02; 7e-5 before decisions 71 and 94 added the floor and the overlap bound): kept back from the search
# phases, up to the whole limit (a limit too short for any search leaves the bucketing unsearched, and says so)
RESERVE_S_PER_NODE = 1.2e-4
BOUND_S_PER_NODE = STEP_S["bound"][1]  # the analytical bound over every bucketing: not started later
# the same under a budget, where no early one was computed (measured 2026-12-02: 5-7e-5 s a node at 2k-13k nodes,
# 8-10e-5 at 36k with the floor to compute): the plan keeps its ledger's price, only this gate reads it
BUDGETED_BOUND_S_PER_NODE = 1e-4
EARLY_BOUND_SHARE = 0.05  # of the time limit: the analytical bound is computed before the search when it costs less
JUDGE_SHARE = 0.6  # of the time limit on the clock: no pass judging a bucketing starts later
MOVES_SHARE = 0.3  # of the time limit: bucket moves that keep the order (solver/bucket_moves.py; decision 120)
MOVES_SHARE_LARGE = 0.35  # timed mode above LARGE_NODES, taken from the hill climb's share
MOVE_STARTS = 3  # the best finalists the moves start from
MOVES_MIN = 30  # deterministic mode: bucket moves tried however little the ledger has left (a walk of the order each)
# deterministic mode: the bucket moves of both phases (the moves, then the polish's) are given at least this share of
# the ledger's total, however much the phases before them spent: where the moves phase was given less, the polish is
# given the rest (decision 121: at 10 s on a 7.9k-node graph the starts' scores left the moves their 30, and 500
# moves took the plan from 5.2 % above the bound to 4.1 %)
MOVES_FLOOR = 0.1
# of what the phases left the final order: bucket moves from the final order, then `optimize` on the bucketing they
# reach (decision 97): POLISH_MOVES of it to the moves, the rest to the order; the fill and the windows change the
# order the moves first ran from, and a merge or split that did not pay there may pay here
# (llama3_8b_2d_L24_tp8_w256: TBB's buckets in overlapsat's order, 153.75 -> 152.62 ms with 1,805 moves)
POLISH_SHARE = 0.2
POLISH_MOVES = 0.75
JOINT_SHARE = 0.25  # of the time limit: the joint model of buckets and order (solver/joint.py), small graphs


@paused_gc()  # a search's tables are millions of small objects, and it leaves no reference cycles (gc_pause.py)
def optimize_plan(problem: Problem, price: Pricing, params: SolveParams | None = None, *,
                  transport: Any = None, **options: Any) -> Result:
    """Buckets and an order for `problem` (see `_optimize_plan` for the options), within its budget; where none
    was given (`Problem.of(g)`), within the input order's peak: a plan the user did not ask to grow never peaks
    above the order it replaces (decision 63; "none" says no budget). `transport`: a copy-engine
    table (`overlapsat.cost.transport.copy_engine`'s argument: "h100", a transport.json, a `CopyEngine`), under
    which each all_gather the table offers takes the cheaper transport (MODEL.md "Transport", decision 50): the
    plan is searched, bounded and proven on those prices, and `plan.transports` names the collectives of its
    bucketed graph that take the copy engine."""
    options.setdefault("started", TimeBudget.entry(options.get("clock")))  # the limit counts from here, checks too
    check_call(problem, price, options.get("starts"))
    problem = problem.with_default_budget()  # no budget given: the input order's peak (decision 63)
    check_floor(problem, "plan")  # below what some step holds in every order: no plan (decision 71), before any search
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
    return with_info(replace(r, graph=problem.graph, best=replace(r.best, transports=chosen)), copy_engine=len(chosen),
                     offered=r.stats["plan"]["transport"]["offered"])


def _optimize_plan(problem: Problem, price: Pricing, params: SolveParams | None = None, *,
                   max_evaluations: int | None = None, on_phase: Callable[[Progress], None] | None = None,
                   starts: dict[str, Sequence[Bucket | Sequence[str]]] | None = None,
                   unbucketed: Result | None = None,
                   solved: dict[str, tuple[Sequence[Bucket | Sequence[str]], Result]] | None = None,
                   extra_orders: dict[str, Sequence[str | int]] | None = None,
                   joint: bool = True, clock: TimeBudget | None = None, started: float | None = None,
                   **options: Any) -> Result:
    """Buckets and an order for `problem` (its graph unbucketed), priced by `price` (a cost model's
    `duration`). Deterministic: every step of the search is priced by the graph's size and drawn from one ledger
    of the time limit (ledger.py, decision 79), so the plan is the same on any machine and load; in timed mode
    the clock ends the search at `SEARCH_SHARE` of the time limit (`SEARCH_SHARE_LARGE` above `LARGE_NODES`
    nodes). `max_evaluations`: at most this many bucketings scored or judged, in either mode.
    `starts`: more warm starts by name (a peer's buckets, such as torch's OverlapScheduler's with bucketing on);
    each is judged by the whole portfolio and is a finalist, so the plan is never worse than the best order the
    portfolio finds for it (deterministic mode). An illegal one raises GraphError. `unbucketed`: `optimize`'s
    result on the same problem, where the caller has one; the plan is then never longer than it. `solved`:
    bucketings the caller has ordered already (name -> its buckets and `optimize`'s result on their bucketed graph,
    priced by `price`); the plan is never longer than any of them either. `extra_orders` (name -> an order of the
    unbucketed graph, by node name): orders from elsewhere, such as torch's OverlapScheduler's; each is judged
    with the input order, and the plan is never longer than any that is valid (an invalid one is not used).
    `joint=False`
    leaves out the joint CP-SAT model of buckets and order (decision 43; it runs only on small graphs, with
    `JOINT_SHARE` of the time). `clock`: the budget of a caller that runs this as one of its phases. `started`: when
    the call began on that clock (`optimize_plan`'s entry, so that its checks count against the limit)."""
    starts_given = starts
    price = laid_out(price, problem.bucket_layout)  # every bucketed graph below is the problem's layout
    if unbucketed is not None:
        if not isinstance(unbucketed, Result) or unbucketed.over != "orders":
            raise GraphError(f"unbucketed: expected optimize's Result on this problem, got {type(unbucketed).__name__}"
                             + (" over plans" if isinstance(unbucketed, Result) else ""))
        if not unbucketed.graph.same_as(problem.graph):
            raise GraphError(f"unbucketed: its result is of another graph ({unbucketed.graph.name!r}, fingerprint "
                             f"{unbucketed.graph.fingerprint()[:12]}) than this problem's ({problem.graph.name!r}, "
                             f"{problem.graph.fingerprint()[:12]}): other nodes or other prices")
        bad = validate(problem, unbucketed.names, limit=1)  # one violation per kind broken
        if bad and problem.budget_default and all(v.kind == "memory" for v in bad):
            log.info("plan: the unbucketed order given peaks above the default budget (the input order's peak); "
                     "not used")
            unbucketed = None
        elif bad:
            raise GraphError(f"unbucketed: not a valid order of this problem ({bad[0]})")
    if params is None:
        options.setdefault("collective_order", problem.collective_order)
        params = SolveParams.from_kwargs(**options)
    if params.collective_order != problem.collective_order:
        raise GraphError(f"collective_order {params.collective_order!r} differs from the Problem's "
                         f"{problem.collective_order!r}")
    params.say_one_worker(clock)
    if max_evaluations is None:  # the ledger (deterministic) or the clock (timed) ends the search
        max_evaluations = 2**62
    # the one clock of the call, from its entry (`started`): every phase below ends by its deadline
    tb = TimeBudget(params, parent=clock, started=started)
    if on_phase is not None:
        on_phase(Progress(0.0, math.inf, 0.0, "buckets"))
    g = problem.relaxed
    solved_given = solved_plans(problem, price, solved or {})
    starts_given = {name: as_buckets(g, given) for name, given in (starts_given or {}).items()}
    for name, given in starts_given.items():
        bad = bucket_problems(g, given)
        if bad:
            raise GraphError.from_problems(f"warm start {name!r}: illegal buckets", bad)
        bad = problem.over_cap(given)
        if bad:
            raise GraphError.from_problems(f"warm start {name!r}: outside the bucket policy", bad)
    extra = named_orders(g, extra_orders)
    try:
        return _search(problem, price, params, tb, g, starts_given, solved_given, unbucketed, max_evaluations,
                       on_phase, joint, extra)
    except (InfeasibleBudgetError, NoValidOrderError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - valid input: a failure inside the search keeps the unbucketed order
        log.exception("plan: the search failed; returning the best unbucketed order")
        return _unbucketed_fallback(problem, price, params, tb, unbucketed, e)


class Leader(NamedTuple):
    """The shortest bucketing the whole portfolio judged, with its graph and its passes' valid orders (none, without
    buckets, where no pass met the budget: decision 122): the final order starts from them rather than building the
    graph and running the passes again (decision 101). Only the
    passes' orders: the others judged there (the input order as given, orders from elsewhere) may depend on the
    file's layout, so they stay candidates, not starts."""

    buckets: tuple[Bucket, ...]
    graph: Graph
    passes: list[Evaluated]
    best: Evaluated  # the bucketing's best order judged, of any origin: what ranks it


@dataclass
class Judged:
    """The bucketings judged so far on the canonical graph `g`: by the few passes of the hill climb (`scored`) and
    by the whole portfolio (`full`), each by the best valid order found (None: none)."""

    problem: Problem
    price: Pricing
    params: SolveParams
    tb: TimeBudget
    share: float  # timed mode: the bucket search's share of the time limit
    max_evaluations: int
    reserve_s: float = 0.0  # kept for the phases after the search: building and ordering the chosen bucketing
    as_given: dict[str, list[str]] = field(default_factory=dict)  # the file's own order: a candidate with no buckets
    orders: dict[tuple[Bucket, ...], dict[str, list[str]]] = field(default_factory=dict)  # known valid orders, by name
    graphs: dict[tuple[Bucket, ...], Graph] = field(default_factory=dict)  # bucketed graphs already built
    passes: list[str] = field(default_factory=lambda: list(SCORE_PASSES))
    scored: dict[tuple[Bucket, ...], Evaluated | None] = field(default_factory=dict)
    full: dict[tuple[Bucket, ...], Evaluated | None] = field(default_factory=dict)
    unreachable: int = 0  # bucketings set aside unordered: the budget is below their memory floor (decision 94)
    leader: Leader | None = None  # the shortest bucketing the whole portfolio judged (decision 101)
    ledger: Ledger = field(init=False)  # every step priced (ledger.py); in deterministic mode it ends the phases

    def __post_init__(self) -> None:
        self.ledger = Ledger(plan_work(self.params), len(self.problem.relaxed.nodes))

    def affords(self, step: str, until: float, k: float = 1.0) -> bool:
        """Deterministic mode: whether the ledger has `k` more of `step` before `until`; timed mode: always (the
        clock decides)."""
        return not self.params.deterministic or self.ledger.affords(step, until, k)

    def _score_k(self) -> float:
        return len(self.passes) / len(SCORE_PASSES)  # a score costs its passes' runs

    @property
    def g(self) -> Graph:
        return self.problem.relaxed

    def row(self, bs: tuple[Bucket, ...], include: list[str] | None) -> Evaluated | None:
        """The best valid order of the passes `include` (None: the whole portfolio) on the bucketed graph."""
        try:
            h = self.graphs.pop(bs, None) or materialize(self.g, list(bs), self.price)
        except GraphError:  # buckets that leave no valid place (a cycle, an atomic group): no plan
            return None
        if include is None and bs and self.problem.budget is not None:  # decision 94: a bucketing no order of
            self.ledger.charge("floor")  # which fits the budget (proven) is not judged, at a tenth of the price
            if peak_floor(h)[0] > self.problem.budget:
                self.ledger.charge("graph")
                self.unreachable += 1
                return None
        # no pass starts past JUDGE_SHARE of the time: one pass is not interrupted, and the phases after the search
        # need the rest (a deterministic run cut there is flagged). Only the judgment without buckets, the first,
        # far from that deadline, fits the orders nearest the budget where none is valid (decision 91): elsewhere
        # the clock would decide whether they run
        deadline = self.judge_deadline()
        passes = [r for r in run_all(self.problem.on(h), include=include, work_limit=self.params.portfolio_steps,
                                     deadline=deadline, fits=1 if include is not None else FIT_ORDERS,
                                     prefetch=1 if include is not None else PREFETCH_ORDERS,
                                     nearest=FIT_ORDERS if include is None and not bs else 0) if r.valid]
        rows = list(passes)
        if not bs:  # the order the plan replaces: within a default budget by definition (decision 63)
            rows += [r for r in evaluate_named(self.problem.on(h), self.as_given) if r.valid]
        rows += [r for r in evaluate_named(self.problem.on(h), self.orders.get(bs, {})) if r.valid]
        if time.monotonic() > deadline and self.params.deterministic:
            self.tb.cut_by_wall_clock = True
        if include is None:
            self.ledger.charge("judge")
        else:
            self.ledger.charge("score", self._score_k())
        if not rows:
            return None
        best = min(rows, key=rank_key)
        # without buckets, a leader whose passes found no valid order is kept too: they ran with every fit the final
        # order's would, which would only run them again, for none (decision 122: 2-3 s of a 10-s plan at 13,403
        # nodes, under a budget no pass meets). With buckets, the final order's passes fit the orders nearest the
        # budget too, which these did not
        if include is None and (passes or not bs) and (self.leader is None or rank_key(best) < rank_key(self.leader.best)):
            self.leader = Leader(bs, h, passes, best)
        return best

    def leading(self, bs: tuple[Bucket, ...]) -> Leader | None:
        """The leader, where `bs` is its bucketing."""
        return self.leader if self.leader is not None and self.leader.buckets == bs else None

    def judge_deadline(self) -> float:
        """When no pass judging a bucketing may start (time.monotonic): past `JUDGE_SHARE` of the time, or the
        deadline less the reserve, whichever comes first."""
        return self.tb.monotonic(min(self.tb.at(JUDGE_SHARE), self.tb.deadline - self.reserve_s))

    def score(self, bs: tuple[Bucket, ...]) -> Evaluated | None:
        if bs not in self.scored:
            self.scored[bs] = self.row(bs, self.passes)
        return self.scored[bs]

    def judge(self, bs: tuple[Bucket, ...]) -> Evaluated | None:
        """The whole portfolio's best order of `bs`; where the ledger has no judgment left before `JUDGE_END`
        (deterministic mode), the score's."""
        if bs not in self.full:
            if not self.affords("judge", JUDGE_END):
                return self.score(bs)
            self.full[bs] = self.row(bs, None)
        return self.full[bs]

    def best_known(self, bs: tuple[Bucket, ...]) -> Evaluated | None:
        """The better of what the portfolio and the score found for `bs`, as far as they ran."""
        cands = [x for x in (self.full.get(bs), self.scored.get(bs)) if x is not None]
        return min(cands, key=rank_key) if cands else None

    def ms(self, bs: tuple[Bucket, ...]) -> float:
        """The score's makespan (inf: no valid order, or not scored before the clock ran out)."""
        if bs not in self.scored and self.late():
            return math.inf
        e = self.score(bs)
        return e.makespan if e is not None else math.inf

    def judged(self, bs: tuple[Bucket, ...]) -> float:
        e = self.best_known(bs)
        return e.makespan if e is not None else math.inf

    def late(self) -> bool:
        """Timed: past the search's share; both: past the deadline less the reserve (flagged in deterministic mode,
        where the work, not the clock, should end the search)."""
        if self.tb.clock() >= self.tb.deadline - self.reserve_s:
            if self.params.deterministic:
                self.tb.cut_by_wall_clock = True
            return True
        return not self.params.deterministic and self.tb.elapsed() > self.share * self.params.time_limit

    def out_of_budget(self) -> bool:
        return len(self.scored) + len(self.full) >= self.max_evaluations or self.late() \
            or not self.affords("score", SEARCH_SHARE, self._score_k())


@dataclass
class StartStats:
    scores: dict[str, float]  # each warm start's best judged makespan (inf: none valid, or not judged in time)


@dataclass
class ClimbStats:
    tried: int = 0
    accepted: int = 0
    first_move_s: float | None = None  # when a move first beat the best warm start


@dataclass
class PlanSearch:
    """The state of one plan search on the canonical form (`problem`) of the problem as given (`given`): the
    bucketings judged, the warm starts, and the best bucketing with its bucketed graph and best orders so far.
    Its phases are its methods, run in order by `run`."""

    given: Problem
    problem: Problem
    price: Pricing
    params: SolveParams
    tb: TimeBudget
    judge: Judged
    peer_given: tuple[Bucket, ...]  # torch's buckets of the given order: the peer a user gets by default
    starts_given: dict[str, tuple[Bucket, ...]]
    on_phase: Callable[[Progress], None] | None = None
    moves_share: float = MOVES_SHARE
    moves_given: int = 0  # deterministic mode: the count the moves phase was given (the polish makes up the floor)
    unbucketed_given: list[str] | None = None  # the caller's best unbucketed order (names), read where needed
    starts: dict[str, tuple[Bucket, ...]] = field(default_factory=dict)
    best: tuple[Bucket, ...] = ()
    finalists: list[tuple[Bucket, ...]] = field(default_factory=list)
    ranked: list[tuple[Bucket, ...]] = field(default_factory=list)
    h: Graph | None = None  # the best bucketing's graph
    extra: dict[str, list[int]] = field(default_factory=dict)  # its best orders by name, for the final search
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def g(self) -> Graph:
        return self.problem.relaxed

    def warm_starts(self) -> StartStats:
        """No buckets, torch's greedy bucketer at each cap (the default cap's from the given order), the peers
        given, and under a budget the buckets the best unbucketed order leaves room for (`room.py`, decision 76);
        each judged by the whole portfolio (timed mode on a large graph: scored only), whose winning pass joins the
        few the hill climb scores by (where Inductor's iterative passes win, the linear ones mislead)."""
        j, g = self.judge, self.g
        self.starts = {"no buckets": ()}
        for cap in CAPS_MB:
            if cap != CAPS_MB[0] and (j.late() or not j.affords("greedy", SEARCH_SHARE)):
                break  # torch's bucketer walks the graph: seconds at 36k nodes
            bs = as_buckets(g, self.peer_given) if cap == CAPS_MB[0] else torch_greedy(self.problem, g, cap)
            j.ledger.charge("greedy")
            if bs not in self.starts.values():
                self.starts[f"torch greedy, {cap:g} MB"] = bs
        for name, bs in self.starts_given.items():
            if bs not in self.starts.values():
                self.starts[name] = bs
        large_timed = not self.params.deterministic and len(g.nodes) > LARGE_NODES
        rows: dict[str, Evaluated | None] = {"no buckets": None if j.late() else j.judge(())}
        roomy = _contained("the starts within the budget's room", lambda: self.room_starts(rows["no buckets"]))
        if isinstance(roomy, dict):  # it failed (logged): the other starts stand
            self.stats["room_error"] = roomy["error"]
            roomy = []
        # judged first (where a deterministic count runs out): no buckets, torch's default, the peers given; the
        # buckets within the budget's room last (scored past the count, their known order among the few passes)
        first_judged = ["no buckets", DEFAULT_PEER, *self.starts_given]
        ranked = sorted(self.starts, key=lambda name: first_judged.index(name) if name in first_judged
                        else len(first_judged) + (name in roomy))
        for name in ranked[1:]:
            rows[name] = None if j.late() else j.judge(self.starts[name]) if not large_timed \
                else j.score(self.starts[name])
        scores = {name: rows[name].makespan if rows[name] is not None else math.inf  # type: ignore[union-attr]
                  for name in self.starts}
        first = min(self.starts, key=lambda k: (scores[k], len(self.starts[k])))
        won = j.full.get(self.starts[first])
        if won is not None and won.name in pipelines() and won.name not in j.passes:
            j.passes.insert(0, won.name)
        self.stats["starts"] = scores
        return StartStats(scores)

    def room_starts(self, unbucketed: Evaluated | None) -> list[str]:
        """Under a budget: for each cap of `ROOM_CAPS_MB` that the time limit allows, the buckets the best
        unbucketed order known (the portfolio's, or the one the caller gave) leaves room for, each with that order
        read on its bucketed graph as a known valid order (`room.py`); the names of the starts added."""
        j, g = self.judge, self.g
        account = j.ledger
        # counted to the end of judging, not of the search's share, which the starts before them and a caller's
        # solved bucketings may have taken: under a budget they are the starts that count most (decision 108)
        count = min(int(ROOM_SHARE * account.total_s / account.price("room")), account.how_many("room", JUDGE_END))
        if self.problem.budget is None or count == 0:
            return []
        given = None if self.unbucketed_given is None else \
            evaluate(self.problem, "unbucketed order given", g.order_indices(self.unbucketed_given))
        known = [e for e in (unbucketed, given) if e is not None and e.valid]
        if not known:
            return []
        base = min(known, key=rank_key)
        order = [g.index[base.sim.graph.names[v]] for v in base.order]
        added: list[str] = []
        checks = Checks(count)  # one exact check per start, and its repairs from the same count
        for cap in ROOM_CAPS_MB[:count]:
            if j.late() or checks.left <= 0:
                break
            room = room_buckets(self.problem, g, order, self.price, cap * MIB, checks)
            if room is None or room.buckets in self.starts.values():
                continue
            name = f"within the budget, {cap:g} MB"
            self.starts[name] = room.buckets
            j.orders[room.buckets] = {f"{name}, on the best unbucketed order": room.order}
            j.graphs[room.buckets] = room.graph
            added.append(name)
        account.charge("room", count - checks.left)
        return added

    def hill_climb(self) -> ClimbStats:
        """From the best warm start, the first improving neighbour while the count allows; then again from the next
        starts (another basin). The best climbed bucketing, and the finalists beside it, each judged by the whole
        portfolio: the best scored ones, torch's default peer (so the plan is never worse than it) and the peers."""
        j, g, out = self.judge, self.g, ClimbStats()
        scores = self.stats["starts"]
        order = sorted(self.starts, key=lambda k: (scores[k], len(self.starts[k])))
        climbed: list[tuple[Bucket, ...]] = []
        for k, name in enumerate(order):
            if k and j.out_of_budget():
                break
            cur = self.starts[name]
            improved = True
            while improved and not j.out_of_budget():
                improved = False
                here = j.best_known(cur)
                for cand in neighbours(g, cur, here.sim.collective_exposure() if here is not None else None):
                    if j.out_of_budget():
                        break
                    if self.problem.over_cap(cand):  # outside the bucket policy: not a plan of this problem
                        continue
                    out.tried += 1
                    if j.ms(cand) < j.ms(cur) - 1e-9:
                        cur, improved, out.accepted = cand, True, out.accepted + 1
                        if k == 0 and out.first_move_s is None:
                            out.first_move_s = self.tb.elapsed()
                        break
            climbed.append(cur)
        best = min(climbed, key=lambda bs: (j.ms(bs), len(bs)))
        peer = self.starts.get(DEFAULT_PEER, ())
        self.ranked = sorted((bs for bs, e in j.scored.items() if e is not None), key=lambda bs: (j.ms(bs), len(bs)))
        self.finalists = list(dict.fromkeys([best, *self.ranked[:FINALISTS], peer, *self.starts_given.values()]))
        for bs in self.finalists:
            if not j.late():  # timed mode, out of the search's share: the scores alone decide
                j.judge(bs)
        self.best = min(self.finalists, key=lambda bs: (j.judged(bs), len(bs), self.finalists.index(bs)))
        row = j.best_known(self.best)
        self.extra = {f"best scoring pass ({row.name})": row.order} if row is not None else {}
        lead = j.leading(self.best)
        self.h = lead.graph if lead is not None else materialize(g, list(self.best), self.price)
        self.stats["moves"] = {"tried": out.tried, "accepted": out.accepted}
        self.stats["first_move_s"] = out.first_move_s
        return out

    def order_moves(self) -> dict[str, Any]:
        """Bucket moves that keep the order, from the best finalists' best orders (another basin each), the count
        shared: no graph is built per move, so many more are tried than the hill climb scores (bucket_moves.py)."""
        j, g, p = self.judge, self.g, self.params
        assert self.h is not None
        t_moves = time.monotonic()
        origins = [bs for bs in sorted(self.finalists, key=lambda bs: (j.judged(bs), len(bs)))
                   if j.best_known(bs) is not None]
        origins = list(dict.fromkeys([self.best, *origins]))[:MOVE_STARTS]
        j.ledger.charge("graph", len(origins) - 1)  # the other origins' bucketed graphs
        budget_moves = max(MOVES_MIN, j.ledger.how_many("move", SEARCH_SHARE + self.moves_share))
        self.moves_given = budget_moves // len(origins) * len(origins) if p.deterministic else 0
        confirm, budget = move_checks(self.problem, self.price)
        runs = []
        for k, bs in enumerate(origins):
            hk = self.h if bs == self.best else materialize(g, list(bs), self.price)
            end_k = t_moves + (k + 1) / len(origins) * self.moves_share * p.time_limit
            row = j.best_known(bs)
            assert row is not None
            runs.append(alternate(g, self.price, bs, [hk.names[v] for v in row.order],
                                  budget_moves // len(origins) if p.deterministic else 2**62,
                                  _Late(j, p.deterministic, end_k), j.score, confirm, sequences(self.problem),
                                  budget=budget, early=early_merges(self.problem)))
        mv = min(runs, key=lambda r: r.makespan)
        tried = sum(r.tried for r in runs)
        j.ledger.charge("move", tried)
        firsts = [t for r in runs if (t := r.first_s) is not None]
        out: dict[str, Any] = {"starts": len(runs), "given": self.moves_given, "tried": tried,
                               "accepted": sum(r.accepted for r in runs), "refused": sum(r.refused for r in runs),
                               "seconds": time.monotonic() - t_moves,
                               "first_kept_s": t_moves - self.tb.t0 + min(firsts) if firsts else None}
        kept = checked(self.problem, self.price, mv.buckets, mv.order) if mv.accepted else None
        if kept is not None and self._better(kept[2]):
            self.best, self.h = kept[0], kept[1]
            self.extra = {"bucket moves keeping the order": [self.h.index[nm] for nm in mv.order]}
            out["used"] = True
        return out

    def joint_model(self) -> tuple[dict[str, Any], float]:
        """The joint CP-SAT model, warm-started from the best plan so far: a better plan where it finds one, and a
        bound over every plan where its candidates are every legal bucket (decision 43)."""
        assert self.h is not None
        start_order = self.extra[next(iter(self.extra))] if self.extra else None
        # its work is its whole charge, or its share of the caller's work limit (less CP-SAT's start, solve_joint),
        # priced at `DT_SCALE_JOINT` (decision 98)
        p = self.params
        share = replace(with_time(p, JOINT_SHARE), work_limit=JOINT_SHARE * (p.time_limit if p.work_limit is None
                                                                             else p.work_limit))
        jr = solve_joint(self.problem, self.price, share,
                         (self.best, [self.h.names[v] for v in start_order]) if start_order is not None else None,
                         clock=self.tb)
        if "skipped" not in jr.stats:
            self.judge.ledger.charge_s("joint", JOINT_SHARE * self.judge.ledger.total_s)
        out: dict[str, Any] = {k: jr.stats.get(k) for k in ("skipped", "candidates", "complete", "solver_status",
                                                           "error", "under_budget", "memory_steps") if k in jr.stats}
        out["bound_us"] = jr.bound
        better = checked(self.problem, self.price, jr.buckets, jr.order)
        if better is not None and self._better(better[2]):
            self.best, self.h = better[0], better[1]
            self.extra = {"joint model": [self.h.index[nm] for nm in jr.order]}  # type: ignore[union-attr]
            out["used"] = True
        return out, jr.bound

    def final_order(self, others: Sequence[tuple[tuple[Bucket, ...], Result]] = ()) -> Result:
        """`optimize` on the chosen bucketing's graph with what the phases left of the ledger, less the bound's
        share (deterministic: as work, the same plan on every machine), or what is left of the clock, less the
        polish's share (`polish`, from the shortest of that order and the caller's `others`); where that
        bucketing has no order within the budget, the others (`_rescue`)."""
        p = self.params
        lift = self.lift.time_limit if len(self.g.nodes) <= LIFT_NODES else 0.0  # the bound's share, kept back
        if p.deterministic:  # a share of the ledger's total: the caller's work, or the time limit (decision 102)
            led = self.judge.ledger  # its time limit too, which sets optimize's counts: the parent's clock ends it
            left = max(FINAL_SHARE_MIN, FINAL_FIT * led.left_s(lift) / led.total_s)
            final = replace(p, time_limit=left * led.total_s,
                            work_limit=None if p.work_limit is None else left * p.work_limit)
            led.final_s = final.time_limit
        else:  # the clock: what is left of the time limit, less the bound's share
            final = replace(p, time_limit=max(0.01, p.time_limit - self.tb.elapsed() - lift))
        # the polish's share comes out of the final order's work, not its clock (deterministic: a wall cap cut
        # by a fifth left a slow machine's portfolio no time to search, and the plan then hung on the clock)
        first = replace(final, work_limit=(1 - POLISH_SHARE) * final.total_work) if p.deterministic else \
            replace(final, time_limit=(1 - POLISH_SHARE) * final.time_limit)
        assert self.h is not None
        # timed: the bound after it is promised its share of the clock. Deterministic: the plan comes first (decision
        # 98): a final order that runs slower than its work was priced at takes the bound's share, so that the plan
        # stays a function of the work on a slow or loaded machine, and the bound is what the clock then cuts
        clock = self.tb.reserving(lift) if lift and not p.deterministic else self.tb
        try:
            # no buckets: views kept. A bucketed graph of the canonical form is listed the same for every layout
            # (`plan.placing`): its own canonical form, so the passes run once, on it (decision 101)
            inner = self.problem if self.h is self.g else self.problem.on(self.h).own_canonical()
            extra = {**self.extra, **(self.judge.as_given if self.h is self.g else {})}
            lead = self.judge.leading(self.best)  # the portfolio's orders of this very graph, where it judged them
            given = lead.passes if lead is not None and lead.graph is self.h else None
            res = optimize(inner, first, on_phase=self.on_phase, heuristic_results=given, extra_orders=extra or None,
                           clock=clock)
        except (InfeasibleBudgetError, NoValidOrderError) as e:  # this bucketing has no order within the budget
            log.info("plan: no order of the chosen bucketing meets the budget (%s); trying the others", e)
            self.best, self.h, res = _rescue(self.problem, self.price, final, self.tb, self.judge.as_given,
                                             [self.best, *self.finalists, *self.ranked], e)
            return res
        out = _contained("the polish", lambda: self.polish(res, others, final, lift, clock))
        return out if isinstance(out, Result) else res

    def polish(self, res: Result, others: Sequence[tuple[tuple[Bucket, ...], Result]], final: SolveParams,
               lift: float, clock: TimeBudget) -> Result:
        """Decision 97: bucket moves that keep the order, from the shortest of the final order and `others` (the
        caller's ordered bucketings and unbucketed order: the plan it would get), for most of the polish's share (a
        count priced by the ledger, or the clock: `POLISH_MOVES` of the share; deterministic: with the moves phase's,
        at least `MOVES_FLOOR` of the ledger, decision 121); then `optimize` on the bucketing they reach with their
        order as a candidate (the rest), or that order itself where the rest cannot pay for ordering the graph. The
        result where it is shorter than that start, else `res`."""
        p, j = self.params, self.judge
        assert self.h is not None
        share = POLISH_MOVES * POLISH_SHARE * final.time_limit
        t0 = time.monotonic()
        # what the moves phase was given, not what it tried: moves that converged early leave no floor to make up
        floor = int(MOVES_FLOOR * j.ledger.total_s / j.ledger.price("move")) - self.moves_given
        moves = max(MOVES_MIN, int(share / j.ledger.price("move")), floor) if p.deterministic else 2**62
        end = t0 + (share if p.deterministic else POLISH_MOVES * max(0.0, p.time_limit - self.tb.elapsed() - lift))
        (bs, r0), which = min(((c, k) for k, c in enumerate([(self.best, res), *others])),
                              key=lambda ck: (ck[0][1].makespan, ck[1]))
        bs, start = self._listed_here(bs, [r0.graph.names[v] for v in r0.order])
        confirm, budget = move_checks(self.problem, self.price)
        mv = order_preserving_search(self.g, self.price, bs, start, moves, _Late(j, p.deterministic, end),
                                     confirm, sequences(self.problem), budget, early_merges(self.problem))
        stats: dict[str, Any] = {"from": "the final order" if which == 0 else "the caller's", "given": moves,
                                 "tried": mv.tried,
                                 "accepted": mv.accepted, "refused": mv.refused, "before_us": r0.makespan,
                                 "moves_us": mv.makespan if mv.accepted else None,
                                 "seconds": time.monotonic() - t0, "used": False}
        self.stats["polish"] = stats
        kept = checked(self.problem, self.price, mv.buckets, mv.order) if mv.accepted else None
        if kept is None or kept[2] >= r0.makespan - 1e-9 * max(1.0, r0.makespan):
            return res
        bs, h, _ = kept
        rest = replace(final, time_limit=max(0.01, p.time_limit - self.tb.elapsed() - lift))  # the clock left
        name, ids = "bucket moves after the final order", [h.index[nm] for nm in mv.order]
        if p.deterministic:  # the work the moves did not take of the polish's share, and counts from it, not from
            # the clock (decision 102: the time limit sets optimize's counts; the parent's clock ends it)
            rest = replace(rest, time_limit=(1 - POLISH_MOVES) * POLISH_SHARE * final.time_limit,
                           work_limit=(1 - POLISH_MOVES) * POLISH_SHARE * final.total_work)
        if p.deterministic and rest.time_limit < RESERVE_S_PER_NODE * len(h.nodes):
            # too little work to order this graph at all: the clock would cut its passes, and the plan would then
            # depend on the machine (decision 121). The moves' order is the plan
            again = order_result(self.problem.on(h), name, ids,
                                 f"{name}: the polish's share left too little work to order its graph again")
        else:
            again = optimize(self.problem.on(h).own_canonical(), rest, on_phase=self.on_phase, clock=clock,
                             extra_orders={name: ids})
        stats["after_us"] = again.makespan
        if again.makespan >= r0.makespan - 1e-9 * max(1.0, r0.makespan):
            return res
        self.best, self.h = bs, h
        stats["used"] = True
        return again

    def _listed_here(self, bs: tuple[Bucket, ...], order: list[str]) -> tuple[tuple[Bucket, ...], list[str]]:
        """Buckets of another listing of this graph (the caller's, on the graph as given) with their members in
        this graph's order, and an order of their bucketed graph by name, renamed to match."""
        new, renamed = in_graph_order(self.g, bs)
        return (tuple(sorted(new, key=lambda b: self.g.index[b.members[0]])), [renamed.get(nm, nm) for nm in order])

    @property
    def lift(self) -> SolveParams:
        """The bound's share: CP-SAT on the relaxation over every bucketing, for a higher bound."""
        p = self.params  # deterministic: a share of the ledger's total, and of the caller's work (decision 102)
        return replace(p, time_limit=max(0.2, BOUND_SHARE * (plan_work(p) if p.deterministic else p.time_limit)),
                       work_limit=None if p.work_limit is None else BOUND_SHARE * p.work_limit)

    def _better(self, makespan: float) -> bool:
        now = self.judge.judged(self.best)
        return makespan < now - 1e-9 * max(1.0, now)


class _Late:
    """When a bucket-moves run must stop: at the call's deadline (flagged in deterministic mode), or in timed mode
    at its own end."""

    def __init__(self, judged: Judged, deterministic: bool, end: float) -> None:
        self.judged, self.deterministic, self.end = judged, deterministic, end

    def __call__(self) -> bool:
        return self.judged.late() or (not self.deterministic and time.monotonic() > self.end)


def _search(problem: Problem, price: Pricing, params: SolveParams, tb: TimeBudget, g: Graph,
            starts_given: dict[str, tuple[Bucket, ...]], solved_given: dict[str, tuple[tuple[Bucket, ...], Result]],
            unbucketed: Result | None, max_evaluations: int, on_phase: Callable[[Progress], None] | None,
            joint: bool, extra_orders: dict[str, list[str]] | None = None) -> Result:
    """The phases of a plan search on inputs `_optimize_plan` has checked. It runs on a canonical form
    (`plan_canonical`), so that the plan does not depend on how the file lists the nodes (only torch's default
    peer is taken from the given order, as its bucketer walks it, and a plan built on it says so; decisions 58
    and 61)."""
    given, peer_given = problem, torch_greedy(problem, g, CAPS_MB[0])
    as_given = {"input order as given": list(given.relaxed.names)}  # what the plan replaces, always a candidate
    as_given.update(extra_orders or {})  # orders from elsewhere (torch's OverlapScheduler's): candidates too
    problem, on_given = plan_canonical(problem, tb)  # on_given: the clock left no time for the canonical form
    problem = floor_checked(problem)  # `optimize_plan` checked the floor of the graph as given
    g = problem.relaxed
    starts_given = {name: as_buckets(g, bs) for name, bs in starts_given.items()}
    space = all_bucketings(g, EXHAUSTIVE_BUCKETINGS)
    space = [bs for bs in space if not problem.over_cap(bs)] if space is not None else None
    if space is not None:  # few enough to order each (the starts are among them)
        if unbucketed is None:  # the passes from the order as given: a candidate with no buckets (decision 85)
            _contained("the input order's portfolio", lambda: as_given.update(input_portfolio(given, params, tb)))
        out = on_given_graph(given, price, tb, keep_solved(problem, keep_unbucketed(
            problem, order_every_bucketing(problem, price, params, space, tb, as_given), unbucketed), solved_given))
        return said_to_depend_on_input_order(out, canonical_form=False) if on_given else out
    # timed mode on a large graph: judging one bucketing costs about half a second at 16k nodes, and the order
    # search after it rarely improves on the best pass's order, so the bucket search gets the larger share
    large_timed = not params.deterministic and len(g.nodes) > LARGE_NODES
    share, moves_share = (SEARCH_SHARE_LARGE - MOVES_SHARE_LARGE, MOVES_SHARE_LARGE) if large_timed \
        else (SEARCH_SHARE, MOVES_SHARE)
    judged = Judged(problem, price, params, tb, share, max_evaluations,
                    reserve_s=min(params.time_limit, RESERVE_S_PER_NODE * len(g.nodes)), as_given=as_given)
    if solved_given:  # checked before the search (`solved_plans`): their work is the call's too (decision 100)
        judged.ledger.charge("solved", len(solved_given))
    # the analytical bound over every bucketing first, where it costs a small share of the limit: the search's
    # phases may run past their shares of the clock, and the bound should not be what they leave out
    early = analytical_over_bucketings(problem, price) \
        if BOUND_S_PER_NODE * len(g.nodes) <= EARLY_BOUND_SHARE * params.time_limit else None
    if early is not None:
        judged.ledger.charge("bound")
    if unbucketed is None and judged.affords("judge", JUDGE_END):  # optimize's other start (decision 85)
        deadline = judged.judge_deadline()
        _contained("the input order's portfolio", lambda: as_given.update(input_portfolio(given, params, tb, deadline)))
        judged.ledger.charge("judge")
    ps = PlanSearch(given, problem, price, params, tb, judged, peer_given, starts_given, on_phase, moves_share)
    if unbucketed is not None:  # the caller's order, a base for the room starts
        ps.unbucketed_given = list(unbucketed.names)
    ps.warm_starts()
    ps.hill_climb()
    mstats = _contained("the bucket moves", ps.order_moves) if ps.judge.best_known(ps.best) is not None else {}
    jstats, jbound = _contained("the joint model", ps.joint_model) if joint else \
        ({"skipped": "joint=False", "bound_us": 0.0}, 0.0)
    res = ps.final_order([*solved_given.values(), *([((), unbucketed)] if unbucketed is not None else [])])
    # the clock left for the stronger bound: where the analytical one is still to compute under a budget, its price
    # with the memory floor, the overlap bound and the pairs a budget keeps apart (decision 106)
    late = BOUND_S_PER_NODE if early is not None or problem.budget is None else BUDGETED_BOUND_S_PER_NODE
    bound_fits = tb.wall_left() > late * len(g.nodes)
    # the bound does not change the plan: what the clock cuts of it is said of the bound (decision 98), and the
    # plan's own flag says only whether the clock chose the plan (decision 57)
    bclock = tb.apart()
    if early is not None:  # lifted where the clock allows (a bound either way)
        over = bound_over_bucketings(problem, price, ps.lift if bound_fits else None, clock=bclock, analytical=early)
    else:
        over = bound_over_bucketings(problem, price, ps.lift, clock=bclock) if bound_fits else kernel_bound(g)
    bound, notes = over.bound, over.notes
    weaker = not bound_fits and (early is None or len(g.nodes) <= LIFT_NODES)  # the clock chose a weaker bound
    if params.deterministic and (bclock.cut_by_wall_clock or weaker):
        notes = [*notes, bound_cut_note(tb)]
    unb = ps.judge.full.get(())
    log.info("plan: %d buckets, makespan %.1f us (%d bucketings scored, %d moves accepted)", len(ps.best),
             res.makespan, len(ps.judge.scored), ps.stats["moves"]["accepted"])
    rows = {name: replace(e, buckets=bs) for name, bs in [(DEFAULT_PEER, ps.starts.get(DEFAULT_PEER, ())),
                                                          *starts_given.items()] if (e := ps.judge.full.get(bs)) is not None}
    if jbound > bound and jstats.get("under_budget"):  # the joint model's bound, proven within the budget
        notes = [*notes, JOINT_UNDER_BUDGET]
    out = as_plan(problem, res, ps.best, max(bound, jbound), notes,
                  {**ps.stats, "bucketings_scored": len(ps.judge.scored), "bucketings_judged": len(ps.judge.full),
                   "bucketings_unreachable": ps.judge.unreachable,
                   "ledger": ps.judge.ledger.stats(),
                   "plan_search_s": tb.elapsed() - res.stats.get("total_s", 0.0), "joint": jstats,
                   "order_moves": mstats, "unbucketed_us": finite_or_none(unb.makespan) if unb is not None else None,
                   "relaxation_reach_us": over.reach_us}, rows)
    out = on_given_graph(given, price, tb, keep_solved(problem, keep_unbucketed(problem, out, unbucketed), solved_given))
    if problem is not given and ps.best == ps.starts.get(DEFAULT_PEER) \
            and peer_given != torch_greedy(problem, g, CAPS_MB[0]):
        out = said_to_depend_on_input_order(out)  # torch's buckets of the given order won
    won = judged.full.get(())
    if won is not None and won.name.startswith(INPUT_PORTFOLIO):  # the base of every room start, and a candidate
        out = said_to_depend_on_input_order(out, unbucketed_from=won.name)
    if on_given:  # searched on the order as given: another layout may give another plan
        out = said_to_depend_on_input_order(out, canonical_form=False)
    return out


def plan_work(params: SolveParams) -> float:
    """The plan search's work in reference seconds, the ledger's total: the caller's `work_limit` where given, else
    the time limit (decision 102). With a work limit and a time limit long enough for it, a deterministic plan is the
    same on a slow or loaded machine: the clock, a safety, does not cut it."""
    return params.work_limit if params.work_limit is not None else params.time_limit


def input_portfolio(given: Problem, params: SolveParams, tb: TimeBudget,
                    deadline: float | None = None) -> dict[str, list[str]]:
    """Inductor's passes from the order as given, on the unbucketed graph, as `optimize` runs them beside its
    canonical form (search.py `Portfolio`): their best valid order by node name, under `INPUT_PORTFOLIO` (empty
    where none is valid, or none beats the input order, a candidate already). The caller adds it to the
    candidates with no buckets, so that the plan is never longer than it, and where it wins the buckets within
    the budget's room are read on it. The passes refine the order they start from, and the canonical form's
    order can peak far above a budget the captured one meets (every pass from it was over torch bucketed's peak
    on a 2-D backward graph of the corpus: decision 85). A plan whose unbucketed candidate is this order depends
    on the file's node order, and says so. `deadline` (time.monotonic): no pass starts later."""
    report: dict[str, list[str]] = {}
    rows = [r for r in run_all(given, work_limit=params.portfolio_steps, report=report, deadline=deadline)
            if r.valid and r.name != "input_order"]  # the input order itself is a candidate already
    if report.get("deadline") and params.deterministic:
        tb.cut_by_wall_clock = True  # the clock, not the work, left passes out: flagged (decision 57)
    if not rows:
        return {}
    best = min(rows, key=rank_key)
    names = given.relaxed.names
    return {f"{INPUT_PORTFOLIO}: {best.name}": [names[v] for v in best.order]}


def named_orders(g: Graph, orders: dict[str, Sequence[str | int]] | None) -> dict[str, list[str]]:
    """`optimize_plan`'s `extra_orders` by node name (the search runs on a canonical form, whose ids differ from
    the graph's as given); an order naming nodes `g` lacks, or a reserved name, raises GraphError."""
    out: dict[str, list[str]] = {}
    for name, order in (orders or {}).items():
        if not isinstance(name, str) or name == "input order as given":
            raise GraphError(f"extra_orders: {name!r} is not a usable name for an order (a string other than "
                             f"'input order as given')")
        if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
            raise GraphError(f"extra_orders: {name!r} is not a list of node names, got {type(order).__name__}")
        try:
            ids = g.order_indices(order)
        except GraphError as e:
            raise GraphError.from_problems(f"extra_orders: {name!r} names nodes this graph lacks", e.problems) from None
        out[name] = [g.names[i] for i in ids]
    return out


def plan_canonical(problem: Problem, tb: TimeBudget | None = None) -> tuple[Problem, bool]:
    """The problem on a canonical form of its relaxed graph, the same for every file layout, on which the plan
    search runs (decisions 58 and 61). At free, `optimize`'s; elsewhere the canonical order that keeps the
    collective sequence ("global"; "chain" at chain), so that each bucketed graph is the one the graph as given
    makes (`plan.placing`): the same plans, searched from the same node order whatever the file's. Where `tb` has
    less left than the form costs (`CANONICAL_S_PER_NODE`), the problem as given, its order as its own form, and the
    clock's cut said (decision 105, as decision 64 for `optimize`), and True: the caller says the plan depends on the
    layout."""
    level = problem.collective_order
    g, order = problem.relaxed, "chain" if level == "chain" else level if level == "free" else "global"
    known = is_kept(g, order) or (level == "free" and problem.canonical_known)  # built already: it costs nothing
    price = CANONICAL_S_PER_NODE * len(g.nodes)
    # no time for the form: a cut (flagged where deterministic), unless its price takes the whole limit (128)
    if tb is not None and not known and tb.cut(price):
        log.info("plan: %.2f s left, the canonical form priced at %.2f s: the search runs on the order as given (its "
                 "plan may depend on the file's node order)", tb.wall_left(), price)
        return problem.own_canonical(), True
    if level == "free":
        return problem.canonical, False
    # the same for every layout: `optimize` on it need not redo it (0.5 s at 36k nodes)
    return problem.on(kept_canonical(g, order)).own_canonical(), False


def _contained(what: str, phase: Callable[[], Any]) -> Any:
    """A phase whose failure must not cost the search's plan (the brief): its statistics, or the error."""
    try:
        return phase()
    except Exception as e:  # noqa: BLE001 - logged with its traceback, and kept in the statistics
        log.exception("plan: %s failed; the search's plan is kept", what)
        err = {"error": f"{type(e).__name__}: {e}"}
        return (err, 0.0) if what == "the joint model" else err


def _unbucketed_fallback(problem: Problem, price: Pricing, params: SolveParams, tb: TimeBudget,
                         unbucketed: Result | None, error: Exception) -> Result:
    """The best unbucketed order as a plan with no buckets (the caller's where given, else `optimize`'s in the
    time left), after an internal failure of the search, with the analytical bound over every plan."""
    res = unbucketed or optimize(problem, replace(params, time_limit=max(0.01, tb.wall_left())), clock=tb)
    why = f"internal error in the plan search ({type(error).__name__}: {error}); the best unbucketed order instead"
    over = bound_over_bucketings(problem, price)
    out = as_plan(problem, res, (), over.bound, over.notes, {"error": why, "unbucketed_us": finite_or_none(res.makespan)})
    return clocked(tb, out.with_stats(message=why))


RESCUE_BUCKETINGS = 512  # bucketings listed (each ordered) when the search's choice has no order within the budget


def _rescue(problem: Problem, price: Pricing, params: SolveParams, tb: TimeBudget, as_given: dict[str, list[str]],
            tried: list[tuple[Bucket, ...]],
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
        # deterministic: counts from the final order's own limit, not from the clock left (decision 102)
        per = replace(params, time_limit=max(0.01, (params.time_limit / len(todo)) if params.deterministic else
                                             tb.wall_left() / (len(todo) - k)),
                      work_limit=None if params.work_limit is None else params.work_limit / len(todo))
        try:
            h = materialize(g, list(bs), price)
            return bs, h, optimize(problem.on(h), per, clock=tb, extra_orders=None if bs else as_given)
        except InfeasibleBudgetError as e:
            proven.add(bs)
            errors.append(e)
        except GraphError as e:  # no order found (not proven), or buckets with no valid place
            errors.append(e)
            if not isinstance(e, NoValidOrderError):
                proven.add(bs)  # no bucketed graph: not a plan at all
    every = space is not None and all(bs in proven for bs in listed)
    raise no_plan_error(problem, errors, proven=every or none_within(problem, price, params, tb))


__all__ = ["optimize_plan"]
