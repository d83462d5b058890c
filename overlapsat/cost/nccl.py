"""An NCCL-style collective model: ring and tree, LL / LL128 / Simple, the fastest wins.

Follows the structure of NCCL's tuning model (per-protocol bus-bandwidth caps,
base plus per-step hardware latency, bus-to-algorithm bandwidth by step
count) with NCCL's published default constants as data. `link_efficiency`
scales the link bandwidth: 1.0 reproduces NCCL's own prediction; a profile's
measured efficiency gives overlapsat's analytical estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from overlapsat.cost.hardware import HardwareProfile
from overlapsat.errors import GraphError

ALGOS = ("tree", "ring")
PROTOS = ("LL", "LL128", "Simple")
OPS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast")

# NCCL tuning defaults (microseconds; GB/s), indexed by algo then proto
BASE_LAT = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
HW_LAT = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
# per architecture, by node count (1, 2, more)
LL_MAX_BW = {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0), "hopper": (141.0, 45.0, 35.0),
             "blackwell": (282.0, 90.0, 70.0)}
RING_LL128_PER_CH = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 40.0}
TREE_LL128_PER_CH = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0), "hopper": (36.7, 36.7, 29.0),
                     "blackwell": (55.6, 31.67, 20.0)}
TREE_PER_CH = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0),
               "blackwell": (70.0, 42.8, 24.0)}


@dataclass(frozen=True)
class CollectiveEstimate:
    time_us: float
    algo: str
    proto: str


def _steps(op: str, n: int) -> int:
    return 2 * (n - 1) if op == "all_reduce" else n - 1


def algo_time(op: str, nbytes: float, n: int, hw: HardwareProfile, algo: str, proto: str,
              link_efficiency: float = 1.0) -> float | None:
    """Microseconds for one (algorithm, protocol), or None where NCCL would not use it."""
    if algo == "tree" and op != "all_reduce":
        return None
    nodes = math.ceil(n / hw.gpus_per_node)
    scale = 0 if nodes == 1 else (1 if nodes == 2 else 2)
    if proto == "LL128" and nodes > 2:
        return None
    p = PROTOS.index(proto)
    link = hw.nvlink_bw if nodes == 1 else min(hw.nvlink_bw, hw.net_bw)
    bw = link / 1e9 * link_efficiency  # GB/s
    arch = hw.arch
    ll_max = LL_MAX_BW[arch][scale] if nodes == 1 else LL_MAX_BW["volta"][scale]
    ch = hw.nccl_channels
    if algo == "ring":
        bus = {"LL": min(ll_max, bw * 0.5), "LL128": min(bw * 120 / 128, ch * RING_LL128_PER_CH[arch]),
               "Simple": bw}[proto]
    else:
        bus = {"LL": min(ll_max, bw / 3.8),
               "LL128": min(bw * (7 / 9 if nodes == 1 else 120 / 128), ch * TREE_LL128_PER_CH[arch][scale]),
               "Simple": min(bw * 0.92, ch * TREE_PER_CH[arch][scale])}[proto]
    steps = _steps(op, n)
    if algo == "tree":
        alg_bw = bus * 0.5
    elif op == "broadcast":
        alg_bw = bus
    else:
        alg_bw = bus * n / steps
    intra = HW_LAT["pci" if hw.pcie else "nvlink"][algo][p]
    inter = HW_LAT["net"][algo][p]
    if nodes > 1:
        intra = max(intra, 3.0 if proto == "Simple" else 1.0)
    lat = BASE_LAT[algo][p]
    if algo == "ring":
        inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if op == "all_reduce" else nodes - 1)
        lat += (steps - inter_steps) * intra + inter_steps * inter
    else:
        lat += 2 * ((n // nodes - 1) * intra + int(math.log2(nodes)) * inter)
    return lat + nbytes / (1e3 * alg_bw)


def estimate(op: str, nbytes: float, n: int, hw: HardwareProfile, link_efficiency: float = 1.0) -> CollectiveEstimate:
    """The fastest (algorithm, protocol) for `op` on `nbytes` (full tensor) across `n` ranks."""
    if op not in OPS:
        raise GraphError(f"collective op {op!r} is not modelled; expected one of {', '.join(OPS)}")
    if n <= 1:
        return CollectiveEstimate(0.0, "none", "none")
    best = CollectiveEstimate(math.inf, "ring", "Simple")
    for algo in ALGOS:
        for proto in PROTOS:
            t = algo_time(op, nbytes, n, hw, algo, proto, link_efficiency)
            if t is not None and t < best.time_us:
                best = CollectiveEstimate(t, algo, proto)
    return best
