"""Schedule files: an order tied to its graph by fingerprint (docs/format.md).

Kept apart from `io` so that file formats stay below the validator and the
simulator: saving a schedule checks it, reading one checks it belongs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.graph import Graph, Node
from overlapsat.io import SCHEDULE_FORMAT, VERSION, _field, atomic_write_text, read_json
from overlapsat.plan import (
    BUCKET_LAYOUTS,
    Bucket,
    Plan,
    bucket_problems,
    check_layout,
    laid_out,
    materialize,
    transport_problems,
)
from overlapsat.simulate import check_permutation
from overlapsat.validate import assert_valid

BUCKETS_VERSION = 2  # a schedule with buckets (a plan); one without is written as version 1, as before
TRANSPORTS_VERSION = 3  # a plan with copy-engine transports: a reader that ignored them would apply NCCL's
LAYOUT_VERSION = 4  # a plan whose buckets are coalesced: a reader that ignored it would copy (decision 55)
VERSIONS = (VERSION, BUCKETS_VERSION, TRANSPORTS_VERSION, LAYOUT_VERSION)


@dataclass(frozen=True)
class Schedule:
    """An order for one graph, tied to it by fingerprint; with `buckets`, a plan: the order is of the bucketed
    graph (MODEL.md "Buckets") and the fingerprint is the unbucketed graph's."""

    order: list[str]
    graph_fingerprint: str
    graph_name: str = "graph"
    metrics: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    buckets: list[list[str]] = field(default_factory=list)
    transports: list[str] = field(default_factory=list)  # collectives moved by copy engine (MODEL.md "Transport")
    layout: str = "copy"  # how the buckets are issued (MODEL.md "Buckets", decision 55)

    @property
    def plan(self) -> Plan:
        return Plan(tuple(self.order), tuple(Bucket(tuple(b)) for b in self.buckets), self.graph_fingerprint,
                    tuple(self.transports), self.layout)

    def to_dict(self) -> dict[str, Any]:
        version = (LAYOUT_VERSION if self.buckets and self.layout != "copy" else TRANSPORTS_VERSION
                   if self.transports else BUCKETS_VERSION if self.buckets else VERSION)
        d = {"format": SCHEDULE_FORMAT, "version": version,
             "graph": self.graph_name, "graph_fingerprint": self.graph_fingerprint, "order": list(self.order)}
        if self.buckets:
            d["buckets"] = [list(b) for b in self.buckets]
        if self.transports:
            d["transports"] = {"copy_engine": list(self.transports)}
        if self.buckets and self.layout != "copy":
            d["layout"] = self.layout
        return {**d, "metrics": self.metrics, "meta": self.meta}


def unpriced(nd: Node) -> float:
    """Durations play no part in validity or in the node set: a bucketed graph built for checking only."""
    return 0.0


def save_schedule(path: str | os.PathLike[str], graph: Graph, order: Sequence[str | int], *,
                  metrics: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
                  buckets: Sequence[Bucket | Sequence[str]] = (), transports: Sequence[str] = (),
                  layout: str = "copy") -> Schedule:
    """Validate `order` against `graph` (with `buckets`: against the bucketed graph of `layout`), and `transports`
    (the collectives moved by copy engine) against the rules of MODEL.md "Transport", then write it atomically."""
    check_layout(layout, "layout")
    bs = [b if isinstance(b, Bucket) else Bucket(tuple(b)) for b in buckets]
    target = materialize(graph.relaxed("free"), bs, laid_out(unpriced, layout)) if bs else graph  # (Inductor's chain edges are
    # a level's, not the graph's: buckets are judged without them, decision 39)
    assert_valid(target, order, collective_order="free")
    bad = transport_problems(target, transports)
    if bad:
        raise GraphError.from_problems(f"transports of graph {graph.name!r}", bad)
    names = [target.names[i] for i in target.order_indices(order)]
    sched = Schedule(names, graph.fingerprint(), graph.name, dict(metrics or {}), dict(meta or {}),
                     [list(b.members) for b in bs], list(transports), layout if bs else "copy")
    atomic_write_text(path, json.dumps(sched.to_dict(), indent=1))
    return sched


def load_schedule(path: str | os.PathLike[str], graph: Graph | None = None) -> Schedule:
    """Read a schedule (version 1; 2 with buckets, 3 with transports, 4 with coalesced buckets); with `graph`,
    check it belongs to it, that its buckets are legal, and that the order is a permutation of the (bucketed)
    graph's nodes."""
    where = os.fspath(path)
    data = read_json(path, "schedule")
    if data.get("format") != SCHEDULE_FORMAT:
        raise GraphError(f"{where}: field 'format' must be {SCHEDULE_FORMAT!r}, got {data.get('format')!r}")
    version = data.get("version")
    if version not in VERSIONS:
        raise GraphError(f"{where}: unsupported version {version!r}")
    unknown = sorted(set(data) - {"format", "version", "graph", "graph_fingerprint", "order", "metrics", "meta",
                                  "buckets", "transports", "layout"})
    if unknown:
        raise GraphError(f"{where}: unknown field(s) {unknown}")
    order = _field(data, "order", where, list)
    if not all(isinstance(x, str) for x in order):
        raise GraphError(f"{where}.order: expected a list of node names")
    buckets = _field(data, "buckets", where, list, [])
    if buckets and version == VERSION:
        raise GraphError(f"{where}: buckets need version {BUCKETS_VERSION} or later, the file says "
                         f"{version}")
    if not all(isinstance(b, list) and all(isinstance(x, str) for x in b) for b in buckets):
        raise GraphError(f"{where}.buckets: expected a list of lists of collective names")
    tr = _field(data, "transports", where, dict, {})
    if tr and version not in (TRANSPORTS_VERSION, LAYOUT_VERSION):
        raise GraphError(f"{where}: transports need version {TRANSPORTS_VERSION} or later, the file says {version}")
    if set(tr) - {"copy_engine"} or not all(isinstance(x, str) for x in tr.get("copy_engine", [])) \
            or not isinstance(tr.get("copy_engine", []), list):
        raise GraphError(f"{where}.transports: expected {{\"copy_engine\": [collective names]}}, got {tr!r}")
    transports = list(tr.get("copy_engine", []))
    layout = data.get("layout", "copy")
    if layout not in BUCKET_LAYOUTS:
        raise GraphError(f"{where}.layout: expected one of {', '.join(BUCKET_LAYOUTS)}, got {layout!r}")
    if "layout" in data and (version != LAYOUT_VERSION or not buckets):
        raise GraphError(f"{where}: a layout needs buckets and version {LAYOUT_VERSION}, the file says {version}"
                         + ("" if buckets else " and has no buckets"))
    sched = Schedule(order, _field(data, "graph_fingerprint", where, str), _field(data, "graph", where, str, "graph"),
                     _field(data, "metrics", where, dict, {}), _field(data, "meta", where, dict, {}), buckets,
                     transports, layout)
    if graph is not None:
        fp = graph.fingerprint()
        if fp != sched.graph_fingerprint:
            raise GraphError(f"{where}: schedule is for a graph with fingerprint {sched.graph_fingerprint}, "
                             f"but graph {graph.name!r} has fingerprint {fp}")
        bs = [Bucket(tuple(b)) for b in buckets]
        bare = graph.relaxed("free") if bs else graph
        bad = bucket_problems(bare, bs)
        if bad:
            raise GraphError.from_problems(f"{where}: illegal buckets for graph {graph.name!r}", bad)
        target = materialize(bare, bs, laid_out(unpriced, layout))
        problems = check_permutation(target, order)
        if problems:
            raise GraphError.from_problems(f"{where}: not a schedule of graph {graph.name!r}"
                                           + (" bucketed" if bs else ""), problems)
        bad = transport_problems(target, transports)
        if bad:
            raise GraphError.from_problems(f"{where}: transports of graph {graph.name!r}", bad)
    return sched


__all__ = ["Schedule", "load_schedule", "save_schedule"]
