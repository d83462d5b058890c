"""The exact CP-SAT solver and the `optimize` entry point."""

from overlapsat.solver.model import Model, build, model_units
from overlapsat.solver.optimize import RESOLUTION_US, Progress, Result, Status, optimize

__all__ = ["Model", "Progress", "RESOLUTION_US", "Result", "Status", "build", "model_units", "optimize"]
