"""Run Inductor's passes and pipelines, simulate and validate each, rank them."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from overlapsat.budget import BudgetLike
from overlapsat.canonical import chained
from overlapsat.evaluate import Evaluated, evaluate, only_over_budget, rank_key
from overlapsat.gc_pause import paused_gc
from overlapsat.graph import Graph
from overlapsat.heuristics.base import PassResult
from overlapsat.heuristics.fit_budget import fit_budget
from overlapsat.heuristics.iterative import (
    IterativeConfig,
    reorder_communication_preserving_peak_memory,
    sink_waits_iterative,
)
from overlapsat.heuristics.memory_sorts import (
    reorder_for_peak_memory,
    topological_sort_bfs,
    topological_sort_dfs,
    topological_sort_lpmf,
)
from overlapsat.heuristics.prefetch import MODES, prefetch_within_budget
from overlapsat.heuristics.schedule_for_comm import raise_comms, reorder_compute_for_overlap, sink_waits
from overlapsat.problem import Problem, as_problem
from overlapsat.validate import CollectiveOrder

log = logging.getLogger(__name__)

Pass = Callable[[Graph, Sequence[int], "int | None"], PassResult]  # (graph, order, work limit)

HeuristicResult = Evaluated  # the portfolio's rows are evaluated orders

# Inductor's iterative passes visit about 0.4 M list positions per second on this project's 2-core
# reference machine (docs/heuristics.md); `optimize` turns its portfolio share of the time into steps.
ITERATIVE_STEPS_PER_SECOND = 400_000
# ... and never fewer than this (about 0.6 s): enough for every pass to finish on graphs of a few thousand
# nodes, so a short time limit never makes the result worse than a complete Inductor pass there
ITERATIVE_STEPS_MIN = 250_000


def _cheap(fn: Callable[[Graph, Sequence[int]], PassResult]) -> Pass:
    return lambda g, o, work: fn(g, o)


def _iter(cfg: IterativeConfig) -> tuple[Pass, Pass]:
    return (lambda g, o, work: reorder_communication_preserving_peak_memory(g, o, cfg, work),
            lambda g, o, work: sink_waits_iterative(g, o, cfg, work))


def pipelines(memory_budget_ratio: float = 0.2) -> dict[str, list[Pass]]:
    """The passes and pipelines the portfolio runs, by name: linear ones first, the iterative ones last."""
    cfg = IterativeConfig(peak_memory_budget=memory_budget_ratio)
    safe = IterativeConfig(peak_memory_budget=memory_budget_ratio, unsafe_collectives_reorder=False)
    reorder, sink = _iter(cfg)
    reorder_safe, sink_safe = _iter(safe)
    sw, rc, rco = _cheap(sink_waits), _cheap(raise_comms), _cheap(reorder_compute_for_overlap)
    return {
        "sink_waits": [sw],
        "raise_comms": [rc],
        "reorder_compute_for_overlap": [rco],
        "sink_waits+raise_comms+reorder_compute_for_overlap": [sw, rc, rco],
        "reorder_for_peak_memory": [_cheap(reorder_for_peak_memory)],
        "topological_sort_lpmf": [_cheap(topological_sort_lpmf)],
        "topological_sort_bfs": [_cheap(topological_sort_bfs)],
        "topological_sort_dfs": [_cheap(topological_sort_dfs)],
        "sink_waits_iterative": [sink],
        "reorder_communication_preserving_peak_memory": [reorder],
        "reorder_iterative+sink_waits_iterative": [reorder, sink],
        "reorder_iterative+sink_waits_iterative+reorder_iterative": [reorder, sink, reorder],
        "reorder_iterative+sink_waits_iterative (safe collectives)": [reorder_safe, sink_safe],
    }


# under a budget, the best orders that break only it (and beat every valid pass) are fitted under it
# (fit_budget.py), each with at most FIT_MOVES kept moves: a deterministic cap, about 0.1-0.3 s a fit at 8k nodes
# on this 2-core machine
FIT_ORDERS = 3
FIT_MOVES = 64
FITTED = ", fitted to the budget"
# under a budget, the two fastest valid orders and the input order (PREFETCH_ORDERS in all) get their collectives
# and waits re-placed within it (prefetch.py), in each mode: linear, about 0.03 s a run at 4k nodes and 0.07 s at
# 8k on this 2-core machine
PREFETCH_ORDERS = 3
PREFETCHED = ", prefetched "

ITERATIVE = frozenset(name for name in pipelines() if "iterative" in name or name.startswith("reorder_communication"))


@paused_gc()  # the passes' tables are millions of small lists at production sizes (gc_pause.py)
def run_all(problem: Problem | Graph, *, memory_budget: BudgetLike = None,
            collective_order: CollectiveOrder | None = None, deadline: float | None = None,
            include: Sequence[str] | None = None, work_limit: int | None = None,
            report: dict[str, list[str]] | None = None, fits: int = FIT_ORDERS,
            prefetch: int = PREFETCH_ORDERS, nearest: int = FIT_ORDERS) -> list[HeuristicResult]:
    """Every pipeline on `g` (input order first), ranked: valid before invalid, then by makespan.

    Passes run on the graph with Inductor's collective chain added (as Inductor
    does before them); results are validated against the original constraints,
    so a pass that breaks one (e.g. unsafe collective reordering) is reported
    invalid, never ranked above a valid one.

    Linear passes run first. `work_limit` caps the steps of the iterative
    passes together (deterministic, unlike `deadline`): a pass that reaches it
    stops between two moves, with a valid order, and says so in its stats.
    Pipelines that share a first stage compute it once. `report`, where given, gets the pipelines the work
    limit left out (`"work_limit"`), and those the deadline left out (`"deadline"`: load decides those, so a
    deterministic caller says so). `nearest`: where no order is valid, how many of the lowest-peak orders are fitted
    beside the `fits` fastest (decision 91); the plan search's scores, a cheap screen under a clock, fit none.
    """
    pb = as_problem(problem, memory_budget, collective_order)
    budget, collective_order = pb.budget, pb.collective_order  # type: ignore[assignment]
    # The passes see what Inductor's do: the graph as captured (its own chain edges kept) with the collective
    # chain added ("group" under "free"); their orders are judged on the graph under the chosen level.
    with_chain, to_g = chained(pb.graph, "group" if collective_order == "free" else collective_order)
    judged = pb.on(pb.relaxed)
    g = judged.graph
    results = [_evaluate(judged, "input_order", list(range(len(g.nodes))), 0.0, {})]
    ratio = 0.2 if budget is None else max(0.0, budget / max(1, results[0].peak_memory) - 1.0)
    steps_left = work_limit
    stages: dict[tuple[int, ...], tuple[list[int], str, dict[str, Any], float]] = {}  # by the prefix's pass ids
    longest = 0.0  # the longest pipeline so far (its passes and its evaluation): none starts that would end late
    todo = [(nm, ps) for nm, ps in pipelines(ratio).items() if include is None or nm in include]
    for k, (name, passes) in enumerate(todo):
        t_pipe = time.monotonic()
        if deadline is not None and t_pipe + longest > deadline:
            log.info("heuristics: deadline reached before %s", name)
            if report is not None:
                report.setdefault("deadline", []).extend(nm for nm, _ in todo[k:])
            break
        if steps_left is not None and steps_left <= 0 and name in ITERATIVE:
            log.info("heuristics: work limit reached before %s", name)
            if report is not None:
                report.setdefault("work_limit", []).append(name)
            continue
        order: list[int] = list(range(len(g.nodes)))
        stats: dict[str, Any] = {}
        runtime = 0.0
        key: tuple[int, ...] = ()
        for p in passes:
            key += (id(p),)
            if key in stages:
                order, pname, st, rt = stages[key]
            else:
                t = time.perf_counter()
                r = p(with_chain, order, steps_left)
                rt = time.perf_counter() - t
                order, pname, st = r.order, r.name, r.stats
                if steps_left is not None:
                    steps_left -= int(st.get("work_steps", 0))
                stages[key] = (order, pname, st, rt)
            stats[pname if pname not in stats else f"{pname} (again)"] = st
            runtime += rt
        order = [to_g[v] for v in order]
        results.append(_evaluate(judged, name, order, runtime, stats))
        longest = max(longest, time.monotonic() - t_pipe)
    if budget is not None:
        results += _prefetched(judged, results, deadline, prefetch, report)
        results += _fitted(judged, results, deadline, fits, report, nearest)
    results.sort(key=rank_key)
    return results


def to_prefetch(results: Sequence[Evaluated], prefetch: int = PREFETCH_ORDERS) -> list[Evaluated]:
    """The `prefetch` orders `run_all` re-places collectives in under a budget: the fastest valid rows of the
    passes, and the input order where there is room for it beside one of them."""
    rows = [h for h in results if PREFETCHED not in h.name and FITTED not in h.name]
    valid = sorted((h for h in rows if h.valid), key=lambda h: (h.makespan, h.name))
    if prefetch <= 1:
        return valid[:prefetch]
    given = [h for h in rows if h.name == "input_order"][:1]
    return [h for h in valid if all(h is not x for x in given)][:prefetch - len(given)] + given


def prefetched_names(results: Sequence[Evaluated]) -> list[str]:
    return [f"{h.name}{PREFETCHED}({mode})" for h in to_prefetch(results) for mode in MODES]


def _prefetched(judged: Problem, results: list[Evaluated], deadline: float | None,
                prefetch: int, report: dict[str, list[str]] | None = None) -> list[Evaluated]:
    g, budget, level = judged.graph, judged.budget, judged.collective_order
    return _passes_on_rows(judged, [(h, f"{h.name}{PREFETCHED}({mode})", "prefetch",
                                     functools.partial(prefetch_within_budget, g, budget=budget,
                                                       collective_order=level, mode=mode))
                                    for h in to_prefetch(results, prefetch) for mode in MODES], deadline, report)


def to_fit(results: Sequence[Evaluated], fits: int = FIT_ORDERS, nearest: int = FIT_ORDERS) -> list[Evaluated]:
    """The orders `run_all` fits under the budget: the FIT_ORDERS best that break only the memory budget and are
    faster than every valid order (a fit postpones and hoists, so it rarely gains time). Where no order is valid,
    also the `nearest` lowest peaks: the fastest orders are often far over a tight budget, while the orders
    nearest it (the input order, a memory sort) fit in a few moves, and without one valid order there is no
    search at all (decision 91)."""
    best_valid = min((h.makespan for h in results if h.valid and FITTED not in h.name), default=float("inf"))
    over = [h for h in results if not h.valid and only_over_budget(h) and FITTED not in h.name]
    fast = [h for h in sorted(over, key=lambda h: (h.makespan, h.name)) if h.makespan < best_valid][:fits]
    if best_valid < float("inf"):
        return fast
    chosen = {id(h) for h in fast}
    low = [h for h in sorted(over, key=lambda h: (h.peak_memory, h.makespan, h.name)) if id(h) not in chosen]
    return fast + low[:nearest]


def _fitted(judged: Problem, results: list[Evaluated], deadline: float | None, fits: int,
            report: dict[str, list[str]] | None = None, nearest: int = FIT_ORDERS) -> list[Evaluated]:
    g, budget, level = judged.graph, judged.budget, judged.collective_order
    return _passes_on_rows(judged, [(h, h.name + FITTED, "fit_budget",
                                     functools.partial(fit_budget, g, budget=budget, collective_order=level,
                                                       max_moves=FIT_MOVES))
                                    for h in to_fit(results, fits, nearest)], deadline, report)


def _passes_on_rows(judged: Problem, jobs: list[tuple[Evaluated, str, str, Callable[..., PassResult]]],
                    deadline: float | None, report: dict[str, list[str]] | None = None) -> list[Evaluated]:
    """Each job (a row, the new row's name, its stats key, a pass taking the row's order) run and evaluated, its
    time added to the row's; none starts that would end past `deadline` by the longest so far (those left out
    are listed in `report["deadline"]`)."""
    out = []
    longest = 0.0
    for k, (h, name, key, run) in enumerate(jobs):
        if deadline is not None and time.monotonic() + longest > deadline:
            log.info("heuristics: deadline reached before %s", name)
            if report is not None:
                report.setdefault("deadline", []).extend(job[1] for job in jobs[k:])
            break
        t = time.perf_counter()
        r = run(h.order)
        out.append(_evaluate(judged, name, r.order, h.runtime_s + time.perf_counter() - t, {**h.stats, key: r.stats}))
        longest = max(longest, time.perf_counter() - t)
    return out


def _evaluate(problem: Problem, name: str, order: list[int], runtime: float, stats: dict[str, Any]) -> Evaluated:
    e = evaluate(problem, name, order, runtime_s=runtime, stats=stats)
    if any(isinstance(st, dict) and st.get("interrupted") for st in stats.values()):
        e = replace(e, note="cut short by the work limit")
    log.debug("heuristic %s: makespan %.1f valid %s", name, e.makespan, e.valid)
    return e


def best(problem: Problem | Graph, *, memory_budget: BudgetLike = None,
         collective_order: CollectiveOrder | None = None, deadline: float | None = None) -> HeuristicResult:
    """The best valid heuristic order (the input order if nothing beats it)."""
    return run_all(problem, memory_budget=memory_budget, collective_order=collective_order, deadline=deadline)[0]
