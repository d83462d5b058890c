"""A placeholder cost model for generated graphs (H100-like, ring NCCL).

Deliberately simple: the calibrated cost model (overlapsat.cost) re-prices
any graph; generators only need plausible relative durations.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from overlapsat.graph import GraphBuilder

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
PEAK_FLOPS = {"bf16": 989e12, "fp16": 989e12, "fp32": 67e12, "fp8": 1979e12}


@dataclass(frozen=True)
class Placeholder:
    flops_eff: float = 0.7
    hbm_bw: float = 3.35e12 * 0.8
    kernel_floor_us: float = 3.0
    link_bw: float = 150e9  # bytes/s per direction, intra-node NVLink (effective)
    net_bw: float = 25e9  # bytes/s per GPU across nodes
    latency_us: float = 10.0
    gpus_per_node: int = 8

    def compute_us(self, flops: float, nbytes: float, dtype: str) -> float:
        t = max(flops / (PEAK_FLOPS[dtype] * self.flops_eff), nbytes / self.hbm_bw) * 1e6
        return t + self.kernel_floor_us

    def collective_us(self, op: str, nbytes: int, n: int) -> float:
        if n <= 1:
            return self.latency_us
        bw = self.link_bw if n <= self.gpus_per_node else self.net_bw
        factor = {"all_reduce": 2 * (n - 1) / n, "all_to_all": (n - 1) / n, "broadcast": 1.0}.get(op, (n - 1) / n)
        return self.latency_us * (1 + (n - 1) / 8) + nbytes * factor / bw * 1e6


class Emitter:
    """GraphBuilder plus pricing and seeded jitter, shared by the generators."""

    def __init__(self, name: str, dtype: str, seed: int, jitter: float = 0.1) -> None:
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype {dtype!r}: expected one of {sorted(DTYPE_BYTES)}")
        self.b = GraphBuilder(name)
        self.dtype = dtype
        self.es = DTYPE_BYTES[dtype]
        self.rng = random.Random(seed)
        self.jitter = jitter
        self.cost = Placeholder()

    def _j(self, t: float) -> float:
        return round(t * (1 + self.rng.uniform(-self.jitter, self.jitter)), 3)

    def mm(self, name: str, m: int, k: int, n: int, reads: list[str], out: str | None, out_elems: int | None = None) -> str:
        flops = 2.0 * m * k * n
        nbytes = self.es * (m * k + k * n + m * n)
        writes = {out: self.es * (out_elems if out_elems is not None else m * n)} if out else None
        return self.b.compute(name, self._j(self.cost.compute_us(flops, nbytes, self.dtype)), reads=reads,
                              writes=writes, flops=flops, bytes_accessed=nbytes, gemm_like=True)

    def ew(self, name: str, numel: int, reads: list[str], out: str | None, flops_per: float = 4.0) -> str:
        nbytes = self.es * numel * (len(reads) + 1)
        return self.b.compute(name, self._j(self.cost.compute_us(numel * flops_per, nbytes, self.dtype)),
                              reads=reads, writes={out: self.es * numel} if out else None,
                              flops=numel * flops_per, bytes_accessed=nbytes)

    def custom(self, name: str, flops: float, nbytes: float, reads: list[str], out: str | None, out_bytes: int) -> str:
        return self.b.compute(name, self._j(self.cost.compute_us(flops, nbytes, self.dtype)), reads=reads,
                              writes={out: out_bytes} if out else None, flops=flops, bytes_accessed=nbytes)

    def comm(self, name: str, op: str, group: str, n: int, nbytes: int, reads: list[str], out: str, out_bytes: int,
             wait_now: bool = True) -> str:
        """A collective and its wait; the wait directly follows (un-reordered input order)."""
        self.b.collective(name, group=group, op=op, nbytes=nbytes, group_size=n,
                          duration=self._j(self.cost.collective_us(op, nbytes, n)), reads=reads,
                          writes={out: out_bytes})
        if wait_now:
            self.b.wait(name + "_wait", name)
        return out
