"""Copy-engine all_gathers: the transport a plan may choose per collective (MODEL.md "Transport").

torch's symmetric-memory `_low_contention_all_gather` moves an all_gather's
data with copy engines, not NCCL's kernels, so it takes no SMs from the
GEMMs beside it. Its time alone, as a share of NCCL's, was measured by size
(`benchmarks/gpu/transport.py`); a `CopyEngine` table prices it as that share
of the cost model's NCCL price. Where the share is below 1 the copy engine is
the cheaper transport, and because no start time in MODEL.md's walk grows
when a duration shrinks, the cheaper one is the best choice for every
bucketing and order: the choice needs no search (decision 50).

Only sizes and group sizes that were measured are offered, only all_gathers
(what was measured), only in one process group (every copy-engine collective
of a rank runs on one backend stream, whose sequence is then that group's
agreed sequence), and only in a group that issues nothing but all_gathers in
the graph (run 58: NCCL's reduce_scatters beside the copy engine's transfers
slowed a step more than the copy engine saved).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property

from overlapsat.cost.interference import interp_log_x
from overlapsat.errors import GraphError
from overlapsat.graph import Graph, Node, NodeKind, derived, natural_key
from overlapsat.plan import Pricing


@dataclass(frozen=True)
class CopyEngine:
    """Measured copy-engine time over NCCL's, by all_gather output bytes, per group size: `ratios` holds
    (group size, ((bytes, ratio), ...)) with bytes strictly increasing, interpolated in log(bytes) and held flat
    above the largest; sizes below the smallest are not offered. `contention_share`: how much of NCCL's slowdown
    of the compute beside it a copy-engine transfer causes (for `simulate_contended`). `overhead_us`: what each
    copy-engine collective costs a step beyond its transfer, added to its price (measured in steps: its
    barriers wait on the peer, and its input is copied into the symmetric workspace)."""

    ratios: tuple[tuple[int, tuple[tuple[float, float], ...]], ...]
    contention_share: float = 1.0
    source: str = ""
    overhead_us: float = 0.0

    def __post_init__(self) -> None:
        for n, pts in self.ratios:
            if not (isinstance(n, int) and n >= 2) or not pts:
                raise GraphError(f"CopyEngine: group size {n!r} needs an int >= 2 and at least one point")
            for i, (x, y) in enumerate(pts):
                if not (0 < x < math.inf and 0 < y < math.inf) or (i and x <= pts[i - 1][0]):
                    raise GraphError(f"CopyEngine: group size {n}: bytes must be positive and increase, ratios "
                                     f"positive and finite; got {pts!r}")
        if not (0.0 <= self.overhead_us < math.inf):
            raise GraphError(f"CopyEngine.overhead_us must be a finite number >= 0, got {self.overhead_us!r}")
        if not (0.0 <= self.contention_share <= 1.0):
            raise GraphError(f"CopyEngine.contention_share must be in [0, 1], got {self.contention_share!r}")

    @cached_property
    def _by_size(self) -> dict[int, tuple[tuple[float, float], ...]]:
        """The points by group size (read for every node priced)."""
        return dict(self.ratios)

    def ratio(self, nbytes: float, group_size: int) -> float | None:
        """Copy-engine time over NCCL's at this size; None where not measured (not offered)."""
        pts = self._by_size.get(group_size)
        if pts is None or nbytes < pts[0][0]:
            return None
        return interp_log_x(pts, nbytes)

    def floor(self, group_size: int) -> float:
        """No copy-engine price of this group size falls below this share of NCCL's (1.0: none offered)."""
        pts = self._by_size.get(group_size)
        return min(1.0, min(y for _, y in pts)) if pts else 1.0

    def offered(self, nd: Node, group: str | None) -> bool:
        """Whether `nd` may take the copy engine: an all_gather of `group` at a measured group size."""
        return (nd.kind is NodeKind.COLLECTIVE and nd.op == "all_gather" and group is not None
                and nd.group == group and nd.group_size in self._by_size)

    def price(self, nd: Node, nccl_us: float) -> float | None:
        """The copy engine's price of `nd`, whose NCCL price is `nccl_us`; None where not offered by size."""
        r = self.ratio(nd.nbytes, nd.group_size)
        return None if r is None else nccl_us * r + self.overhead_us

    def chooses(self, nd: Node, group: str | None, nccl_us: float | None = None) -> bool:
        """Whether the copy engine is the cheaper transport for `nd` (ties: NCCL); `nccl_us`: its NCCL price,
        by default its duration."""
        if not self.offered(nd, group):
            return False
        d = nd.duration if nccl_us is None else nccl_us
        ce = self.price(nd, d)
        return ce is not None and ce < d

    def group_of(self, graph: Graph) -> str | None:
        """The one group offered the copy engine: among the groups whose every collective in `graph` is an
        all_gather, the one whose offerable all_gathers carry the most bytes (ties: the first in natural order);
        None when there is none. A group that also reduces is left to NCCL: its NCCL collectives run beside the
        copy engine's transfers (another stream, the same links) and slow down more than the copy engine saves
        (run 58, decision 50)."""
        by: dict[str, int] = {}
        reduces = {nd.group for nd in graph.nodes if nd.kind is NodeKind.COLLECTIVE and nd.op != "all_gather"}
        for nd in graph.nodes:
            if nd.kind is NodeKind.COLLECTIVE and nd.op == "all_gather" and nd.group is not None \
                    and nd.group not in reduces and nd.group_size in self._by_size:
                by[nd.group] = by.get(nd.group, 0) + nd.nbytes
        if not by:
            return None
        return min(by, key=lambda g: (-by[g], natural_key(g)))

    def pricing(self, price: Pricing, group: str | None) -> TransportPricing:
        """`price` with each offered all_gather at the cheaper transport's price."""
        return TransportPricing(self, price, group)

    def repriced(self, graph: Graph, group: str | None) -> Graph:
        """`graph` with each offered all_gather at the cheaper transport's duration (its own duration is
        NCCL's)."""
        nodes = list(graph.nodes)
        changed = False
        for v, nd in enumerate(nodes):
            if self.chooses(nd, group):
                nodes[v] = replace(nd, duration=self.price(nd, nd.duration))
                changed = True
        if not changed:
            return graph
        with derived():
            return Graph(tuple(nodes), graph.buffers, graph.edges, graph.atomic_groups, graph.name, graph.meta,
                         graph.fake_edges, graph.implied_edges, (), graph.chain_is_decided)

    def chosen(self, graph: Graph, group: str | None, nccl_us: Pricing) -> tuple[str, ...]:
        """The collectives of `graph` (a bucketed graph) that take the copy engine, in node order; `nccl_us`
        gives each one's NCCL price."""
        return tuple(nd.name for nd in graph.nodes if self.chooses(nd, group, nccl_us(nd)))


@dataclass(frozen=True)
class TransportPricing:
    """A pricing (node -> us) at the cheaper transport. `base` is the NCCL price, and `floor(node)` a share of it
    that no price of `node`'s key falls below: the bound over every bucketing reads its rate from `base`
    (nondecreasing) and scales it by the floor (MODEL.md "Bounds over every bucketing")."""

    table: CopyEngine
    base: Pricing
    group: str | None

    def __call__(self, nd: Node) -> float:
        d = float(self.base(nd))
        if self.table.chooses(nd, self.group, d):
            d = self.table.price(nd, d)  # type: ignore[assignment]
        return d

    def floor(self, nd: Node) -> float:
        return self.table.floor(nd.group_size) if self.table.offered(nd, self.group) else 1.0


def copy_engine_from_rows(rows: Iterable[dict], world: int, source: str = "",
                          transport: str = "copy_engine_compiled") -> CopyEngine:
    """The table of `benchmarks/gpu/transport.py`'s rows of `transport` (by default the copy engine as a plan's
    FX pass issues it: inside a compiled graph, on an input outside symmetric memory): per output size, the
    median over GEMM shapes of its time alone over NCCL's; the contention share is the median, over pairs where
    NCCL slowed the GEMM chain by 10 % or more, of its slowdown over NCCL's (each less 1)."""
    by = {(r["shape"], r["size_mb"], r["transport"]): r for r in rows}
    for (sh, mb, t), r in by.items():  # a ratio of times: each must be a positive finite time
        ms, slow = r.get("transfer_alone_ms"), r.get("gemm_slowdown")
        if not (isinstance(ms, (int, float)) and not isinstance(ms, bool) and 0 < ms < float("inf")):
            raise GraphError(f"{source or 'rows'}: row (shape {sh!r}, {mb} MB, {t}) has transfer_alone_ms {ms!r}; "
                             "expected a positive finite time")
        if not (isinstance(slow, (int, float)) and not isinstance(slow, bool) and 0 < slow < float("inf")):
            raise GraphError(f"{source or 'rows'}: row (shape {sh!r}, {mb} MB, {t}) has gemm_slowdown {slow!r}; "
                             "expected a positive finite ratio")
    sizes = sorted({mb for (_, mb, t) in by if t == transport})
    pts, shares = [], []
    for mb in sizes:
        rs = [by[(sh, mb, transport)]["transfer_alone_ms"] / n["transfer_alone_ms"]
              for (sh, m, t), n in sorted(by.items()) if m == mb and t == "nccl" and (sh, mb, transport) in by]
        if rs:
            pts.append((float(mb * 2**20), round(statistics.median(rs), 4)))
    for (sh, mb, t), n in sorted(by.items()):
        c = by.get((sh, mb, transport))
        if t == "nccl" and c is not None and n["gemm_slowdown"] >= 1.1:
            shares.append((c["gemm_slowdown"] - 1.0) / (n["gemm_slowdown"] - 1.0))
    if not pts:
        raise GraphError(f"{source or 'rows'}: no copy-engine rows with an NCCL row beside them")
    share = round(min(1.0, max(0.0, statistics.median(shares))), 4) if shares else 1.0
    return CopyEngine(((world, tuple(pts)),), share, source)


def load_copy_engine(path: str, transport: str | None = None) -> CopyEngine:
    """The table of a `transport.json` written by `benchmarks/gpu/transport.py`, from its rows of `transport`
    (by default the compiled copy engine's where the file has them, else the plain `copy_engine` rows)."""
    try:
        with open(path) as f:
            d = json.load(f)
        if transport is None:
            have = {r.get("transport") for r in d["rows"]}
            transport = "copy_engine_compiled" if "copy_engine_compiled" in have else "copy_engine"
        return copy_engine_from_rows(d["rows"], int(d["meta"]["world"]), f"{path} ({transport})", transport)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise GraphError(f"{path}: not a transport measurement ({type(e).__name__}: {e})") from e


# 2 x H100 80GB HBM3 (NVLink), torch 2.11 + NCCL 2.28.9, 2026-11-26 (run 60): the copy engine as the FX pass
# issues it (compiled, input outside symmetric memory), copy_engine_from_rows of
# benchmarks/results/gpu_2026-11-26/run60_transport/transport.json (a test rebuilds it from that file). Its input
# is first copied into the group's workspace, which costs what the copy engine saves: run 56 measured 0.83-0.89
# of NCCL's time with the input already in symmetric memory, which neither torch 2.11 nor the FX pass arranges
# overhead_us: in the re-gather step (runs 59 and 61), the plan with copy-engine gathers in its forward graph took
# 86.3 and 95.8 us longer per copy-engine gather than the same plan on NCCL, in the same call; the lesser
H100_COPY_ENGINE = CopyEngine(((2, ((32 * 2.0**20, 0.9937), (128 * 2.0**20, 1.018))),), contention_share=0.4564,
                              source="runs 59-61, 2 x H100, compiled, input outside symmetric memory",
                              overhead_us=86.3)
COPY_ENGINES = {"h100": H100_COPY_ENGINE}


def copy_engine(name: str | CopyEngine) -> CopyEngine:
    """A built-in table by name (`COPY_ENGINES`), a `transport.json` path, or a table as given."""
    if isinstance(name, CopyEngine):
        return name
    if not isinstance(name, str):
        raise GraphError(f"transport must be a CopyEngine, a built-in name or a transport.json path; got {name!r}")
    if name in COPY_ENGINES:
        return COPY_ENGINES[name]
    if name.endswith(".json"):
        return load_copy_engine(name)
    raise GraphError(f"unknown copy-engine table {name!r}: expected one of {', '.join(COPY_ENGINES)} or a "
                     "transport.json")


__all__ = ["COPY_ENGINES", "H100_COPY_ENGINE", "CopyEngine", "TransportPricing", "copy_engine", "copy_engine_from_rows",
           "load_copy_engine"]
