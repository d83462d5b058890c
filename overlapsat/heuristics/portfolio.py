"""Run Inductor's passes and pipelines, simulate and validate each, rank them."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from overlapsat.budget import BudgetLike, resolve_budget
from overlapsat.canonical import chained
from overlapsat.evaluate import Evaluated, evaluate, rank_key
from overlapsat.graph import Graph
from overlapsat.heuristics.base import PassResult
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
from overlapsat.heuristics.schedule_for_comm import raise_comms, reorder_compute_for_overlap, sink_waits
from overlapsat.validate import CollectiveOrder

log = logging.getLogger(__name__)

Pass = Callable[[Graph, Sequence[int]], PassResult]


HeuristicResult = Evaluated  # the portfolio's rows are evaluated orders


def _iter(cfg: IterativeConfig) -> tuple[Pass, Pass]:
    return (lambda g, o: reorder_communication_preserving_peak_memory(g, o, cfg),
            lambda g, o: sink_waits_iterative(g, o, cfg))


def pipelines(memory_budget_ratio: float = 0.2) -> dict[str, list[Pass]]:
    """The passes and pipelines the portfolio runs, by name."""
    cfg = IterativeConfig(peak_memory_budget=memory_budget_ratio)
    safe = IterativeConfig(peak_memory_budget=memory_budget_ratio, unsafe_collectives_reorder=False)
    reorder, sink = _iter(cfg)
    reorder_safe, sink_safe = _iter(safe)
    return {
        "sink_waits": [sink_waits],
        "raise_comms": [raise_comms],
        "reorder_compute_for_overlap": [reorder_compute_for_overlap],
        "sink_waits+raise_comms+reorder_compute_for_overlap": [sink_waits, raise_comms, reorder_compute_for_overlap],
        "reorder_communication_preserving_peak_memory": [reorder],
        "sink_waits_iterative": [sink],
        "reorder_iterative+sink_waits_iterative": [reorder, sink],
        "reorder_iterative+sink_waits_iterative+reorder_iterative": [reorder, sink, reorder],
        "reorder_iterative+sink_waits_iterative (safe collectives)": [reorder_safe, sink_safe],
        "reorder_for_peak_memory": [reorder_for_peak_memory],
        "topological_sort_lpmf": [topological_sort_lpmf],
        "topological_sort_bfs": [topological_sort_bfs],
        "topological_sort_dfs": [topological_sort_dfs],
    }


def run_all(g: Graph, *, memory_budget: BudgetLike = None, collective_order: CollectiveOrder = "group",
            deadline: float | None = None, include: Sequence[str] | None = None) -> list[HeuristicResult]:
    """Every pipeline on `g` (input order first), ranked: valid before invalid, then by makespan.

    Passes run on the graph with Inductor's collective chain added (as Inductor
    does before them); results are validated against the original constraints,
    so a pass that breaks one (e.g. unsafe collective reordering) is reported
    invalid, never ranked above a valid one.
    """
    budget = resolve_budget(g, memory_budget)
    # Inductor chains collectives before its passes; under "free" they run with the group chain, as in torch
    with_chain, to_g = chained(g, "group" if collective_order == "free" else collective_order)
    results = [_evaluate(g, "input_order", list(range(len(g.nodes))), 0.0, {}, budget, collective_order)]
    ratio = 0.2 if budget is None else max(0.0, budget / max(1, results[0].peak_memory) - 1.0)
    for name, passes in pipelines(ratio).items():
        if include is not None and name not in include:
            continue
        if deadline is not None and time.monotonic() > deadline:
            log.info("heuristics: deadline reached before %s", name)
            break
        t = time.perf_counter()
        order: list[int] = list(range(len(g.nodes)))
        stats: dict[str, Any] = {}
        for p in passes:
            r = p(with_chain, order)
            order = r.order
            stats[r.name] = r.stats
        order = [to_g[v] for v in order]
        results.append(_evaluate(g, name, order, time.perf_counter() - t, stats, budget, collective_order))
    results.sort(key=rank_key)
    return results


def _evaluate(g: Graph, name: str, order: list[int], runtime: float, stats: dict[str, Any], budget: int | None,
              collective_order: CollectiveOrder) -> Evaluated:
    e = evaluate(g, name, order, budget=budget, collective_order=collective_order, runtime_s=runtime, stats=stats)
    log.debug("heuristic %s: makespan %.1f valid %s", name, e.makespan, e.valid)
    return e


def best(g: Graph, *, memory_budget: BudgetLike = None, collective_order: CollectiveOrder = "group",
         deadline: float | None = None) -> HeuristicResult:
    """The best valid heuristic order (the input order if nothing beats it)."""
    return run_all(g, memory_budget=memory_budget, collective_order=collective_order, deadline=deadline)[0]
