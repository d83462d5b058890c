"""Apply solved schedules inside torch.compile, on every rank.

`install(mode, store)` puts a `SchedulePass` in Inductor's
`reorder_for_compute_comm_overlap_passes` (or put `schedule_pass(store)` there
yourself). Each compiled graph is imported and fingerprinted; if `store` holds a
schedule for that fingerprint, the scheduler nodes are reordered to it (after
the validator accepts it), otherwise the graph is saved to the store for
offline solving (`solve_store`) or, in "solve" mode, solved inline. The
fingerprint is structural and durations come from a deterministic cost model,
so every rank finds the same schedule; any failure keeps Inductor's order.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.graph import Graph
from overlapsat.io import load_graph
from overlapsat.schedules import load_schedule
from overlapsat.torch.importer import DurationFn, import_snodes
from overlapsat.torch.need import torch_module
from overlapsat.validate import validate

log = logging.getLogger(__name__)


def _paths(store: str, fp: str) -> tuple[str, str]:
    return os.path.join(store, f"{fp}.graph.json"), os.path.join(store, f"{fp}.schedule.json")


PASS_VERSION = 3  # part of Inductor's cache key: bump when what the pass does changes
MODES = ("capture", "apply", "solve")
# levels a rank may fall back from alone: its Inductor order issues each group's collectives in the same order
SAFE_LEVELS = ("chain", "global", "group")


class SchedulePass:
    """The Inductor reorder pass: applies stored schedules, records unsolved graphs, never breaks compilation.

    Picklable on purpose: Inductor's FX graph cache pickles its config, this
    pass included, into the cache key. The pickled state is the version, the
    options and a digest of the store's schedules, so a schedule solved after
    a compile changes the key (the next compile applies it) while an unchanged
    store hits the cache. Callables (`durations`, `on_apply`) are process-local
    and left out of the state.
    """

    def __init__(self, store: str, *, mode: str = "apply", durations: DurationFn | None = None, record: bool = True,
                 on_apply: Callable[[Graph, list[str]], None] | None = None, time_limit: float = 10.0,
                 collective_order: str = "group") -> None:
        if not os.path.isdir(store):
            raise GraphError(f"schedule store {store!r} is not a directory")
        if mode not in MODES:
            raise GraphError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if collective_order not in SAFE_LEVELS:
            raise GraphError(f"collective_order {collective_order!r} is not safe inside torch.compile: a rank that "
                             f"falls back to Inductor's order alone would issue collectives in another order; use one "
                             f"of {', '.join(SAFE_LEVELS)}")
        self.store = os.path.abspath(store)
        self.mode = mode
        self.record = record
        self.durations = durations
        self.on_apply = on_apply
        self.time_limit = float(time_limit)
        self.collective_order = collective_order

    def __call__(self, snodes: list[Any]) -> list[Any]:
        try:
            return self._reorder(snodes)
        except Exception as e:  # noqa: BLE001 - whatever fails, Inductor's order and the compile go on
            log.warning("overlapsat: keeping Inductor's order for this graph: %s: %s", type(e).__name__, e)
            return snodes

    def _reorder(self, snodes: list[Any]) -> list[Any]:
        g = import_snodes(snodes, durations=self.durations)
        fp = g.fingerprint()
        gpath, spath = _paths(self.store, fp)
        if self.mode != "capture" and os.path.exists(spath):
            return self._apply(g, snodes, load_schedule(spath, g).order, os.path.basename(spath))
        if self.mode == "solve":
            from overlapsat.solver import optimize

            r = optimize(g, time_limit=self.time_limit, collective_order=self.collective_order)
            if r.cut_by_wall_clock:  # another rank may have finished its work: keep the order every rank can agree on
                raise GraphError("the inline solve was cut by the wall clock; raise time_limit or solve offline")
            r.save(spath)
            return self._apply(g, snodes, r.names, os.path.basename(spath))
        if self.record and not os.path.exists(gpath):
            g.save(gpath)
            log.info("overlapsat: recorded graph %s for offline solving", os.path.basename(gpath))
        return snodes

    def _apply(self, g: Graph, snodes: list[Any], order: list[str], what: str) -> list[Any]:
        vs = validate(g, order, collective_order=self.collective_order)
        if vs:
            raise GraphError(f"schedule {what} is invalid for this graph ({vs[0]})")
        by_name = {s.get_name(): s for s in snodes}
        log.info("overlapsat: applying schedule %s (%d nodes)", what, len(snodes))
        if self.on_apply is not None:
            self.on_apply(g, order)
        return [by_name[n] for n in order]

    def schedules_digest(self) -> str:
        """What the store can apply: the schedule files' names and contents (missing store: empty)."""
        h = hashlib.sha256()
        try:
            names = sorted(n for n in os.listdir(self.store) if n.endswith(".schedule.json"))
            for n in names:
                h.update(n.encode())
                with open(os.path.join(self.store, n), "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
        except OSError:
            pass
        return h.hexdigest()

    def __getstate__(self) -> dict[str, Any]:
        return {"version": PASS_VERSION, "store": self.store, "mode": self.mode, "record": self.record,
                "time_limit": self.time_limit, "collective_order": self.collective_order,
                "schedules": self.schedules_digest()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.store, self.mode, self.record = state["store"], state["mode"], state["record"]
        self.time_limit, self.collective_order = state["time_limit"], state["collective_order"]
        self.durations = self.on_apply = None

    def uuid(self) -> str:
        """The same key as the pickled state, for Inductor's custom-pass interface."""
        st = self.__getstate__()
        return "overlapsat-" + "-".join(str(st[k]) for k in sorted(st))


def schedule_pass(store: str, *, durations: DurationFn | None = None, record: bool = True,
                  on_apply: Callable[[Graph, list[str]], None] | None = None) -> SchedulePass:
    """An Inductor reorder pass that applies stored schedules and records unsolved graphs (`SchedulePass`)."""
    return SchedulePass(store, durations=durations, record=record, on_apply=on_apply)


def install(mode: str = "apply", store: str = "overlapsat-schedules", *, time_limit: float = 10.0,
            collective_order: str = "group", durations: DurationFn | None = None) -> SchedulePass:
    """Switch Inductor's comm/compute reordering to overlapsat, on every rank.

    capture: record each graph in `store`, keep Inductor's order;
    apply:   use the stored schedule when its fingerprint matches and it
             validates, otherwise keep Inductor's order and record the graph;
    solve:   like apply, but a graph without a schedule is solved inline
             (deterministic, `time_limit`) and its schedule stored.
    Creates `store`. Only levels a rank may safely fall back from alone are
    accepted (`free` is not). Returns the installed pass.
    """
    torch_module()
    import torch._inductor.config as icfg

    try:
        os.makedirs(store, exist_ok=True)
    except OSError as e:
        raise GraphError(f"cannot create the schedule store {store!r}: {e}") from None
    p = SchedulePass(store, mode=mode, time_limit=time_limit, collective_order=collective_order, durations=durations)
    icfg.reorder_for_compute_comm_overlap = True
    icfg.reorder_for_compute_comm_overlap_passes = [p]
    return p


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
