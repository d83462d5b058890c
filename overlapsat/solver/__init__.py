"""The exact CP-SAT solver and the `optimize` entry point. OR-Tools loads with the model (`Model`, `build`): a
search that never reaches a CP-SAT phase (a short limit on a large graph) does not pay its import (0.5 s)."""

from typing import Any

from overlapsat.solver.optimize import GapBelow, Progress, Result, Status, StoppingRule, optimize
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.result import PlanInfo, Statistics
from overlapsat.solver.search import Search
from overlapsat.solver.units import TimeScale, choose_scale, model_units, unit_walk

__all__ = ["GapBelow", "Model", "PlanInfo", "Progress", "Result", "Scope", "Search", "SolveParams", "Statistics", "Status",
           "StoppingRule", "TimeBudget", "TimeScale", "build", "choose_scale", "model_units", "optimize", "unit_walk"]


def __getattr__(name: str) -> Any:
    if name in ("Model", "Scope", "build"):
        from overlapsat.solver import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
