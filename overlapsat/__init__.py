"""overlapsat: the best issue order for kernels, collectives and waits."""

from overlapsat.bounds import LowerBound, lower_bound
from overlapsat.budget import MemoryBudget, resolve_budget
from overlapsat.compare import Comparison, compare
from overlapsat.errors import GraphError, InfeasibleBudgetError, NoValidOrderError
from overlapsat.evaluate import Evaluated, evaluate
from overlapsat.graph import Buffer, Graph, GraphBuilder, Node, NodeKind
from overlapsat.io import graph_from_dict, load_graph, save_graph
from overlapsat.plot import plot_timeline
from overlapsat.schedules import Schedule, load_schedule, save_schedule
from overlapsat.simulate import SimResult, peak_memory, simulate
from overlapsat.solver import GapBelow, Progress, Result, SolveParams, Status, StoppingRule, optimize
from overlapsat.store import Outcome, solve_store
from overlapsat.trace import export_chrome_trace
from overlapsat.validate import Violation, assert_valid, is_valid, validate

__version__ = "0.1.0"

__all__ = [
    "Buffer", "Comparison", "Evaluated", "NoValidOrderError", "SolveParams", "evaluate",
    "GapBelow", "Graph", "GraphBuilder", "GraphError", "InfeasibleBudgetError", "LowerBound",
    "MemoryBudget", "Node", "NodeKind", "Progress", "Result", "Schedule", "SimResult", "Status", "StoppingRule",
    "Violation", "assert_valid", "compare", "export_chrome_trace", "graph_from_dict", "is_valid", "load_graph",
    "load_schedule", "lower_bound", "optimize", "peak_memory", "plot_timeline", "resolve_budget", "save_graph",
    "save_schedule", "simulate", "validate", "Outcome", "solve_store",
]
