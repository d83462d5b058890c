"""Heuristic and exact schedules side by side, against the lower bound."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from overlapsat.budget import BudgetLike
from overlapsat.cost.hold import HeldResult, check_hold, simulate_held
from overlapsat.cost.interference import ContendedResult, Interference, simulate_contended
from overlapsat.errors import GraphError
from overlapsat.evaluate import Evaluated, evaluate, evaluate_named, rank_key
from overlapsat.fmt import fmt_bytes
from overlapsat.graph import Graph
from overlapsat.heuristics.portfolio import run_all
from overlapsat.io import as_graph
from overlapsat.plan import Pricing
from overlapsat.problem import Problem
from overlapsat.solver.optimize import Progress, Result, optimize, tie_break
from overlapsat.solver.params import SolveParams, TimeBudget

Row = Evaluated  # one row of the table: an evaluated order
log = logging.getLogger(__name__)
HEURISTICS_SHARE = 0.3  # of compare's time limit: the heuristics' rows stop by then
EXACT_SHARE_WITH_PLANS = 0.4  # of what is left after them: the exact row, where the plan rows follow
PLAN_SHARE = 0.8  # of what is left after the exact row: the plan search (the peers' rows it leaves get the rest)
# deterministic mode: the plan search's time limit (its work and its count of evaluations) as a share of compare's,
# what an idle run leaves it after the heuristics' and the exact row's shares, never what the clock left (load)
PLAN_NOMINAL_SHARE = PLAN_SHARE * (1 - HEURISTICS_SHARE) * (1 - EXACT_SHARE_WITH_PLANS)
# the least a plan search needs per node on an idle machine (building, checking and ordering one bucketed graph:
# about 1.2 s at 36k nodes, 2026-11-28): kept from the exact row; with less of the limit left, compare leaves the
# plan rows out, and says so
PLAN_FLOOR_S_PER_NODE = 4e-5
TIE_BROKEN = "exact + interference tie-break"  # the exact order, its plain ties broken by the contended makespan


@dataclass
class Comparison:
    """Input order, every heuristic and the exact solver, on one graph."""

    graph: Graph
    rows: list[Row]
    bound: float  # lower bound on the makespan
    memory_budget: int | None
    result: Result
    analytical_bound: float = 0.0  # the part of `bound` that needs no search (bounds.lower_bound)
    collective_order: str = "group"
    # rows of other graphs (torch's bucketing merges collectives: another problem, not an order of this one);
    # shown beside the table, never ranked with it
    other_rows: list[Row] = field(default_factory=list)
    # each row's order walked at contended rates (`compare(interference=)`): an estimate of the step on the GPU,
    # beside MODEL.md's figures, never a bound or a certificate
    interference: Interference | None = None
    contended: dict[str, ContendedResult] = field(default_factory=dict)
    # each row's order walked with transfers held back by running GEMMs (`compare(hold=)`, cost/hold.py): an
    # estimate of the exposure a profiler reads on the GPU, beside MODEL.md's figures, never a certificate
    hold: float | None = None
    held: dict[str, HeldResult] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"Comparison(graph={self.graph.name!r}, rows={len(self.rows)}, exact={self.result.status.value!r}, "
                f"bound_us={self.bound:.3f})")

    @property
    def exposed_bound(self) -> float:
        return max(0.0, self.bound - self.graph.compute_total)

    def gap(self, row: Row) -> float:
        """Relative gap of a row's exposed time to the bound on exposed time."""
        if row.exposed <= 1e-9:
            return 0.0
        return max(0.0, (row.exposed - self.exposed_bound) / row.exposed)

    def row(self, method: str) -> Row:
        return next(r for r in self.rows if r.method == method)

    @property
    def input_row(self) -> Row:
        return self.row("input_order")

    @property
    def best_heuristic(self) -> Row:
        return min((r for r in self.rows if r.valid and r.method not in ("input_order", "exact", TIE_BROKEN)),
                   key=lambda r: r.makespan, default=self.input_row)

    @property
    def exact(self) -> Row:
        return self.row("exact")

    def records(self) -> list[dict[str, Any]]:
        def record(r: Row, gap: float | None) -> dict[str, Any]:
            rec = {"method": r.method, "makespan_us": r.makespan, "exposed_us": r.exposed,
                    "exposed_pct": r.exposed_pct, "peak_memory": r.peak_memory,
                    "peak_vs_budget": (r.peak_memory / self.memory_budget) if self.memory_budget else None,
                    "gap_to_bound": gap, "runtime_s": r.runtime_s, "valid": r.valid, "note": r.note,
                    "violations": r.violations}
            c = self.contended.get(r.method)
            if c is not None:
                rec.update(contended_makespan_us=c.makespan, contended_exposed_us=c.exposed)
            h = self.held.get(r.method)
            if h is not None:
                rec.update(held_exposed_us=h.exposed)
            return rec

        # another graph's row has no gap: this graph's bound does not apply to it
        return ([record(r, self.gap(r)) for r in self.rows]
                + [{**record(r, None), "other_graph": r.sim.graph.name} for r in self.other_rows])

    def to_markdown(self) -> str:
        from overlapsat.fmt import bound_line, clip, fmt_bytes, fmt_us

        cont, held = bool(self.contended), bool(self.held)
        head = "| method | makespan | exposed | exposed % | peak memory | gap to bound | runtime |"
        head += " contended makespan | contended exposed |" if cont else ""
        head += f" exposed, hold {self.hold:g} |" if held else ""
        lines = [head + " valid |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if cont else "")
                 + (" ---: |" if held else "") + " --- |"]
        for r in self.rows:
            mem = fmt_bytes(r.peak_memory)
            if self.memory_budget:
                mem += f" ({100 * r.peak_memory / self.memory_budget:.0f}% of budget)"
            gap = f"{100 * self.gap(r):.1f}%" if r.valid else "-"
            if r.method == "exact" and self.result.proven:
                gap = "optimal"
            c = self.contended.get(r.method)
            extra = f" {fmt_us(c.makespan)} | {fmt_us(c.exposed)} |" if c is not None else ""
            h = self.held.get(r.method)
            extra += f" {fmt_us(h.exposed)} |" if h is not None else ""
            lines.append(f"| {r.method} | {fmt_us(r.makespan)} | {fmt_us(r.exposed)} | {r.exposed_pct:.1f}% | {mem} | "
                         f"{gap} | {r.runtime_s:.2f} s |{extra} {'yes' if r.valid else 'NO: ' + clip(r.violations[0], 80)} |")
        src = "analytical and CP-SAT" if self.bound > self.analytical_bound + 1e-9 else "analytical"
        lines.append("\n" + bound_line(self.bound, self.exposed_bound, f"{src}, collective order {self.collective_order!r}")
                     + f"; exact: {self.result.status.value}, search ended by {self.result.stopped_by}")
        if self.interference is not None:
            inter = self.interference
            gemms = ""
            if inter.gemm_slowdown:
                fs = [f for _, f in inter.gemm_slowdown]
                gemms = f" (GEMMs by size: {min(fs):g}x to {max(fs):g}x)"
            lines.append(f"contended: each order walked with compute {inter.compute_slowdown:g}x slower{gemms} while "
                         f"a transfer runs and transfers {inter.comm_slowdown:g}x slower while compute runs "
                         "(simulate_contended); an estimate, which the bound and 'optimal' above do not cover")
        if self.hold is not None:
            lines.append(f"hold {self.hold:g}: a transfer that becomes ready inside a GEMM waits for {self.hold:g} of "
                         "the GEMM's remaining time (simulate_held); an estimate, which the bound and 'optimal' above "
                         "do not cover")
        if self.other_rows:
            lines += ["", "Other graphs (a transformation of this one, such as bucketing: not orders of this graph, "
                          "so the bound above does not apply):", "",
                      "| method | graph | makespan | exposed | peak memory |" + (" contended makespan |" if cont else "")
                      + " valid |", "| --- | --- | ---: | ---: | ---: |" + (" ---: |" if cont else "") + " --- |"]
            for r in self.other_rows:
                c = self.contended.get(r.method)
                extra = f" {fmt_us(c.makespan)} |" if cont and c is not None else " - |" if cont else ""
                lines.append(f"| {r.method} | {r.note} | {fmt_us(r.makespan)} | {fmt_us(r.exposed)} | "
                             f"{fmt_bytes(r.peak_memory)} |{extra} "
                             f"{'yes' if r.valid else 'NO: ' + clip(r.violations[0], 80)} |")
        return "\n".join(lines)

    def to_dataframe(self) -> Any:
        try:
            import pandas as pd
        except ImportError as e:  # optional dependency
            raise ImportError("to_dataframe() needs pandas (pip install pandas)") from e
        return pd.DataFrame(self.records())


def compare(graph: Graph | str, *, time_limit: float = 10.0, memory_budget: BudgetLike = None,
            collective_order: str = "group", workers: int | None = None, deterministic: bool = True,
            work_limit: float | None = None,
            on_progress: Callable[[Progress], None] | None = None, on_phase: Callable[[Progress], None] | None = None,
            extra_orders: dict[str, Any] | None = None,
            other_graphs: dict[str, Graph | tuple[Graph, Any]] | None = None,
            interference: Interference | None = None, hold: float | None = None,
            plans: Pricing | None = None, plan_peers: dict[str, Any] | None = None,
            bucket_layout: str | None = None, clock: TimeBudget | None = None) -> Comparison:
    """Run the input order, every heuristic and the exact solver; one row each.

    `extra_orders` (name -> order) are rows from elsewhere (torch's FX
    OverlapScheduler, a hand-written order); the exact row is never worse
    than a valid one. `other_graphs` (name -> graph, or (graph, order)) are
    rows of another graph, such as torch's bucketed result: evaluated on
    their own graph (its input order by default) under the same budget and
    policy, and kept apart from this graph's rows. `interference` adds each
    row's contended makespan and exposure (`simulate_contended`): what the
    GPU's slowdowns under overlap make of the order, an estimate only. `hold` (in [0, 1]; `H200_HOLD` was
    measured) adds each row's exposure with transfers held back by running GEMMs (`simulate_held`), the
    estimate that matched the waits on NCCL on H200s; also an estimate only. `plans` (a cost model's `duration`,
    which prices merged collectives) adds plan rows beside the other graphs': torch's greedy bucketing (2000 MB,
    its default) with the best pass on its bucketed graph, and `optimize_plan`'s plan (its own `time_limit`).
    `plan_peers` (name -> buckets, each a list of collective names: TBB, torch's OverlapScheduler's) adds a row per
    peer bucketing, with the best pass on it, and gives each to the plan search as a warm start. `bucket_layout`
    ("copy", the default, or "coalesced"; `Problem.bucket_layout`) is how overlapsat's plan issues its buckets;
    torch's greedy row and the peers' rows keep the copied buckets torch issues, so the coalesced plan is judged
    against what torch runs. `clock`: a caller's budget whose deadline this call keeps too (the CLI's, counted
    from its launch)."""
    graph = as_graph(graph)
    if bucket_layout is not None and plans is None:
        raise GraphError("bucket_layout is a choice of plans: pass plans= (the cost model that prices merged "
                         "collectives) with it")
    # the budget resolved once, for every row
    problem = Problem.of(graph, memory_budget, collective_order, bucket_layout=bucket_layout or "copy")
    budget = problem.budget
    if hold is not None:
        hold = check_hold(hold)
    if interference is not None and not isinstance(interference, Interference):
        raise GraphError(f"interference: expected an Interference, got {type(interference).__name__}")
    # checked (and cheap) before any solving
    others = [_other_row(graph, nm, spec, budget, collective_order) for nm, spec in (other_graphs or {}).items()]
    if on_phase is not None:
        on_phase(Progress(0.0, float("inf"), 0.0, "heuristics"))
    # one clock for the whole call (decision 57): the heuristics' rows stop by HEURISTICS_SHARE of it, the exact
    # row and the plan search share the rest
    tb = TimeBudget(SolveParams(time_limit=time_limit, deterministic=deterministic, work_limit=work_limit),
                    parent=clock)
    steps = SolveParams(time_limit=time_limit).portfolio_steps  # the same passes, cut the same way, as optimize's
    left_out: dict[str, list[str]] = {}
    heur = run_all(problem, work_limit=steps, deadline=tb.monotonic(tb.at(HEURISTICS_SHARE)), report=left_out)
    if left_out.get("deadline") and deterministic:  # load, not work, left these rows out: said (decision 57)
        log.warning("deterministic heuristics ended by the wall clock before their work limit: %d rows not run "
                    "(%s); the table and the exact row may differ across machines; raise time_limit",
                    len(left_out["deadline"]), ", ".join(left_out["deadline"][:3])
                    + (", ..." if len(left_out["deadline"]) > 3 else ""))
    heur += evaluate_named(problem.on(problem.relaxed), extra_orders or {})
    rows = list(heur)
    rows.sort(key=lambda r: (r.name != "input_order", not r.valid, r.makespan))
    t = time.monotonic()
    left = tb.wall_left()
    floor = PLAN_FLOOR_S_PER_NODE * len(graph.nodes) if plans is not None else 0.0  # the plan rows' least
    share = EXACT_SHARE_WITH_PLANS if plans is not None else 1.0
    exact_s = max(0.01, min(left * share, left - floor))  # the wall clock the exact row may take
    # its work, in deterministic mode, from the time limit and not from what the heuristics left of the clock: the
    # same answer under any load (decision 57; a loaded run that the clock cuts says so)
    work_s = max(0.01, min(time_limit * share, time_limit - floor)) if deterministic else exact_s
    # with plan rows to follow, the exact row ends at its share of the clock in both modes (a deterministic run
    # cut there is flagged, decision 57), so that it cannot take their time
    exact_clock = TimeBudget(SolveParams(time_limit=exact_s, deterministic=False), parent=tb) if plans is not None \
        else tb
    res = optimize(problem, time_limit=work_s, workers=workers, deterministic=deterministic,
                   work_limit=work_limit, on_progress=on_progress, heuristic_results=heur, on_phase=on_phase,
                   clock=exact_clock)
    note = res.status.value + (f" (from {res.method})" if not res.method.startswith("cpsat") else "")
    rows.append(replace(res.best, name="exact", runtime_s=time.monotonic() - t, stats={}, note=note))
    from overlapsat.bounds import lower_bound

    analytical = lower_bound(problem).makespan
    contended = {}
    if interference is not None:
        polished = _polished_row(problem, res, interference, time_limit)
        rows += [polished] if polished is not None else []
        contended = {r.method: simulate_contended(graph, r.order, interference) for r in rows}
    held = {r.method: simulate_held(graph, r.order, hold) for r in rows} if hold is not None else {}
    if plans is not None and tb.wall_left() < floor:
        log.warning("compare: no time left for the plan rows (%.2f s of the limit left; about %.1f s needed at %d "
                    "nodes): raise the time limit", tb.wall_left(), floor, len(graph.nodes))
    elif plans is not None:
        others += _plan_rows(problem, plans, tb, time_limit, workers, deterministic, work_limit, plan_peers or {},
                             res)
    elif plan_peers:
        raise GraphError("plan_peers need plans= (the cost model that prices merged collectives)")
    if interference is not None:  # the other graphs' rows too (a bucket's longer transfer slows what runs beside it)
        contended.update({r.method: simulate_contended(r.sim.graph, r.order, interference) for r in others})
    return Comparison(graph, rows, res.bound, budget, res, analytical, collective_order, others, interference, contended,
                      hold, held)


def _polished_row(problem: Problem, res: Result, interference: Interference, time_limit: float) -> Row | None:
    """The exact order with the plain model's ties broken by the contended makespan, as optimize(interference=)
    breaks them, as its own row: no longer in MODEL.md's terms, so the exact row's certificate covers it too.
    None when nothing moved."""
    t = time.monotonic()
    params = SolveParams(time_limit=time_limit, collective_order=problem.collective_order,  # type: ignore[arg-type]
                         interference=interference)
    row, done = tie_break(problem.on(problem.relaxed), res.best, params)  # optimize's graph
    if not done["moves"]:
        return None
    return replace(row, name=TIE_BROKEN, runtime_s=time.monotonic() - t, stats={}, note=f"{done['moves']} moves")


def _plan_rows(problem: Problem, price: Pricing, tb: TimeBudget, limit: float, workers: int | None,
               deterministic: bool, work_limit: float | None, peers: dict[str, Any], unbucketed: Result) -> list[Row]:
    """Plans as rows of their bucketed graphs: torch's greedy buckets with the best pass, each peer's, and
    overlapsat's plan, under the plan's budget (where none was given, the input order's peak, decision 63). A peer
    whose every order found peaks above that budget keeps its row, marked over the budget."""
    from overlapsat.heuristics.bucketing import greedy_buckets
    from overlapsat.solver.plan_search import DEFAULT_PEER, as_buckets, optimize_plan

    planned = problem.with_default_budget()
    g = problem.relaxed
    t = time.monotonic()
    # the plan search's own deadline, short of compare's: the peers' rows it did not judge are judged after it
    wall = max(0.01, PLAN_SHARE * tb.wall_left())
    # deterministic: its time limit (so its work and its count of evaluations) from compare's, not from the clock
    # the other rows left, which load moves; a run the wall clock cuts says so (decision 57)
    time_limit = max(0.01, PLAN_NOMINAL_SHARE * limit) if deterministic else wall
    own_clock = TimeBudget(SolveParams(time_limit=wall, deterministic=False), parent=tb)
    pr = optimize_plan(planned, price, time_limit=time_limit, workers=workers, deterministic=deterministic,
                       work_limit=work_limit, starts=peers, unbucketed=unbucketed, clock=own_clock)
    plan_s = time.monotonic() - t
    # the plan search judged torch's default greedy buckets with the whole portfolio (orders within its budget);
    # judged again only where it did not (out of time, none within the budget), or in another layout than torch's
    copied = problem.bucket_layout == "copy"
    judge = _PeerJudge(planned, price, tb, SolveParams(time_limit=time_limit).portfolio_steps)
    out = []
    greedy_row = pr.rows.get(DEFAULT_PEER) if copied else None
    greedy = list(greedy_row.buckets) if greedy_row is not None else greedy_buckets(g)
    for name, bs, row in [("torch greedy", greedy, greedy_row),
                          *((nm, list(as_buckets(g, b)), pr.rows.get(nm) if copied else None)
                            for nm, b in peers.items())]:
        row = row or judge.row(bs)
        if row is None:
            log.warning("compare: the row of %s buckets was not judged within the time limit (raise it)", name)
            continue
        h = row.graph
        note = f"{len(bs)} buckets: {len(h)} nodes, {len(h.coll_seq)} collectives" + judge.over(row)
        out.append(replace(row, name=f"{name} buckets + {row.name}", stats={}, note=note))
    info = pr.plan_info
    assert info is not None
    out.append(replace(pr.best, name="overlapsat plan", runtime_s=plan_s, stats={},
                       note=f"{len(pr.buckets)} {'' if copied else problem.bucket_layout + ' '}"
                            f"bucket{'' if len(pr.buckets) == 1 else 's'}: "
                            f"{len(pr.bucketed)} nodes, {len(pr.bucketed.coll_seq)} "
                            f"collectives; order {info.bucketing_status} for these buckets; "
                            + ("optimal over every bucketing" if pr.proven else
                               f"bound over every bucketing {pr.bound:.1f} us")
                            + (f"; peak {fmt_bytes(pr.peak_memory)} of budget {fmt_bytes(pr.memory_budget)} "
                               f"({info.budget_source})" if pr.memory_budget is not None else "; no budget")))
    return out


class _PeerJudge:
    """A peer's bucketing judged by the whole portfolio: its best order within the plan's budget, else its best
    order that breaks only the budget, which `over` then marks (the row stays in the table)."""

    def __init__(self, planned: Problem, price: Pricing, tb: TimeBudget, steps: int) -> None:
        self.planned, self.price, self.tb, self.steps = planned, price, tb, steps

    def row(self, bs: list[Any]) -> Row | None:
        from overlapsat.plan import materialize

        if self.tb.clock_over():
            return None
        h = materialize(self.planned.relaxed, bs, self.price)
        unbudgeted = Problem(h, None, self.planned.collective_order, self.planned.bucket_cap,
                             self.planned.bucket_layout)
        rows = [r for r in run_all(unbudgeted, work_limit=self.steps, deadline=self.tb.monotonic(self.tb.deadline))
                if r.valid]
        budget = self.planned.budget
        within = [r for r in rows if budget is None or r.peak_memory <= budget]
        return min(within or rows, key=rank_key, default=None)

    def over(self, row: Row) -> str:
        b = self.planned.budget
        return "" if b is None or row.peak_memory <= b else \
            f"; OVER THE BUDGET: peak {fmt_bytes(row.peak_memory)} > {fmt_bytes(b)} ({self.planned.budget_source})"


def _other_row(graph: Graph, name: str, spec: Graph | tuple[Graph, Any], budget: int | None,
               collective_order: str) -> Row:
    other, order = spec if isinstance(spec, tuple) else (spec, None)
    if not isinstance(other, Graph):
        raise GraphError(f"other_graphs[{name!r}]: expected a Graph or (Graph, order), got {type(other).__name__}")
    ids = other.order_indices(order) if order is not None else list(range(len(other.nodes)))
    n, m = len(graph.coll_seq), len(other.coll_seq)
    row = evaluate(Problem(other, budget, collective_order), name, ids)
    return replace(row, note=f"{other.name}: {len(other)} nodes, {m} collectives (this graph: {n})")
