"""GPU roofline and NCCL-style collective estimates, calibrated by measured tables."""

from overlapsat.cost.calibration import Calibration, Table, build_calibration, builtin_calibration, load_calibration
from overlapsat.cost.hardware import HardwareProfile, builtin_profiles, load_profile, profile_from_dict
from overlapsat.cost.model import AnalyticalCostModel, CalibratedCostModel, CostModel, cost_model, reprice
from overlapsat.cost.nccl import CollectiveEstimate, estimate

__all__ = [
    "AnalyticalCostModel", "CalibratedCostModel", "Calibration", "CollectiveEstimate", "CostModel", "HardwareProfile",
    "Table", "build_calibration", "builtin_calibration", "builtin_profiles", "cost_model", "estimate",
    "load_calibration", "load_profile", "profile_from_dict", "reprice",
]
