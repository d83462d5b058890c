"""The speed-memory trade-off of plans: the best plan found at each of a range of budgets, with its bound there.

Given X bytes, how fast can a plan be, and how far from the best possible within X is it? `plan_frontier` runs
the plan search at budgets from the lowest peak found for the graph, through the input order's peak and
torch's bucketed peak, to none, each with its share of the time limit. The points are made consistent with
what each proves about the others: a plan within a lower budget is a plan within every higher one (a point
never shows a longer plan than one below it), and a bound over the plans within a higher budget also holds over
those within a lower one (a point never shows a lower bound than one above it).
"""

from __future__ import annotations

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
from overlapsat.solver.plan_search import CAPS_MB, optimize_plan, torch_greedy


@dataclass(frozen=True)
class FrontierPoint:
    """One budget (None: none) and why it was chosen, with the best plan found within it (None: none found, and
    `error` says why), its bound over every plan within that budget, and where the plan came from when a lower
    budget's plan was shorter."""

    label: str
    budget: int | None
    result: Result | None
    bound: float
    error: str = ""
    from_budget: str = ""

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
        return [{"label": p.label, "budget_bytes": p.budget, "makespan_us": _finite(p.makespan),
                 "peak_bytes": p.peak, "bound_us": p.bound, "gap": p.gap,
                 "buckets": len(p.result.buckets) if p.result is not None else None,
                 "status": p.status,
                 "from_budget": p.from_budget, "error": p.error} for p in self.points]

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
            why = p.label + (f" (the plan of {p.from_budget}: shorter, and within this budget)" if p.from_budget
                             else "")
            lines.append(f"| {b} | {why} | {fmt_us(p.makespan)} | {fmt_bytes(p.peak or 0)} | {fmt_us(p.bound)} | "
                         f"{100 * (p.gap or 0.0):.1f}% | {len(p.result.buckets)} | {p.status} |")
        return "\n".join(lines)

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


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def default_budgets(problem: Problem, price: Pricing) -> list[tuple[str, int | None]]:
    """The budgets a frontier shows by default, lowest first: the lowest peak any unbucketed order of the
    portfolio reaches (valid apart from memory), the input order's peak, the peak of torch's greedy buckets with
    their best pass (torch bucketed), and none."""
    unbudgeted = replace(problem, budget=None, budget_default=False)
    rows = [r for r in run_all(unbudgeted) if r.valid]
    out: list[tuple[str, int | None]] = []
    if rows:
        out.append(("lowest peak found", min(r.peak_memory for r in rows)))
    out.append(("input order's peak", peak_memory(problem.graph)))
    bs = torch_greedy(unbudgeted, unbudgeted.relaxed, CAPS_MB[0])  # torch's default cap
    if bs:
        h = materialize(unbudgeted.relaxed, list(bs), price)
        brows = [r for r in run_all(unbudgeted.on(h)) if r.valid]
        if brows:
            best = min(brows, key=rank_key)  # compare's row of torch's greedy buckets
            out.append(("torch bucketed's peak", best.peak_memory))
    out.append(("no budget", None))
    seen: dict[int | None, str] = {}
    for label, b in out:
        seen[b] = f"{seen[b]}; {label}" if b in seen else label
    return sorted(((lab, b) for b, lab in seen.items()), key=lambda x: math.inf if x[1] is None else x[1])


def plan_frontier(graph: Graph | str, price: Pricing, *, budgets: list[BudgetLike] | None = None,
                  time_limit: float = 60.0, collective_order: str = "group", bucket_layout: str = "copy",
                  bucket_cap: int | str | None = None, **options: Any) -> Frontier:
    """The best plan found within each budget (`budgets`, as `memory_budget` takes them; by default
    `default_budgets`), each given an equal share of `time_limit`; `options` go to `optimize_plan`. A budget that
    no plan was found within keeps its row, saying why."""
    t0 = time.monotonic()
    g = as_graph(graph)
    base = Problem.of(g, "none", collective_order, bucket_cap, bucket_layout)
    if budgets is None:
        chosen = default_budgets(base, price)
    else:
        resolved = [(b, resolve_budget(g, b if b is not None else "none")) for b in budgets]
        chosen = sorted(((str(b) if r is not None else "no budget", r) for b, r in resolved),
                        key=lambda x: math.inf if x[1] is None else x[1])
    share = max(0.01, (time_limit - (time.monotonic() - t0)) / max(1, len(chosen)))
    raw: list[FrontierPoint] = []
    for label, b in chosen:
        pb = replace(base, budget=b)
        try:
            r = optimize_plan(pb, price, time_limit=share, **options)
            raw.append(FrontierPoint(label, b, r, r.bound))
        except GraphError as e:  # no plan found within it (or none exists, proven): the row says which
            raw.append(FrontierPoint(label, b, None, 0.0, str(e).split(";")[0]))
    floor, node = peak_floor(base.relaxed)
    return Frontier(g.name, tuple(_consistent(raw)), peak_memory(g), floor, node)


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
