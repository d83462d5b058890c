"""GPU roofline and NCCL-style collective estimates, calibrated by measured tables."""

from overlapsat.cost.calibration import Calibration, Table, build_calibration, builtin_calibration, load_calibration
from overlapsat.cost.hardware import HardwareProfile, builtin_profiles, load_profile, profile_from_dict
from overlapsat.cost.hold import H200_HOLD, HeldResult, simulate_held
from overlapsat.cost.interference import (
    H200_GEMM_PAIRS,
    H200_NVLINK,
    H200_STEP,
    ContendedResult,
    Interference,
    simulate_contended,
    simulate_with_interference,
)
from overlapsat.cost.model import AnalyticalCostModel, CalibratedCostModel, CostModel, cost_model, reprice
from overlapsat.cost.nccl import CollectiveEstimate, estimate
from overlapsat.cost.polish import Polished, polish_contended, polish_held

__all__ = [
    "AnalyticalCostModel", "CalibratedCostModel", "Calibration", "CollectiveEstimate", "ContendedResult", "CostModel",
    "H200_GEMM_PAIRS", "H200_HOLD", "H200_NVLINK", "H200_STEP", "HardwareProfile", "HeldResult", "Interference", "Polished",
    "polish_contended", "polish_held", "simulate_contended", "simulate_held", "simulate_with_interference",
    "Table", "build_calibration", "builtin_calibration", "builtin_profiles", "cost_model", "estimate",
    "load_calibration", "load_profile", "profile_from_dict", "reprice",
]
