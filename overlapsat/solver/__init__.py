"""The exact CP-SAT solver and the `optimize` entry point."""

from overlapsat.solver.model import Model, build, model_units
from overlapsat.solver.optimize import (
    RESOLUTION_US,
    GapBelow,
    Progress,
    Result,
    Status,
    StoppingRule,
    optimize,
)

__all__ = ["GapBelow", "Model", "Progress", "RESOLUTION_US", "Result", "Status", "StoppingRule", "build", "model_units",
           "optimize"]
