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
from overlapsat.graph import Graph
from overlapsat.io import SCHEDULE_FORMAT, VERSION, _field, atomic_write_text, read_json
from overlapsat.simulate import check_permutation
from overlapsat.validate import assert_valid


@dataclass(frozen=True)
class Schedule:
    """An order for one graph, tied to it by fingerprint."""

    order: list[str]
    graph_fingerprint: str
    graph_name: str = "graph"
    metrics: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": SCHEDULE_FORMAT, "version": VERSION, "graph": self.graph_name,
                "graph_fingerprint": self.graph_fingerprint, "order": list(self.order),
                "metrics": self.metrics, "meta": self.meta}


def save_schedule(path: str | os.PathLike[str], graph: Graph, order: Sequence[str | int], *,
                  metrics: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> Schedule:
    """Validate `order` against `graph`, then write it atomically."""
    assert_valid(graph, order, collective_order="free")
    names = [graph.names[i] for i in graph.order_indices(order)]
    sched = Schedule(names, graph.fingerprint(), graph.name, dict(metrics or {}), dict(meta or {}))
    atomic_write_text(path, json.dumps(sched.to_dict(), indent=1))
    return sched


def load_schedule(path: str | os.PathLike[str], graph: Graph | None = None) -> Schedule:
    """Read a schedule; with `graph`, check it belongs to it and is a permutation."""
    where = os.fspath(path)
    data = read_json(path, "schedule")
    if data.get("format") != SCHEDULE_FORMAT:
        raise GraphError(f"{where}: field 'format' must be {SCHEDULE_FORMAT!r}, got {data.get('format')!r}")
    if data.get("version") != VERSION:
        raise GraphError(f"{where}: unsupported version {data.get('version')!r}")
    order = _field(data, "order", where, list)
    if not all(isinstance(x, str) for x in order):
        raise GraphError(f"{where}.order: expected a list of node names")
    sched = Schedule(order, _field(data, "graph_fingerprint", where, str), _field(data, "graph", where, str, "graph"),
                     _field(data, "metrics", where, dict, {}), _field(data, "meta", where, dict, {}))
    if graph is not None:
        fp = graph.fingerprint()
        if fp != sched.graph_fingerprint:
            raise GraphError(f"{where}: schedule is for a graph with fingerprint {sched.graph_fingerprint}, "
                             f"but graph {graph.name!r} has fingerprint {fp}")
        problems = check_permutation(graph, order)
        if problems:
            raise GraphError.from_problems(f"{where}: not a schedule of graph {graph.name!r}", problems)
    return sched


__all__ = ["Schedule", "load_schedule", "save_schedule"]
