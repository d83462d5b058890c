"""Inductor's greedy reordering passes, ported to the graph model."""

from overlapsat.heuristics.base import Heuristic, PassResult
from overlapsat.heuristics.iterative import (
    IterativeConfig,
    MoveInfo,
    reorder_communication_preserving_peak_memory,
    sink_waits_iterative,
)
from overlapsat.heuristics.memory_sorts import (
    reorder_for_peak_memory,
    topological_sort_bfs,
    topological_sort_dfs,
    topological_sort_lpmf,
)
from overlapsat.heuristics.portfolio import HeuristicResult, best, pipelines, run_all
from overlapsat.heuristics.schedule_for_comm import (
    raise_comms,
    reorder_compute_for_overlap,
    schedule_for_comm,
    sink_waits,
)

__all__ = [
    "Heuristic", "HeuristicResult", "IterativeConfig", "MoveInfo", "PassResult", "best", "pipelines",
    "raise_comms", "reorder_communication_preserving_peak_memory", "reorder_compute_for_overlap",
    "reorder_for_peak_memory", "run_all", "schedule_for_comm", "sink_waits", "sink_waits_iterative",
    "topological_sort_bfs", "topological_sort_dfs", "topological_sort_lpmf",
]
