"""Measured tables that correct the analytical model, by log-log interpolation.

A table maps size -> time for one collective op and group size, or FLOPs ->
time for GEMMs and bytes -> time for memory-bound kernels. Inside a table's
range the prediction interpolates linearly in log(size)/log(time), so it is
exact at the measured points; outside, the analytical model is scaled by the
table/model ratio at the nearest end.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.io import atomic_write_text, read_json

FORMAT = "overlapsat-calibration"
DATA = os.path.join(os.path.dirname(__file__), "data")  # the tables that ship, one file per profile


@dataclass(frozen=True)
class Table:
    """Sorted (x, time_us) points; x is bytes or FLOPs."""

    xs: tuple[float, ...]
    us: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.xs) != len(self.us) or not self.xs:
            raise GraphError("calibration table: needs matching, non-empty x and time lists")
        for x, t in zip(self.xs, self.us):
            if not (isinstance(x, (int, float)) and isinstance(t, (int, float)) and x > 0 and t > 0
                    and math.isfinite(x) and math.isfinite(t)):
                raise GraphError(f"calibration table: points must be positive and finite, got ({x!r}, {t!r})")
        if list(self.xs) != sorted(self.xs) or len(set(self.xs)) != len(self.xs):
            raise GraphError("calibration table: x values must be strictly increasing")

    @classmethod
    def from_points(cls, points: Sequence[tuple[float, float]]) -> Table:
        pts = sorted(points)
        return cls(tuple(float(x) for x, _ in pts), tuple(float(t) for _, t in pts))

    def __call__(self, x: float, model: Callable[[float], float] | None = None) -> float:
        xs, us = self.xs, self.us
        if x <= 0:
            return us[0] if model is None else model(x)
        if len(xs) == 1 or x < xs[0] or x > xs[-1]:
            end = 0 if x < xs[0] else len(xs) - 1
            if model is None:  # constant-rate extrapolation
                return us[end] * x / xs[end] if x > xs[-1] else us[end]
            return model(x) * us[end] / model(xs[end])
        i = bisect.bisect_left(xs, x)
        if xs[i] == x:
            return us[i]
        x0, x1, t0, t1 = xs[i - 1], xs[i], us[i - 1], us[i]
        w = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
        return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))


@dataclass
class Calibration:
    """All tables for one hardware profile."""

    profile: str
    collectives: dict[tuple[str, int], Table] = field(default_factory=dict)
    gemm: Table | None = None
    memory: Table | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": 1, "profile": self.profile, "meta": self.meta,
                "collectives": [{"op": op, "group_size": n, "bytes": list(t.xs), "us": list(t.us)}
                                for (op, n), t in sorted(self.collectives.items())],
                "gemm": {"flops": list(self.gemm.xs), "us": list(self.gemm.us)} if self.gemm else None,
                "memory": {"bytes": list(self.memory.xs), "us": list(self.memory.us)} if self.memory else None}

    def save(self, path: str) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1))


def calibration_from_dict(d: dict[str, Any], source: str = "<dict>") -> Calibration:
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise GraphError(f"{source}: not an overlapsat calibration file (field 'format' must be {FORMAT!r})")
    if d.get("version") != 1:
        raise GraphError(f"{source}: unsupported calibration version {d.get('version')!r}")
    try:
        cal = Calibration(str(d["profile"]), meta=dict(d.get("meta") or {}))
        for c in d.get("collectives") or []:
            if len(c["bytes"]) != len(c["us"]):
                raise GraphError(f"collective table {c['op']!r} (group size {c['group_size']}): "
                                 f"{len(c['bytes'])} sizes but {len(c['us'])} times")
            cal.collectives[(str(c["op"]), int(c["group_size"]))] = Table.from_points(list(zip(c["bytes"], c["us"])))
        if d.get("gemm"):
            cal.gemm = Table.from_points(list(zip(d["gemm"]["flops"], d["gemm"]["us"])))
        if d.get("memory"):
            cal.memory = Table.from_points(list(zip(d["memory"]["bytes"], d["memory"]["us"])))
    except GraphError as e:
        raise GraphError(f"{source}: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise GraphError(f"{source}: malformed calibration entry ({type(e).__name__}: {e})") from None
    return cal


def load_calibration(path: str) -> Calibration:
    return calibration_from_dict(read_json(path, "calibration"), path)


def shipped_calibrations() -> list[str]:
    """The profiles whose measured tables ship with overlapsat."""
    return sorted(f[len("calibration_"):-len(".json")] for f in os.listdir(DATA)
                  if f.startswith("calibration_") and f.endswith(".json"))


def builtin_calibration(profile: str) -> Calibration | None:
    path = os.path.join(DATA, f"calibration_{profile}.json")
    return load_calibration(path) if os.path.exists(path) else None


def _merge_points(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """One point per x (median of repeats), then made non-decreasing in time.

    Small messages sit on a latency floor where run-to-run noise makes measured
    times dip as size grows; pooling adjacent violators (isotonic regression)
    removes the dips without moving the large-size points.
    """
    by: dict[float, list[float]] = {}
    for x, t in points:
        by.setdefault(float(x), []).append(float(t))
    xs = sorted(by)
    blocks: list[list[float]] = []  # [sum, count]
    for x in xs:
        blocks.append([statistics.median(by[x]), 1.0])  # of two repeats, their mean (not the larger one)
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    ys: list[float] = []
    for s, c in blocks:
        ys += [s / c] * int(c)
    return list(zip(xs, ys))


def build_calibration(profile: str, collectives_raw: dict[str, Any] | None = None,
                      compute_raw: dict[str, Any] | None = None, *, column: str = "queued_a_us",
                      grid_only: bool = True) -> Calibration:
    """Tables from the raw files the benchmarks/calibrate_*.py scripts write.

    `grid_only` keeps power-of-two sizes, so the off-grid measurements stay
    out of the tables and can test the interpolation.
    """
    cal = Calibration(profile, meta={"column": column})
    if collectives_raw:
        cal.meta["collectives"] = collectives_raw.get("meta", {})
        pts: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for r in collectives_raw["collectives"]:
            b = int(r["bytes"])
            on_grid = r["grid"] if "grid" in r else b & (b - 1) == 0
            if grid_only and not on_grid:
                continue
            pts.setdefault((r["op"], int(r["group_size"])), []).append((b, r[column]))
        cal.collectives = {k: Table.from_points(_merge_points(v)) for k, v in pts.items()}
    if compute_raw:
        cal.meta["compute"] = compute_raw.get("meta", {})
        ks = compute_raw["kernels"]
        g = [(k["flops"], k["us"]) for k in ks if k["kind"] == "gemm" and k.get("m") in (1024, 16384)]
        m = [(k["bytes"], k["us"]) for k in ks if k["kind"] == "memory" and k["name"] in ("add", "gelu")]
        cal.meta["gemm_points"] = "m in {1024, 16384} (m = 4096 held out)"
        cal.meta["memory_points"] = "add and gelu (layernorm and softmax held out)"
        cal.gemm = Table.from_points(_merge_points(g)) if g else None
        cal.memory = Table.from_points(_merge_points(m)) if m else None
    return cal
