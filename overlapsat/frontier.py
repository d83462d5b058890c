"""The speed-memory trade-off of plans: the best plan found at each of a range of budgets, with its bound there.

Given X bytes, how fast can a plan be, and how far from the best possible within X is it? `plan_frontier` runs
the plan search at budgets from the lowest peak found for the graph, through the input order's peak and
torch's bucketed peak, to none, each with its share of the time limit. The points are made consistent with
what each proves about the others: a plan within a lower budget is a plan within every higher one (a point
never shows a longer plan than one below it), and a bound over the plans within a higher budget also holds over
those within a lower one (a point never shows a lower bound than one above it).
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, replace
from typing import Any

from overlapsat.budget import BudgetLike, resolve_budget
from overlapsat.errors import GraphError
from overlapsat.evaluate import rank_key
from overlapsat.fmt import fmt_bytes, fmt_us
from overlapsat.graph import Graph
from overlapsat.heuristics.portfolio import run_all
from overlapsat.io import STDOUT, as_graph, check_writable
from overlapsat.plan import Pricing, materialize
from overlapsat.problem import Problem
from overlapsat.simulate import peak_memory
from overlapsat.solver.memory_bound import peak_floor
from overlapsat.solver.optimize import Result, meets
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.plan_bound import reach_note
from overlapsat.solver.plan_result import finite_or_none
from overlapsat.solver.plan_search import CAPS_MB, optimize_plan, torch_greedy

log = logging.getLogger(__name__)
DEFAULTS_SHARE = 0.25  # of the time limit, at most, for finding the default budgets (two portfolio runs)
# what one budget's plan search costs at the least, per node of the graph: `optimize_plan` under a budget with a
# limit of 0.3 s took 1.02 s at 7,928 nodes and 1.57 s at 13,403 (2026-12-02, this 2-core machine)
LEAST_PLAN_S_PER_NODE = 1.2e-4
# what the default budgets' two portfolio runs cost at the least, per node (their first passes: 1.3 s at 13,403
# nodes with a 0.5-s deadline); below it, by default, only the input order's peak and none
DEFAULTS_S_PER_NODE = 1e-4


@dataclass(frozen=True)
class FrontierPoint:
    """One budget (None: none) and why it was chosen, with the best plan found within it (None: none found, and
    `error` says why), its bound over every plan within that budget, and where the plan came from when a lower
    budget's plan was shorter. `searched`: False where the time limit left no room for this budget's own search
    (`_affordable`): its plan, if any, is a lower budget's."""

    label: str
    budget: int | None
    result: Result | None
    bound: float
    error: str = ""
    from_budget: str = ""
    searched: bool = True

    @property
    def makespan(self) -> float:
        return self.result.makespan if self.result is not None else math.inf

    @property
    def peak(self) -> int | None:
        return self.result.peak_memory if self.result is not None else None

    @property
    def status(self) -> str:
        """"optimal" where the plan meets the bound within this budget (proven), "no plan found", else "open"."""
        if self.result is None:
            return "no plan found"
        return "optimal" if meets(self.makespan, self.bound) else "open"

    @property
    def reach_us(self) -> float | None:
        """The best order found of the relaxation over every bucketing within this budget (decision 113): no bound
        from it passes this. None where it was not ordered (or the plan is a lower budget's)."""
        info = self.result.plan_info if self.result is not None and not self.from_budget else None
        return info.relaxation_reach_us if info is not None else None

    @property
    def gap(self) -> float | None:
        """(makespan - bound) / makespan; 0 where the bound is met (the plan is optimal within this budget)."""
        if self.result is None or not self.makespan:
            return None
        return 0.0 if meets(self.makespan, self.bound) else max(0.0, (self.makespan - self.bound) / self.makespan)


@dataclass(frozen=True)
class Frontier:
    """The best plan found at each budget, lowest budget first (`plan_frontier`)."""

    graph: str
    points: tuple[FrontierPoint, ...]
    input_peak: int
    peak_floor: int = 0  # no plan peaks below it (proven, decision 71): the left end the search may reach
    floor_node: str = ""  # the node whose step holds it in every order

    def records(self) -> list[dict[str, Any]]:
        return [{"label": p.label, "budget_bytes": p.budget, "makespan_us": finite_or_none(p.makespan),
                 "peak_bytes": p.peak, "bound_us": p.bound, "gap": p.gap,
                 "buckets": len(p.result.buckets) if p.result is not None else None,
                 "status": p.status, "relaxation_reach_us": p.reach_us,
                 "from_budget": p.from_budget, "error": p.error, "searched": p.searched} for p in self.points]

    def to_markdown(self) -> str:
        floor = (f"; no plan peaks below {fmt_bytes(self.peak_floor)}, proven: the step of {self.floor_node!r} holds "
                 f"that much in every order" if self.peak_floor > 0 else "")
        lines = [f"Plans of {self.graph} by memory budget (input order's peak {fmt_bytes(self.input_peak)}{floor}):",
                 "",
                 "| budget | why this budget | makespan | peak | bound within the budget | gap | buckets | status |",
                 "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        for p in self.points:
            b = fmt_bytes(p.budget) if p.budget is not None else "none"
            if p.result is None:
                lines.append(f"| {b} | {p.label} | no plan found ({p.error}) | - | {fmt_us(p.bound)} | - | - | - |")
                continue
            why = p.label + ("" if not p.from_budget else f" (the plan of {p.from_budget}: shorter, and within this "
                             "budget)" if p.searched else f" (not searched in the time limit: the plan of "
                             f"{p.from_budget}, within this budget)")
            lines.append(f"| {b} | {why} | {fmt_us(p.makespan)} | {fmt_bytes(p.peak or 0)} | {fmt_us(p.bound)} | "
                         f"{100 * (p.gap or 0.0):.1f}% | {len(p.result.buckets)} | {p.status} |")
        notes = [f"- {fmt_bytes(p.budget) if p.budget is not None else 'none'}: {note}" for p in self.points
                 if p.result is not None and (note := reach_note(p.bound, p.makespan, p.reach_us, p.budget))]
        return "\n".join(lines + (["", "Where the bound's relaxation cannot reach the plan:", *notes] if notes else []))

    def plot(self, path: str | os.PathLike[str]) -> str:
        """Makespan (and bound) against the budget, as a step picture (.png or .svg)."""
        if os.fspath(path) == STDOUT:
            raise GraphError("a frontier picture is a file (.png or .svg), not '-'")
        check_writable(path)
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise GraphError("the frontier picture needs matplotlib (pip install matplotlib)") from e
        pts = [p for p in self.points if p.result is not None]
        top = max([p.budget for p in pts if p.budget is not None] + [p.peak or 0 for p in pts] + [1])
        xs = [(p.budget if p.budget is not None else max(top, p.peak or 0) * 1.1) / 2**30 for p in pts]
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        ax.step(xs, [p.makespan / 1e3 for p in pts], where="post", marker="o", label="best plan found")
        ax.step(xs, [p.bound / 1e3 for p in pts], where="post", linestyle="--", label="bound within the budget")
        for x, p in zip(xs, pts):
            ax.annotate(p.label, (x, p.makespan / 1e3), fontsize=7, rotation=20, xytext=(3, 4),
                        textcoords="offset points")
        ax.axvline(self.input_peak / 2**30, color="grey", linewidth=0.8)
        if self.peak_floor > 0:  # left of it no plan exists (proven)
            ax.axvline(self.peak_floor / 2**30, color="red", linewidth=0.8, linestyle=":",
                       label="no plan peaks lower (proven)")
        ax.set_xlabel("memory budget, GiB (rightmost: none)")
        ax.set_ylabel("makespan, ms")
        ax.set_title(f"{self.graph}: speed against memory")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.fspath(path))
        plt.close(fig)
        return os.fspath(path)


def default_budgets(problem: Problem, price: Pricing, work_limit: int | None = None,
                    deadline: float | None = None) -> list[tuple[str, int | None]]:
    """The budgets a frontier shows by default, lowest first: the lowest peak any unbucketed order of the
    portfolio reaches (valid apart from memory), the input order's peak, the peak of torch's greedy buckets with
    their best pass (torch bucketed), and none. `work_limit` and `deadline` go to both portfolio runs (`run_all`:
    the steps of the iterative passes, and no pass starting past the deadline); a pass the deadline left out is
    logged, as it makes the budgets depend on the machine."""
    unbudgeted = replace(problem, budget=None, budget_default=False)
    report: dict[str, list[str]] = {}
    rows = [r for r in run_all(unbudgeted, work_limit=work_limit, deadline=deadline, report=report) if r.valid]
    out: list[tuple[str, int | None]] = []
    if rows:
        out.append(("lowest peak found", min(r.peak_memory for r in rows)))
    out.append(("input order's peak", peak_memory(problem.graph)))
    bs = torch_greedy(unbudgeted, unbudgeted.relaxed, CAPS_MB[0])  # torch's default cap
    if bs:
        h = materialize(unbudgeted.relaxed, list(bs), price)
        brows = [r for r in run_all(unbudgeted.on(h), work_limit=work_limit, deadline=deadline, report=report)
                 if r.valid]
        if brows:
            best = min(brows, key=rank_key)  # compare's row of torch's greedy buckets
            out.append(("torch bucketed's peak", best.peak_memory))
    out.append(("no budget", None))
    if report.get("deadline"):
        log.warning("frontier: the time limit left %d passes out of the default budgets' portfolios; those budgets "
                    "may differ across machines: raise the time limit, or give --budgets", len(report["deadline"]))
    seen: dict[int | None, str] = {}
    for label, b in out:
        seen[b] = f"{seen[b]}; {label}" if b in seen else label
    return sorted(((lab, b) for b, lab in seen.items()), key=lambda x: math.inf if x[1] is None else x[1])


def plan_frontier(graph: Graph | str, price: Pricing, *, budgets: list[BudgetLike] | None = None,
                  time_limit: float = 60.0, collective_order: str = "group", bucket_layout: str = "copy",
                  bucket_cap: int | str | None = None, clock: TimeBudget | None = None,
                  **options: Any) -> Frontier:
    """The best plan found within each budget (`budgets`, as `memory_budget` takes them; by default
    `default_budgets`, found with at most `DEFAULTS_SHARE` of the time), under one clock: the memory floor first,
    then each budget's plan search gets an equal share of what is left when it starts (one that ran long costs the
    ones after it, not the limit). `clock`: the budget of a caller whose limit this is (a command's, counted from
    its start): the deadline is its, while what the frontier searches is priced by `time_limit` as given, so the
    same rows come on any machine. `options` go to `optimize_plan`. A budget that no plan was found within keeps
    its row, saying why."""
    # a limit every search would refuse is named, not raised to 0.01 s; a deterministic search's workers are said
    # once for the frontier, not once per budget, and left out of the budgets' searches (one worker either way)
    params = SolveParams.from_kwargs(time_limit=time_limit, **{k: options[k] for k in ("workers", "deterministic")
                                                               if k in options})
    params.say_one_worker(clock)
    if params.deterministic:
        options.pop("workers", None)
    end = time.monotonic() + (clock.wall_left() if clock is not None else time_limit)
    g = as_graph(graph)
    input_peak = peak_memory(g)  # the default budget, a row, and the frontier's reference
    base = Problem.of(g, "none", collective_order, bucket_cap, bucket_layout)
    if budgets is None and DEFAULTS_SHARE * time_limit < DEFAULTS_S_PER_NODE * len(g.nodes):
        log.warning("frontier: a %g-s limit leaves no room to find the lowest peak and torch bucketed's at %d nodes; "
                    "the frontier shows the input order's peak and no budget (raise the time limit, or give "
                    "--budgets)", time_limit, len(g.nodes))
        chosen = [("input order's peak", input_peak), ("no budget", None)]
    elif budgets is None:  # two portfolio runs: 14.6 s at 13.4k nodes where nothing limited them
        chosen = default_budgets(base, price, params.portfolio_steps,
                                 min(end, time.monotonic() + DEFAULTS_SHARE * time_limit))
    else:
        resolved = [(b, resolve_budget(g, b if b is not None else "none")) for b in budgets]
        chosen = sorted(((str(b) if r is not None else "no budget", r) for b, r in resolved),
                        key=lambda x: math.inf if x[1] is None else x[1])
    floor, node = peak_floor(base.relaxed)
    planned = _affordable(chosen, time_limit * (1 - DEFAULTS_SHARE if budgets is None else 1), len(g.nodes),
                          input_peak)
    raw: list[FrontierPoint] = []
    for label, b in chosen:
        if (label, b) not in planned:  # a function of the limit and the graph's size, not of the clock
            raw.append(FrontierPoint(label, b, None, 0.0, f"not searched: a {time_limit:g}-s frontier has room for "
                                     f"{len(planned)} of its {len(chosen)} budgets' plan searches at "
                                     f"{len(g.nodes):,} nodes; raise the time limit", searched=False))
            continue
        k = planned.index((label, b))
        share = max(0.01, (end - time.monotonic()) / (len(planned) - k))
        pb = replace(base, budget=b)
        try:
            r = optimize_plan(pb, price, time_limit=share, **options)
            raw.append(FrontierPoint(label, b, r, r.bound))
        except GraphError as e:  # no plan found within it (or none exists, proven): the row says which
            raw.append(FrontierPoint(label, b, None, 0.0, str(e).split(";")[0]))
    return Frontier(g.name, tuple(_consistent(raw)), input_peak, floor, node)


def _affordable(chosen: list[tuple[str, int | None]], seconds: float, nodes: int,
                default: int) -> list[tuple[str, int | None]]:
    """The budgets whose plan searches fit `seconds` at `LEAST_PLAN_S_PER_NODE` each, in `chosen`'s order (lowest
    first), at least one: `default` bytes (the input order's peak, the budget a plan gets by default, whatever its
    row is called) first, then the others from the lowest up (a plan within a lower budget stands for every
    higher one, `_consistent`)."""
    fit = max(1, min(len(chosen), int(seconds / max(1e-9, LEAST_PLAN_S_PER_NODE * nodes))))
    ranked = sorted(chosen, key=lambda c: c[1] != default)  # stable: the rest keep their order
    keep = set(ranked[:fit])
    return [c for c in chosen if c in keep]


def _consistent(points: list[FrontierPoint]) -> list[FrontierPoint]:
    """Each point's plan no longer than any lower budget's (that plan is within this budget too), and its bound
    no lower than any higher budget's (fewer plans are within a lower budget)."""
    out: list[FrontierPoint] = []
    best: FrontierPoint | None = None
    for p in points:
        if best is not None and best.makespan < p.makespan - 1e-9 * max(1.0, best.makespan):
            p = replace(p, result=best.result, error="", from_budget=best.from_budget or _budget_text(best))
        if p.result is not None and (best is None or p.makespan < best.makespan):
            best = p
        out.append(p)
    lift = 0.0
    for k in range(len(out) - 1, -1, -1):
        lift = max(lift, out[k].bound)
        out[k] = replace(out[k], bound=lift)
    return out


def _budget_text(p: FrontierPoint) -> str:
    return f"{fmt_bytes(p.budget)} ({p.label})" if p.budget is not None else p.label


__all__ = ["Frontier", "FrontierPoint", "default_budgets", "plan_frontier"]
