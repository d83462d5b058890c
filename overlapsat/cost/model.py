"""Cost models: the `CostModel` protocol, the analytical roofline + NCCL model, and its calibrated form."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import overlapsat.cost.nccl as nccl
from overlapsat.cost.calibration import Calibration, builtin_calibration, load_calibration, shipped_calibrations
from overlapsat.cost.hardware import HardwareProfile, builtin_profiles, load_profile
from overlapsat.errors import GraphError
from overlapsat.graph import Graph, Node, NodeKind


@runtime_checkable
class CostModel(Protocol):
    """Anything that prices a node in microseconds (waits are always 0)."""

    def duration(self, node: Node) -> float: ...


@dataclass(frozen=True)
class AnalyticalCostModel:
    """Roofline for compute, NCCL-style model for collectives, with the profile's efficiencies."""

    hw: HardwareProfile
    dtype: str = "bf16"

    def compute_us(self, flops: float, nbytes: float) -> float:
        hw = self.hw
        t = max(flops / (hw.flops(self.dtype) * hw.flops_efficiency), nbytes / (hw.hbm_bw * hw.hbm_efficiency))
        return t * 1e6 + hw.kernel_floor_us

    def collective_us(self, op: str, nbytes: float, n: int) -> float:
        return nccl.estimate(op, nbytes, n, self.hw, self.hw.link_efficiency).time_us

    def duration(self, node: Node) -> float:
        if node.kind is NodeKind.WAIT:
            return 0.0
        if node.kind is NodeKind.COLLECTIVE:
            return self.collective_us(node.op or "all_reduce", node.nbytes, node.group_size)
        return self.compute_us(node.flops, node.bytes_accessed)


@dataclass(frozen=True)
class CalibratedCostModel:
    """The analytical model corrected by measured tables, where the profile has them."""

    base: AnalyticalCostModel
    calibration: Calibration

    @property
    def hw(self) -> HardwareProfile:
        """The profile under the tables (its latencies, such as `group_member_us`, hold for both)."""
        return self.base.hw

    def collective_us(self, op: str, nbytes: float, n: int) -> float:
        table = self.calibration.collectives.get((op, n))
        if table is None:
            return self.base.collective_us(op, nbytes, n)
        return table(nbytes, lambda b: self.base.collective_us(op, b, n))

    def compute_us(self, flops: float, nbytes: float, gemm_like: bool) -> float:
        hw, cal = self.base.hw, self.calibration
        if gemm_like and cal.gemm is not None and flops > 0:
            return cal.gemm(flops, lambda f: self.base.compute_us(f, 0.0))  # measured GEMMs include their traffic
        t_compute = flops / (hw.flops(self.base.dtype) * hw.flops_efficiency) * 1e6 + hw.kernel_floor_us
        if cal.memory is not None and nbytes > 0:
            t_mem = cal.memory(nbytes, lambda b: self.base.compute_us(0.0, b))
        else:
            t_mem = self.base.compute_us(0.0, nbytes)
        return max(t_compute, t_mem)

    def duration(self, node: Node) -> float:
        if node.kind is NodeKind.WAIT:
            return 0.0
        if node.kind is NodeKind.COLLECTIVE:
            return self.collective_us(node.op or "all_reduce", node.nbytes, node.group_size)
        return self.compute_us(node.flops, node.bytes_accessed, node.gemm_like)


def cost_model(profile: str | HardwareProfile | None = None, *, dtype: str = "bf16", calibrated: bool = True,
               calibration: str | Calibration | None = None) -> CostModel:
    """The best model for a profile: calibrated by `calibration` (a file from `overlapsat calibrate`, or a
    `Calibration`) when given, else by the tables that ship with overlapsat for that profile, if any.

    Without a profile: the calibration's own profile, or "h200".
    """
    cal = load_calibration(calibration) if isinstance(calibration, str) else calibration
    if cal is not None and not isinstance(cal, Calibration):
        raise GraphError(f"calibration must be a file path or a Calibration, got {type(calibration).__name__}")
    if profile is None:
        profile = cal.profile if cal is not None else "h200"
    hw = profile if isinstance(profile, HardwareProfile) else load_profile(profile)
    base = AnalyticalCostModel(hw, dtype)
    if cal is not None:
        if cal.profile != hw.name:
            raise GraphError(f"calibration {calibration if isinstance(calibration, str) else ''!s} was measured for "
                             f"profile {cal.profile!r}, not {hw.name!r}; pass the profile it belongs to")
        return CalibratedCostModel(base, cal)
    cal = builtin_calibration(hw.calibrated_as or hw.name) if calibrated else None
    if cal is None and calibrated and hw.calibrated_as is not None:
        raise GraphError(f"hardware profile {hw.name!r}: calibrated_as {hw.calibrated_as!r} names no calibration "
                         f"tables that ship with overlapsat (they ship for: {', '.join(shipped_calibrations())})")
    if cal is None and calibrated:
        _say_untabled_twin(hw)
    return CalibratedCostModel(base, cal) if cal is not None else base


_TWINS_CHECKED: set[str] = set()  # profile names already compared with the built-ins, said or not
_GPU_FIGURES = ("arch", "peak_flops", "hbm_bw", "nvlink_bw", "net_bw", "gpus_per_node", "nccl_channels",
                "flops_efficiency", "hbm_efficiency", "link_efficiency", "kernel_floor_us", "pcie")


def _say_untabled_twin(hw: HardwareProfile) -> None:
    """A profile of its own name with a built-in's GPU figures is priced without that GPU's measured tables: said
    once per name, since the figures suggest the user meant them (`calibrated_as` names them). Each name is compared
    with the built-ins once: `cost_model` is called per graph, and an untabled profile (h100_sxm) is common."""
    if hw.name in _TWINS_CHECKED:
        return
    _TWINS_CHECKED.add(hw.name)
    for name, b in builtin_profiles().items():
        if name != hw.name and all(getattr(b, f) == getattr(hw, f) for f in _GPU_FIGURES) and \
                builtin_calibration(b.calibrated_as or name) is not None:
            logging.getLogger(__name__).warning(
                "overlapsat: hardware profile %r has built-in %r's GPU figures but is priced without its measured "
                "tables (they are chosen by a profile's name); add \"calibrated_as\": %r to the profile to use them",
                hw.name, name, b.calibrated_as or name)
            return


def reprice(graph: Graph, model: CostModel) -> Graph:
    """A copy of `graph` with every compute and collective duration from `model`."""
    return graph.reprice(model)


__all__ = ["AnalyticalCostModel", "CalibratedCostModel", "CostModel", "cost_model", "reprice"]
