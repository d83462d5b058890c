"""The exact CP-SAT solver and the `optimize` entry point."""

from overlapsat.solver.model import Model, Scope, build
from overlapsat.solver.optimize import GapBelow, Progress, Result, Status, StoppingRule, optimize
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.result import PlanInfo, Statistics
from overlapsat.solver.search import Search
from overlapsat.solver.units import TimeScale, choose_scale, model_units, unit_walk

__all__ = ["GapBelow", "Model", "PlanInfo", "Progress", "Result", "Scope", "Search", "SolveParams", "Statistics", "Status",
           "StoppingRule", "TimeBudget", "TimeScale", "build", "choose_scale", "model_units", "optimize", "unit_walk"]
