"""overlapsat: the best issue order for kernels, collectives and waits.

The public names load on first use, so that `import overlapsat` (and the command line's first moments,
where Ctrl-C must not print a traceback) cost nothing until they are needed."""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overlapsat.bounds import LowerBound, lower_bound
    from overlapsat.budget import MemoryBudget, resolve_budget
    from overlapsat.compare import Comparison, compare
    from overlapsat.errors import GraphError, InfeasibleBudgetError, NoValidOrderError
    from overlapsat.evaluate import Evaluated, evaluate
    from overlapsat.frontier import Frontier, FrontierPoint, plan_frontier
    from overlapsat.graph import Buffer, Graph, GraphBuilder, Node, NodeKind
    from overlapsat.io import graph_from_dict, load_graph, save_graph
    from overlapsat.plan import Bucket, Plan, materialize
    from overlapsat.plot import plot_timeline
    from overlapsat.problem import Problem
    from overlapsat.schedules import Schedule, load_schedule, save_schedule
    from overlapsat.simulate import SimResult, peak_memory, simulate
    from overlapsat.solver import GapBelow, PlanInfo, Progress, Result, SolveParams, Statistics, Status, StoppingRule, optimize
    from overlapsat.solver.plan_search import optimize_plan
    from overlapsat.store import Outcome, solve_store
    from overlapsat.trace import export_chrome_trace
    from overlapsat.validate import Violation, assert_valid, is_valid, validate

__version__ = "0.1.0"

_WHERE = {
    "LowerBound": "overlapsat.bounds",
    "lower_bound": "overlapsat.bounds",
    "MemoryBudget": "overlapsat.budget",
    "resolve_budget": "overlapsat.budget",
    "Comparison": "overlapsat.compare",
    "compare": "overlapsat.compare",
    "Frontier": "overlapsat.frontier",
    "FrontierPoint": "overlapsat.frontier",
    "plan_frontier": "overlapsat.frontier",
    "GraphError": "overlapsat.errors",
    "InfeasibleBudgetError": "overlapsat.errors",
    "NoValidOrderError": "overlapsat.errors",
    "Evaluated": "overlapsat.evaluate",
    "evaluate": "overlapsat.evaluate",
    "Buffer": "overlapsat.graph",
    "Graph": "overlapsat.graph",
    "GraphBuilder": "overlapsat.graph",
    "Node": "overlapsat.graph",
    "NodeKind": "overlapsat.graph",
    "graph_from_dict": "overlapsat.io",
    "load_graph": "overlapsat.io",
    "save_graph": "overlapsat.io",
    "Bucket": "overlapsat.plan",
    "Plan": "overlapsat.plan",
    "materialize": "overlapsat.plan",
    "plot_timeline": "overlapsat.plot",
    "Problem": "overlapsat.problem",
    "Schedule": "overlapsat.schedules",
    "load_schedule": "overlapsat.schedules",
    "save_schedule": "overlapsat.schedules",
    "SimResult": "overlapsat.simulate",
    "peak_memory": "overlapsat.simulate",
    "simulate": "overlapsat.simulate",
    "GapBelow": "overlapsat.solver",
    "Progress": "overlapsat.solver",
    "Result": "overlapsat.solver",
    "PlanInfo": "overlapsat.solver",
    "Statistics": "overlapsat.solver",
    "SolveParams": "overlapsat.solver",
    "Status": "overlapsat.solver",
    "StoppingRule": "overlapsat.solver",
    "optimize": "overlapsat.solver",
    "optimize_plan": "overlapsat.solver.plan_search",
    "Outcome": "overlapsat.store",
    "solve_store": "overlapsat.store",
    "export_chrome_trace": "overlapsat.trace",
    "Violation": "overlapsat.validate",
    "assert_valid": "overlapsat.validate",
    "is_valid": "overlapsat.validate",
    "validate": "overlapsat.validate",
}

__all__ = [
    "Bucket",
    "Buffer",
    "Comparison",
    "Evaluated",
    "Frontier",
    "FrontierPoint",
    "GapBelow",
    "Graph",
    "GraphBuilder",
    "GraphError",
    "InfeasibleBudgetError",
    "LowerBound",
    "MemoryBudget",
    "NoValidOrderError",
    "Node",
    "NodeKind",
    "Plan",
    "Problem",
    "Outcome",
    "PlanInfo",
    "Progress",
    "Result",
    "Schedule",
    "SimResult",
    "Statistics",
    "SolveParams",
    "Status",
    "StoppingRule",
    "Violation",
    "assert_valid",
    "compare",
    "evaluate",
    "export_chrome_trace",
    "graph_from_dict",
    "is_valid",
    "load_graph",
    "load_schedule",
    "lower_bound",
    "materialize",
    "optimize",
    "optimize_plan",
    "peak_memory",
    "plan_frontier",
    "plot_timeline",
    "resolve_budget",
    "save_graph",
    "save_schedule",
    "simulate",
    "solve_store",
    "validate",
]


class _Package(types.ModuleType):
    """Where a public name is also a submodule's (`validate`, `simulate`, `compare`), the public function wins,
    as it did when this file imported everything: importing the submodule binds its function here."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _WHERE and isinstance(value, types.ModuleType) and hasattr(value, name):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'overlapsat' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
