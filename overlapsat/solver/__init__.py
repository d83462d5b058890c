"""The exact CP-SAT solver and the `optimize` entry point.

OR-Tools (CP-SAT imports pandas: 0.5 s) loads with this package in a library user's process, outside any call's
clock, so a first call gets the same work as a later one. In the command line's process and a store's worker
(`overlapsat._process`), whose limit counts from its start anyway, it loads with the first CP-SAT phase: a search
that runs none (a short limit on a large graph) does not pay it (decision 115)."""

from typing import Any

from overlapsat import _process
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


if not _process.defer_or_tools:
    from overlapsat.solver import cpsat as _cpsat  # noqa: F401 - the library's process: loaded here, not in a call
