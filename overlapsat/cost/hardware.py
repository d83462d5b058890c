"""Hardware profiles as data: built-in ones ship in cost/data/hardware.json; users add their own files."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any

from overlapsat.errors import GraphError

DATA = os.path.join(os.path.dirname(__file__), "data")
ARCHS = ("volta", "ampere", "hopper", "blackwell")


@dataclass(frozen=True)
class HardwareProfile:
    """Peak rates, achievable fractions and link parameters of one GPU type.

    Bandwidths are bytes/s; `nvlink_bw` and `net_bw` are per-GPU, per direction,
    as NCCL's bus bandwidth counts them. Latencies are microseconds.
    """

    name: str
    arch: str
    peak_flops: dict[str, float]  # dtype -> FLOP/s (dense)
    hbm_bw: float
    nvlink_bw: float
    net_bw: float
    gpus_per_node: int = 8
    flops_efficiency: float = 0.75
    hbm_efficiency: float = 0.85
    kernel_floor_us: float = 4.0
    nccl_channels: int = 16
    link_efficiency: float = 1.0  # achievable fraction of nvlink_bw / net_bw for NCCL
    pcie: bool = False
    # compute-stream time of issuing a collective and of a wait_tensor once its collective is over (decisions.md
    # 17); 0 in the built-in profiles until measured (docs/cost_model.md)
    collective_launch_us: float = 0.0
    wait_us: float = 0.0
    # what a coalesced bucket's group call costs per member beyond the first, above one flat collective of the
    # summed bytes (decisions.md 56); 0 in the built-in profiles until measured
    group_member_us: float = 0.0
    # the shipped calibration tables this profile uses (by default its own name's): a profile that only adds
    # latencies to a measured GPU keeps that GPU's tables
    calibrated_as: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"hardware profile {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise GraphError("hardware profile: 'name' must be a non-empty string")
        if self.arch not in ARCHS:
            raise GraphError(f"{where}: arch must be one of {', '.join(ARCHS)}, got {self.arch!r}")
        if not isinstance(self.peak_flops, dict) or not self.peak_flops:
            raise GraphError(f"{where}: peak_flops must map dtypes to FLOP/s")
        for k, v in self.peak_flops.items():
            _pos(v, f"{where}: peak_flops[{k!r}]")
        for f in ("hbm_bw", "nvlink_bw", "net_bw", "kernel_floor_us", "collective_launch_us", "wait_us",
                  "group_member_us"):
            _pos(getattr(self, f), f"{where}: {f}", allow_zero=f.endswith("_us"))
        for f in ("flops_efficiency", "hbm_efficiency", "link_efficiency"):
            v = getattr(self, f)
            _pos(v, f"{where}: {f}")
            if v > 1:
                raise GraphError(f"{where}: {f} is a fraction of the peak and must be <= 1, got {v!r}")
        if self.calibrated_as is not None and (not isinstance(self.calibrated_as, str) or not self.calibrated_as):
            raise GraphError(f"{where}: calibrated_as must be a profile name, got {self.calibrated_as!r}")
        for f in ("gpus_per_node", "nccl_channels"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise GraphError(f"{where}: {f} must be a positive integer, got {v!r}")

    def flops(self, dtype: str) -> float:
        if dtype in self.peak_flops:
            return self.peak_flops[dtype]
        alias = {"fp16": "bf16", "bf16": "fp16", "tf32": "fp32", "float32": "fp32", "bfloat16": "bf16",
                 "float16": "fp16"}.get(dtype)
        if alias in self.peak_flops:
            return self.peak_flops[alias]  # type: ignore[index]
        raise GraphError(f"hardware profile {self.name!r} has no peak FLOP/s for dtype {dtype!r} "
                         f"(has {', '.join(self.peak_flops)})")


def _pos(v: Any, what: str, allow_zero: bool = False) -> None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v >= 0 if allow_zero else v > 0)
    if not ok:
        raise GraphError(f"{what} must be a finite number {'>= 0' if allow_zero else '> 0'}, got {v!r}")


def profile_from_dict(d: dict[str, Any], source: str = "<dict>") -> HardwareProfile:
    if not isinstance(d, dict):
        raise GraphError(f"{source}: a hardware profile must be a JSON object")
    known = {f.name for f in fields(HardwareProfile)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise GraphError(f"{source}: unknown field(s) {', '.join(map(repr, unknown))} in hardware profile "
                         f"{d.get('name', '?')!r}")
    missing = [f for f in ("name", "arch", "peak_flops", "hbm_bw", "nvlink_bw", "net_bw") if f not in d]
    if missing:
        raise GraphError(f"{source}: hardware profile {d.get('name', '?')!r} misses field(s) {', '.join(map(repr, missing))}")
    try:
        return HardwareProfile(**d)
    except GraphError as e:
        raise GraphError(f"{source}: {e}") from None


def builtin_profiles() -> dict[str, HardwareProfile]:
    with open(os.path.join(DATA, "hardware.json"), encoding="utf-8") as f:
        data = json.load(f)
    return {d["name"]: profile_from_dict(d, "built-in hardware.json") for d in data["profiles"]}


def load_profile(name_or_path: str) -> HardwareProfile:
    """A built-in profile by name, or the (first) profile in a JSON file."""
    builtins = builtin_profiles()
    if name_or_path in builtins:
        return builtins[name_or_path]
    if not os.path.exists(name_or_path):
        raise GraphError(f"no hardware profile {name_or_path!r}: not a built-in ({', '.join(sorted(builtins))}) "
                         "and no such file")
    from overlapsat.io import read_json

    data = read_json(name_or_path, "hardware profile")
    if "profiles" in data:
        if not data["profiles"]:
            raise GraphError(f"hardware profile file {name_or_path!r} lists no profiles")
        data = data["profiles"][0]
    return profile_from_dict(data, name_or_path)
