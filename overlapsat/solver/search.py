"""A search: phases that share one clock and one best-so-far, each returning typed statistics.

`Search` holds what every phase reads and improves: the problem in its three views (as given, judged on its
relaxed graph, and the canonical form the search runs on, so that the answer does not depend on the file's node
order), the call's one `TimeBudget`, and the best valid order with the proven bound. A phase is a small object
with a `name` and a `run(search)` that returns its statistics (a dataclass); `Search.run` announces it, contains
Ctrl-C, and files the statistics. `optimize` composes the order phases below; `optimize_plan` composes the plan
phases of `plan_phases.py` around an inner `optimize`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from overlapsat.bounds import lower_bound
from overlapsat.errors import GraphError, InfeasibleBudgetError
from overlapsat.evaluate import Evaluated, evaluate, evaluate_named, only_over_budget, rank_key
from overlapsat.fmt import fmt_bytes
from overlapsat.heuristics.portfolio import run_all
from overlapsat.problem import Problem
from overlapsat.simulate import peak_memory
from overlapsat.solver.exhaustive import MAX_ORDERS, ORDERS_PER_SECOND, exhaustive
from overlapsat.solver.fill import FillStats, fill, move_cost
from overlapsat.solver.memory_bound import S_PER_NODE as MEMORY_BOUND_S
from overlapsat.solver.memory_bound import SHARE as MEMORY_BOUND_SHARE
from overlapsat.solver.memory_bound import overlap_capacity_bound, peak_floor
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.result import Progress, StoppingRule, meets
from overlapsat.solver.units import EXACT_UNITS, SEARCH_UNITS, choose_scale
from overlapsat.solver.witness import witness

log = logging.getLogger(__name__)

EXHAUSTIVE_NODES = 8  # every order is judged up to this size (at most 40,320 orders; usually far fewer)
EXHAUSTIVE_NODES_NO_ORDER = 14  # and up to this size when no heuristic order is valid (capped listing)
WITNESS_NODES = 64  # a budget no heuristic order meets: the witness search (witness.py) up to this size
WITNESS_STEPS_PER_SECOND = 400_000  # placements it may try per second of the limit (about 2 million a second idle)
# timed mode: no pipeline of the input order's portfolio starts past 40 % of the time limit, none of the canonical
# form's past 70 % (the search starts from the latter's orders). Deterministic mode: the passes are a count
# (`portfolio_steps`), and only what must follow them (`TAIL_S_PER_NODE`) stops them before the deadline (decision
# 123); a cut either way is flagged (decision 57)
HEURISTICS_CLOCK_SHARE = (0.4, 0.7)
# what the portfolio's evaluations, the bound and the final checks cost per node after the passes (about 0.6 s at
# 36k nodes on this 2-core machine on 2026-11-28; 1.2-1.4 s on 2026-12-02, the analytical bound 0.9 s of it): no
# pass starts that late
TAIL_S_PER_NODE = 4e-5
# the canonical form costs about 3.4e-5 to 4.4e-5 s a node on this machine (1.22 s at 36,401 nodes, 0.59 s at 13,403,
# 2026-12-02; 0.4 s at 36k on a faster hour of 2026-11-28): a search, or a plan search (decision 105), that starts
# with less than this left of its clock runs on the order as given instead (decision 64)
CANONICAL_S_PER_NODE = 4.5e-5
# what the order search costs before its first step (its time scale: 0.5-0.9 s at 36,401 nodes, 0.04-0.08 s at
# 8-13k, this 2-core machine, 2026-12-02): with less left of the clock it does not start (decision 105)
ORDER_SEARCH_S_PER_NODE = 2.5e-5
FILL_MOVES_TIMED = 10**9  # timed mode without a work limit: the fill's share of the clock ends it
BUDGETED_WINDOW_NODES = 20  # deterministic mode with a budget: window LNS first from this size (decision 59)
# CP-SAT's start on the whole model (loading it, presolve, the first propagation), which its deterministic count
# leaves out: 0.03-0.09 wall seconds at 57-124 nodes and 0.29-0.66 at 449 on the bundled graphs under tiny work
# limits, where it reported 0.001-0.085 deterministic seconds (this 2-core machine, 2026-12-03). In deterministic
# mode a model whose work is below half of it is not started (decision 119)
WHOLE_START_S = 0.01
WHOLE_START_S_PER_NODE = 1e-3
CHEAP_PASSES = ("sink_waits", "raise_comms", "reorder_compute_for_overlap",
                "sink_waits+raise_comms+reorder_compute_for_overlap", "reorder_for_peak_memory",
                "topological_sort_lpmf", "topological_sort_bfs", "topological_sort_dfs")


class Phase(Protocol):
    name: str

    def run(self, search: Search) -> Any: ...


@dataclass
class Search:
    """The state the phases of one call share (see the module docstring). `best` is on the canonical form."""

    problem: Problem
    params: SolveParams
    tb: TimeBudget
    on_progress: Callable[[Progress], None] | None = None
    stop_when: StoppingRule | None = None
    on_phase: Callable[[Progress], None] | None = None
    best: Evaluated | None = None
    method: str = ""
    bound: float = 0.0
    message: str = ""
    solver_error: bool = False
    stopped_by_rule: bool = False
    reported: float = math.inf  # the best makespan told to `on_progress` so far
    from_input: list[Evaluated] = field(default_factory=list)  # the input order's portfolio (what is reported)
    canon: list[Evaluated] = field(default_factory=list)  # the canonical form's portfolio, ranked
    stats: dict[str, Any] = field(default_factory=dict)  # every phase's statistics, flattened (Result.stats)
    phases: dict[str, Any] = field(default_factory=dict)  # every phase's statistics, typed, by phase name
    on_given_order: bool = False  # no time for the canonical form: the search runs on the order as given

    @classmethod
    def of(cls, problem: Problem, params: SolveParams, clock: TimeBudget | None = None, started: float | None = None,
           **hooks: Any) -> Search:
        tb = TimeBudget(params, parent=clock, started=started)
        price = CANONICAL_S_PER_NODE * len(problem.graph.nodes)
        # no time for the form: a cut (flagged where deterministic), unless its price takes the whole limit (128)
        late = not problem.canonical_known and tb.cut(price)
        if late:
            log.info("%.2f s left at the start, the canonical form priced at %.2f s: the search runs on the order as "
                     "given (its answer may depend on the file's node order)", tb.wall_left(), price)
            problem = _as_own_canonical(problem)
        return cls(problem, params, tb, on_given_order=late, **hooks)

    @property
    def judged(self) -> Problem:
        """The problem on its relaxed graph: what every claim is judged on."""
        return self.problem.on(self.problem.relaxed)

    @property
    def cp(self) -> Problem:
        return self.problem.canonical

    def announce(self, name: str) -> None:
        """Tell `on_phase` (a progress display) what runs now: it is never asked to stop the search."""
        if self.on_phase is not None:
            ms = self.best.makespan if self.best is not None else math.inf
            self.on_phase(Progress(self.tb.elapsed(), ms, self.bound, name))

    def run(self, phase: Phase) -> Any:
        """Run `phase` unless interrupted; Ctrl-C inside it keeps what is found so far. Its statistics are filed
        under its name (typed) and merged into `stats`."""
        if self.tb.interrupted:
            return None
        self.announce(phase.name)
        try:
            out = phase.run(self)
        except KeyboardInterrupt:
            self.tb.interrupted = True
            log.warning("interrupted during %s: returning the best order found so far", phase.name)
            return None
        if out is not None:
            self.phases[phase.name] = out
            self.stats.update(out.export() if hasattr(out, "export") else asdict(out))
        return out

    def offer(self, cand: Evaluated, method: str) -> bool:
        """Keep `cand` (an order of the canonical form) where it is valid and shorter than the best."""
        if not cand.valid or (self.best is not None and cand.makespan >= self.best.makespan - 1e-9):
            return False
        self.best, self.method = cand, method
        return True

    def improved(self, order: list[int], ms: float) -> bool:
        """A search's progress report (LNS's `on_improve`): tell `on_progress`; True where `stop_when` says stop."""
        if ms >= self.reported - 1e-9:  # a restart's own progress is reported once it leads
            return False
        self.reported = ms
        p = Progress(self.tb.elapsed(), ms, self.bound)
        if self.on_progress is not None:
            self.on_progress(p)
        self.stats.setdefault("time_to_first_s", self.tb.elapsed())
        self.stats["time_to_best_s"] = self.tb.elapsed()
        if self.stop_when is not None and self.stop_when(p):
            self.stopped_by_rule = self.stats["stopped_by_rule"] = True
        return self.stopped_by_rule

    def searching(self) -> bool:
        """Whether a further search may run: not stopped, interrupted, out of work or time, or proven."""
        return not (self.stopped_by_rule or self.tb.interrupted or self.tb.exhausted(self.params.deterministic)
                    or (self.best is not None and meets(self.best.makespan, self.bound)))


def _as_own_canonical(problem: Problem) -> Problem:
    """A copy of `problem` whose canonical form is its relaxed graph as given (the identity map): what a search
    that has no time for the canonical form runs on. The caller's problem keeps its own views."""
    q = replace(problem)
    q.__dict__["_canonical_form"] = problem.own_canonical()
    return q


@dataclass
class PortfolioStats:
    heuristics_s: float
    cut_by_clock: dict[str, list[str]]  # pipelines not started past their share of the time limit
    cut_by_work: list[str]  # pipelines cut short by their step budget
    warm_start: str | None  # the input order's pipeline the search starts from, where no canonical order is valid
    on_given_order: bool = False  # no time was left for the canonical form (decision 64)
    left_out_by_limit: bool = False  # no pass ran: what must follow them takes the whole limit (decision 128)

    def export(self) -> dict[str, Any]:
        out: dict[str, Any] = {"heuristics_s": self.heuristics_s}
        if self.on_given_order:
            out.update(on_given_order=True, depends_on_input_order=True)
        if self.left_out_by_limit:
            out["portfolio_left_out_by_limit"] = True
        if self.cut_by_clock:
            out["portfolio_cut_by_clock"] = self.cut_by_clock
        if self.cut_by_work:
            out["portfolio_cut_by_work_limit"] = self.cut_by_work
        if self.warm_start:
            out.update(warm_start=self.warm_start, depends_on_input_order=True)
        return out


@dataclass
class Portfolio:
    """Inductor's passes from the input order (what `heuristics` reports, and what the result is never worse than)
    and from the canonical form (where the search starts), each stopped by its share of the clock; the best valid
    canonical order becomes the incumbent, and the analytical bound the bound."""

    given: list[Evaluated] | None = None  # the input order's portfolio, where the caller ran it already
    extra_orders: dict[str, Any] | None = None
    name: str = "heuristics"

    def run(self, s: Search) -> PortfolioStats:
        p, tb = s.params, s.tb
        n = len(s.cp.graph.nodes)
        include = None if n <= p.lns_min_nodes else CHEAP_PASSES  # the iterative passes are quadratic in their moves
        # decision 71's bound where a share of the limit pays for it (a function of the limit, not of the clock): at
        # 0.3 s on 13,403 nodes, and at 2 s on 36,401 (1.7 s), it alone ran past the promise (decisions 104, 105)
        by_memory = s.problem.budget is not None and MEMORY_BOUND_S * n <= MEMORY_BOUND_SHARE * p.time_limit
        tail_s = (TAIL_S_PER_NODE + (MEMORY_BOUND_S if by_memory else 0.0)) * n
        tail = tb.deadline - tail_s
        priced_out = p.deterministic and tb.beyond_limit(tail_s)  # no machine has room for any pass: none runs, and
        if priced_out:  # that is no clock cut (decision 128)
            include = ()
            log.info("heuristics left out: what must follow them on %d nodes is priced at %.2f s, which leaves them "
                     "no time within the limit", n, tail_s)
        # (what follows the passes needs this: evaluations, checks, the bounds)

        def until(k: int) -> float:  # deterministic: a share of the clock left would make the machine decide which
            # passes run (a plan's final order skipped its fits at 0.4 of 4.2 s left, with 2.5 s unused; decision 123)
            return tb.monotonic(tail if p.deterministic else min(tb.at(HEURISTICS_CLOCK_SHARE[k]), tail))
        reports: dict[str, dict[str, list[str]]] = {"input order": {}, "canonical form": {}}  # what run_all left out
        same = s.on_given_order or s.cp is s.problem  # the same graph: the same passes, run once
        try:
            s.from_input = self.given if self.given is not None else run_all(
                s.problem, include=() if priced_out else None, work_limit=p.portfolio_steps,
                report=reports["input order"], deadline=until(0))
            s.canon = list(s.from_input) if same else run_all(
                s.cp, include=include, work_limit=p.portfolio_steps, report=reports["canonical form"],
                deadline=until(1))
        except KeyboardInterrupt:  # what has been evaluated, and the input order
            tb.interrupted = True
            log.warning("interrupted during the heuristics: returning the best order evaluated so far")
        judged = s.judged
        if not any(h.name == "input_order" for h in s.from_input):
            s.from_input = [evaluate(judged, "input_order", list(range(len(judged.graph.nodes)))), *s.from_input]
        have = {h.name for h in s.from_input}
        s.from_input += evaluate_named(judged, {k: v for k, v in (self.extra_orders or {}).items() if k not in have})
        first = next((h for h in s.canon if h.name == "input_order"), None)  # the canonical form's own order
        s.canon = [h for h in s.canon if h.name != "input_order"]
        s.canon.append(replace(first, name="topological_order") if first is not None
                       else evaluate(s.cp, "topological_order", list(range(n))))
        s.canon.sort(key=rank_key)
        if same:  # the same graph: the same passes, and the same ones left out
            reports["canonical form"] = reports["input order"]
        # what the deadline left out (the work limit's are no cut: deterministic), as run_all names them
        skipped = {k: v["deadline"] for k, v in reports.items() if v.get("deadline")}
        if skipped and not tb.interrupted:
            if p.deterministic:
                tb.cut_by_wall_clock = True
            log.info("heuristics not started past their share of the time limit: %s",
                     "; ".join(f"{k}: {', '.join(v)}" for k, v in skipped.items()))
        cut = sorted({h.name for h in s.from_input + s.canon if h.note})
        if cut:  # the result is never worse than these cut orders, but may be worse than the complete passes
            log.info("heuristics cut short by the work limit (raise time_limit to run them in full): %s", ", ".join(cut))
        s.bound = lower_bound(s.cp.graph, s.problem.collective_order).makespan
        if by_memory:  # what the budget leaves of the overlap (decision 71)
            s.bound = max(s.bound, overlap_capacity_bound(s.cp.graph, s.problem.budget))  # type: ignore[arg-type]
        warm = self._incumbent(s)
        return PortfolioStats(tb.elapsed(), skipped, cut, warm, s.on_given_order, priced_out)

    @staticmethod
    def _incumbent(s: Search) -> str | None:
        """The best valid canonical order, else the input order's best moved onto the canonical form (named)."""
        valid = [h for h in s.canon if h.valid]
        if valid:
            s.best, s.method = valid[0], valid[0].name
            return None
        fallback = [h for h in s.from_input if h.valid]
        if not fallback:
            return None
        to_canon = {v: k for k, v in enumerate(s.problem.to_given)}
        h = fallback[0]
        s.best, s.method = evaluate(s.cp, h.name, [to_canon[v] for v in h.order]), h.name
        return h.name


@dataclass
class ListingStats:
    orders: int
    complete: bool
    pruned: int = 0  # prefixes set aside: their live bytes already passed the budget

    def export(self) -> dict[str, Any]:
        return {"exhaustive": {"orders": self.orders, "complete": self.complete, "pruned": self.pruned}}


@dataclass
class Listing:
    """On a small graph, every order judged by the arbiters (exhaustive.py): the best, and a proof where the
    listing was complete. Raises InfeasibleBudgetError where it proves that the budget, not the policy, is what no
    order meets."""

    name: str = "listing"

    @staticmethod
    def applies(s: Search) -> bool:
        n = len(s.cp.graph.nodes)
        return n <= EXHAUSTIVE_NODES or (s.best is None and n <= EXHAUSTIVE_NODES_NO_ORDER)

    def run(self, s: Search) -> ListingStats:
        tb, cp = s.tb, s.cp
        ex = exhaustive(cp, max_orders=exhaustive_orders(s.params), deadline=tb.deadline, clock=tb.clock)
        if ex.cut_by_clock and s.params.deterministic:
            tb.cut_by_wall_clock = True
        budget = s.problem.budget
        if ex.complete and ex.order is None and budget is not None and exhaustive(
                Problem(cp.graph, None, s.problem.collective_order), max_orders=exhaustive_orders(s.params),
                deadline=tb.deadline, clock=tb.clock, first=True).order is not None:
            raise budget_error(InfeasibleBudgetError, budget, s.canon + s.from_input, proven=True)
        if ex.order is not None and (s.best is None or ex.makespan < s.best.makespan - 1e-9):
            s.best, s.method = evaluate(cp, "exhaustive", ex.order), "exhaustive"
        if ex.complete and s.best is not None and ex.order is not None:
            s.bound = max(s.bound, s.best.makespan)
        return ListingStats(ex.judged, ex.complete, ex.pruned)


@dataclass
class WitnessStats:
    states: int
    steps: int
    found: bool
    complete: bool

    def export(self) -> dict[str, Any]:
        return {"witness": asdict(self)}


@dataclass
class WitnessSearch:
    """Where no heuristic order meets the budget on a small graph (often the least peak itself), an order within
    it from a search over the sets of nodes a prefix holds, close to the lowest-peak heuristic order: the
    incumbent the listing and CP-SAT then improve. It proves nothing (decision 60)."""

    name: str = "witness"

    @staticmethod
    def applies(s: Search) -> bool:
        return s.best is None and s.problem.budget is not None and len(s.cp.graph.nodes) <= WITNESS_NODES

    def run(self, s: Search) -> WitnessStats:
        tb = s.tb
        near = [h for h in s.canon if only_over_budget(h)]
        prefer = min(near, key=lambda h: (h.peak_memory, rank_key(h))).order if near else None
        w = witness(s.cp, prefer, max_steps=witness_steps(s.params), deadline=tb.deadline, clock=tb.clock)
        if w.cut_by_clock and s.params.deterministic:
            tb.cut_by_wall_clock = True
        if w.order is not None:
            s.offer(evaluate(s.cp, "witness", w.order), "witness")
        return WitnessStats(w.states, w.steps, w.order is not None, w.complete)


@dataclass
class ModelStats:
    """The whole-graph CP-SAT solve's own figures (cpsat.py fills them)."""

    figures: dict[str, Any]

    def export(self) -> dict[str, Any]:
        return dict(self.figures)


@dataclass
class WholeModel:
    """CP-SAT on the whole graph, hinted with the best order, with `share` of the work left: a better order, a
    higher bound, or a proof that no order meets the budget (raised where no valid order is known)."""

    share: float = 1.0
    name: str = "model"

    def run(self, s: Search) -> ModelStats:
        work = self.share * s.tb.work_left()
        if s.params.deterministic and s.best is not None:  # without a valid order the model must run: it may prove
            start = WHOLE_START_S + WHOLE_START_S_PER_NODE * len(s.cp.graph.nodes)
            if work < start / 2:  # its start would take twice its work: the clock, not the work, would end the call
                return ModelStats({"model_skipped": f"its work ({work:.3f}) is below half of CP-SAT's start on "
                                                   f"{len(s.cp.graph.nodes)} nodes ({start:.3f} reference seconds)"})
        from overlapsat.solver.cpsat import solve_whole  # OR-Tools (and pandas) load when a CP-SAT phase runs

        figures: dict[str, Any] = {}
        # without a budget the model gets exact time, so that its optimum converts into a proof
        ts = choose_scale(s.cp.graph, SEARCH_UNITS if s.problem.budget is not None else EXACT_UNITS)
        out = solve_whole(s.cp, ts, s.params, s.tb, s.best, s.on_progress, s.stop_when, figures, work=work)
        if out.error:
            s.solver_error, s.message = True, out.error
        if out.infeasible:
            if s.best is None:
                raise budget_error(InfeasibleBudgetError, s.problem.budget, s.canon, proven=True)
            # the model is exact: a valid order contradicts this
            s.solver_error, s.message = True, "CP-SAT proved infeasible a model a valid heuristic order satisfies"
            log.error(s.message)
        if out.bound_us is not None:
            s.bound = max(s.bound, out.bound_us)
        if out.order is not None:
            cand = evaluate(s.cp, "cpsat", out.order)
            if not cand.valid:
                s.solver_error, s.message = True, f"solver order rejected by the validator: {cand.violations[0]}"
                log.error(s.message)
            else:
                s.offer(cand, "cpsat")
        elif not out.infeasible and not out.error:
            s.message = "no solution within the time limit"
        if figures.get("stopped_by_rule"):
            s.stopped_by_rule = True
        return ModelStats(figures)


@dataclass
class WindowStats:
    windows: int = 0
    accepted: int = 0
    improvements: int = 0
    work: float = 0.0
    sweeps: int = 0
    restarts: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def export(self) -> dict[str, Any]:
        return {"lns": {**asdict(self), **self.extra}} if self.windows or self.sweeps else {}


@dataclass
class WindowSearch:
    """Window LNS from the best order with `share` of the work left; where a search converges with work left, the
    next distinct heuristic orders get the rest (they may lie in another basin)."""

    share: float = 1.0
    name: str = "lns"

    def run(self, s: Search) -> WindowStats:
        from overlapsat.solver.lns import lns

        assert s.best is not None
        ts = choose_scale(s.cp.graph, SEARCH_UNITS)
        work, spent0 = self.share * s.tb.work_left(), s.tb.work_used
        starts = [s.best.order] + [h.order for h in s.canon if h.valid and h.order != s.best.order][
            :s.params.lns_restarts]
        out = WindowStats()
        for k, start in enumerate(starts):
            left = work - (s.tb.work_used - spent0)
            if k and (not s.searching() or left <= 0):
                break
            order, lstats = lns(s.cp, ts, start, s.params, s.tb, target=s.bound, on_improve=s.improved, work_cap=left)
            for key, val in lstats.items():
                if hasattr(out, key) and key != "extra":
                    setattr(out, key, getattr(out, key) + val)
                else:
                    out.extra[key] = out.extra.get(key, 0) + val
            out.restarts = k
            s.offer(evaluate(s.cp, "cpsat-lns", order), "cpsat-lns")
        return out


@dataclass
class Fill:
    """Kernels moved from before a collective's issue to after it (fill.py, decision 96), from the best order,
    with `params.fill_share` of the work left (timed mode: of the time left); what it keeps is validated like every
    other candidate."""

    name: str = "fill"

    @staticmethod
    def applies(s: Search) -> bool:
        return s.best is not None and s.params.fill_share > 0 and s.searching()

    def run(self, s: Search) -> FillStats | None:
        assert s.best is not None
        g, tb, p = s.cp.graph, s.tb, s.params
        cost = move_cost(g)
        if math.isfinite(tb.work_left()):  # deterministic, or timed with a work limit
            moves = int(p.fill_share * tb.work_left() / cost)
        else:  # timed without a work limit: the clock's share ends it
            moves = FILL_MOVES_TIMED
            tb.until(p.fill_share)
        if moves <= 0:
            tb.until(None)
            return None
        order, st = fill(g, s.best.order, s.problem.budget, moves, stop=lambda: tb.wall_left() <= 0,
                         collective_order=s.problem.collective_order)
        tb.until(None)
        tb.spend(st.moves_tried * cost)
        if p.deterministic and st.moves_tried < moves and tb.clock_over():  # the clock, not the work, ended it
            tb.cut_by_wall_clock = True
        if st.moves_kept and s.offer(evaluate(s.cp, "fill", order), f"{s.method}+fill"):
            s.improved(s.best.order, s.best.makespan)
        return st


def order_search(s: Search) -> None:
    """The CP-SAT phases, by size: up to `lns_min_nodes`, window LNS first (it improves faster than the monolithic
    model at the same work, docs/solver.md), then the monolithic model, hinted, for the proof; without a valid
    incumbent the monolithic model goes first (it finds an order or proves there is none). Larger graphs: window
    LNS only; graphs under `lns_min_window_nodes`: the monolithic model only."""
    p, n = s.params, len(s.cp.graph.nodes)
    if s.tb.cut(ORDER_SEARCH_S_PER_NODE * n):  # its time scale alone would end past the deadline (flagged)
        s.message = s.message or "the time limit ended the search before its order search: the best order found before it"
        return
    # a budgeted model runs one worker in deterministic mode (decision 36), where the whole model finds little in
    # its work; windows find more there (decision 59), so they run first from a smaller size
    windows_from = p.lns_min_window_nodes if s.problem.budget is None or not p.deterministic \
        else min(p.lns_min_window_nodes, BUDGETED_WINDOW_NODES)
    small, use_lns = n <= p.lns_min_nodes, n >= windows_from
    ts = choose_scale(s.cp.graph, SEARCH_UNITS if s.problem.budget is not None else EXACT_UNITS)
    s.stats.update(resolution_us=ts.resolution_us, exact_durations=ts.exact)
    s.reported = s.best.makespan if s.best is not None else math.inf
    if s.best is None:
        if small:
            s.run(WholeModel(p.monolithic_share if use_lns else 1.0))
        if s.best is not None and use_lns and s.searching():
            s.run(WindowSearch())
        return
    if use_lns and s.searching():
        if small and not p.deterministic:  # timed: the monolithic model keeps its share of time
            s.tb.until(1.0 - p.monolithic_share)
        s.run(WindowSearch(1.0 - p.monolithic_share if small else 1.0))
        s.tb.until(None)
    if small and s.searching():
        s.run(WholeModel())


def witness_steps(params: SolveParams) -> int:
    """Placements the witness search may try: a function of the options, so that a deterministic answer is
    too."""
    return max(100_000, min(10_000_000, int(WITNESS_STEPS_PER_SECOND * params.time_limit)))


def exhaustive_orders(params: SolveParams) -> int:
    """Orders the listing may judge: a function of the options, so that a deterministic answer is too."""
    return max(1000, min(MAX_ORDERS, int(ORDERS_PER_SECOND * params.time_limit)))


def check_floor(problem: Problem, what: str = "order") -> None:
    """Raise InfeasibleBudgetError before any search where the budget is below the memory floor (decision 71):
    some step holds more than it in every order, and so in every plan."""
    # the order as listed is an order: where it peaks within the budget, so does the floor (decision 105), and
    # the floor (0.2-0.8 s at 8-36k nodes) need not be read; nor where this problem's was read already
    if problem.budget is not None and problem.__dict__.get("floor_checked") != problem.budget \
            and peak_memory(problem.relaxed) > problem.budget:
        floor = peak_floor(problem.relaxed)
        if floor[0] > problem.budget:
            raise budget_error(InfeasibleBudgetError, problem.budget, [], proven=True, floor=floor, what=what)


def floor_checked(problem: Problem) -> Problem:
    """`problem`, marked as one whose budget `check_floor` has passed (the plan search's canonical form of a problem
    that passed it: the same graph, listed otherwise), so that its final `optimize` does not read the floor again."""
    problem.__dict__["floor_checked"] = problem.budget  # a flag, as `Problem.own_canonical` sets one
    return problem


def budget_error(cls: type[GraphError], budget: int | None, heur: list[Evaluated], proven: bool,
                 floor: tuple[int, str] | None = None, what: str = "order") -> GraphError:
    """The error for a budget no order was found within, with the lowest peak reached by an order that is valid
    apart from memory, in human units; `floor`: the proof, where a node's step holds more than the budget in
    every order (`memory_bound.peak_floor`)."""
    if budget is not None and proven and floor is not None and not heur:  # proven before any search
        over = " over every legal bucketing" if what == "plan" else ""
        err = cls(f"memory budget of {fmt_bytes(budget)} ({budget} B) is unreachable: no {what} of this graph peaks "
                  f"that low (proven{over}: the step of {floor[1]!r} holds at least {fmt_bytes(floor[0])} ({floor[0]} B) "
                  f"in every order)")
        err.budget, err.lowest_peak = budget, None  # type: ignore[attr-defined]
        return err
    if budget is None or not heur:  # no budget: nothing to blame it on (a search stopped before any order)
        err = cls("no valid order was found within the time limit; this is not a proof that none exists; raise "
                  "time_limit")
        err.budget, err.lowest_peak = budget, None  # type: ignore[attr-defined]
        return err
    others = [h for h in heur if only_over_budget(h)]
    low = min(others or heur, key=lambda h: (h.peak_memory, h.name))
    b = fmt_bytes(budget or 0)
    if proven:
        why = (f": the step of {floor[1]!r} holds at least {fmt_bytes(floor[0])} ({floor[0]} B) in every order"
               if floor is not None else "")
        msg = (f"memory budget of {b} ({budget} B) is unreachable: no order of this graph peaks that low (proven"
               f"{why}); the lowest peak found is {fmt_bytes(low.peak_memory)} ({low.name})")
    else:
        msg = (f"no order within the memory budget of {b} ({budget} B) was found within the time limit; this is not "
               f"a proof that none exists. The lowest peak reached by an order valid in every other respect is "
               f"{fmt_bytes(low.peak_memory)} ({low.name}); raise time_limit or the budget")
    err = cls(msg)
    err.budget, err.lowest_peak = budget, low.peak_memory  # type: ignore[attr-defined]
    return err


__all__ = ["Fill", "Listing", "Phase", "Portfolio", "Search", "WholeModel", "WindowSearch", "WitnessSearch", "budget_error",
           "check_floor",
           "exhaustive_orders", "order_search", "witness_steps"]
