"""Apply solved schedules inside torch.compile, on every rank.

Put `schedule_pass(store)` in `torch._inductor.config.reorder_for_compute_comm_overlap_passes`.
Each compiled graph is imported and fingerprinted; if `store` holds a schedule
for that fingerprint, the scheduler nodes are reordered to it (after the
validator accepts it), otherwise the graph is saved to the store for offline
solving (`solve_store`). The fingerprint is structural and durations come from a
deterministic cost model, so every rank finds the same schedule.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.graph import Graph
from overlapsat.io import load_graph
from overlapsat.schedules import load_schedule
from overlapsat.torch.importer import DurationFn, import_snodes
from overlapsat.validate import validate

log = logging.getLogger(__name__)


def _paths(store: str, fp: str) -> tuple[str, str]:
    return os.path.join(store, f"{fp}.graph.json"), os.path.join(store, f"{fp}.schedule.json")


def schedule_pass(store: str, *, durations: DurationFn | None = None, record: bool = True,
                  on_apply: Callable[[Graph, list[str]], None] | None = None) -> Callable[[list[Any]], list[Any]]:
    """An Inductor reorder pass that applies stored schedules and records unsolved graphs."""
    if not os.path.isdir(store):
        raise GraphError(f"schedule store {store!r} is not a directory")

    def reorder(snodes: list[Any]) -> list[Any]:
        g = import_snodes(snodes, durations=durations)
        fp = g.fingerprint()
        gpath, spath = _paths(store, fp)
        if os.path.exists(spath):
            try:
                sched = load_schedule(spath, g)
            except GraphError as e:  # never let a stale file break compilation
                log.warning("overlapsat: ignoring schedule %s: %s", spath, e)
                return snodes
            vs = validate(g, sched.order, collective_order="group")
            if vs:
                log.warning("overlapsat: schedule %s is invalid for this graph (%s); keeping Inductor's order", spath, vs[0])
                return snodes
            by_name = {s.get_name(): s for s in snodes}
            log.info("overlapsat: applying schedule %s (%d nodes)", os.path.basename(spath), len(snodes))
            if on_apply is not None:
                on_apply(g, sched.order)
            return [by_name[n] for n in sched.order]
        if record and not os.path.exists(gpath):
            g.save(gpath)
            log.info("overlapsat: recorded graph %s for offline solving", os.path.basename(gpath))
        return snodes

    return reorder


def solve_store(store: str, *, time_limit: float = 60.0, **optimize_kw: Any) -> dict[str, str]:
    """Solve every recorded graph in `store` that has no schedule yet; returns fingerprint -> status."""
    from overlapsat.solver import optimize

    out: dict[str, str] = {}
    for name in sorted(os.listdir(store)):
        if not name.endswith(".graph.json"):
            continue
        fp = name[: -len(".graph.json")]
        gpath, spath = _paths(store, fp)
        if os.path.exists(spath):
            continue
        g = load_graph(gpath)
        if g.fingerprint() != fp:
            raise GraphError(f"{gpath}: file name says fingerprint {fp} but the graph has {g.fingerprint()}")
        r = optimize(g, time_limit=time_limit, **optimize_kw)
        r.save(spath)
        out[fp] = r.status.value
    return out
