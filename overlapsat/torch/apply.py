"""Apply solved schedules inside torch.compile, on every rank.

`install(mode, store)` puts a `SchedulePass` in Inductor's
`reorder_for_compute_comm_overlap_passes` (or put `schedule_pass(store)` there
yourself). Each compiled graph is imported and fingerprinted; if `store` holds a
usable schedule for that fingerprint, the scheduler nodes are reordered to it
(after the validator accepts it); otherwise the graph is recorded for offline
solving (`overlapsat solve-cache`) and the miss is written down, and the pass
keeps Inductor's order or applies the best heuristic (`fallback`); in "solve"
mode the graph is solved inline. The fingerprint is structural and durations
come from a deterministic cost model, so every rank finds the same schedule;
any failure logs one warning and keeps Inductor's order.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.graph import Graph, Node
from overlapsat.io import atomic_write_text, save_graph
from overlapsat.plan import Plan
from overlapsat.store import graph_path, miss_path, schedule_path, schedules_digest, usable_stored
from overlapsat.torch.importer import INDUCTOR, DurationFn, import_snodes
from overlapsat.torch.installing import installed_by, name_allocator, name_pricing, note, swap_config
from overlapsat.torch.need import torch_module
from overlapsat.validate import validate

log = logging.getLogger(__name__)

PASS_VERSION = 4  # part of Inductor's cache key: bump when what the pass does changes
MODES = ("capture", "apply", "solve")
FALLBACKS = ("inductor", "heuristic")
# levels a rank may fall back from alone: its Inductor order issues each group's collectives in the same order
SAFE_LEVELS = ("chain", "global", "group")


def _file_digest(path: str | None) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def _graph_name() -> str:
    """'compile 0/1 bwd': Dynamo's compile id and the direction, for reading a store's rows."""
    try:
        from torch._guards import CompileContext
        from torch._inductor.virtualized import V

        cid = CompileContext.current_compile_id()
        return f"compile {cid} {'bwd' if getattr(V.graph, 'is_backward', False) else 'fwd'}"
    except Exception:  # noqa: BLE001 - a name is a convenience
        return "inductor"


def check_pass_options(store: str, mode: str, collective_order: str, levels: tuple[str, ...] = SAFE_LEVELS) -> None:
    """What both passes (scheduler nodes, FX) refuse before any compile; `levels`: the collective orders allowed
    (the FX pass adds "free", which it guards by a cross-rank agreement)."""
    if not os.path.isdir(store):
        raise GraphError(f"schedule store {store!r} is not a directory")
    if mode not in MODES:
        raise GraphError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if collective_order not in levels:
        extra = ("" if "free" in levels or collective_order != "free" else
                 " (the FX-level pass, overlapsat.torch.fx_apply.install_fx, takes \"free\": its ranks agree on the order)")
        raise GraphError(f"collective_order {collective_order!r} is not safe in this pass: a rank that falls back to "
                         f"Inductor's order alone would issue collectives in another order; use one of "
                         f"{', '.join(levels)}{extra}")


def open_store(store: str) -> None:
    """Create the schedule store (install's job, for both passes)."""
    try:
        os.makedirs(store, exist_ok=True)
    except OSError as e:
        raise GraphError(f"cannot create the schedule store {store!r}: {e}") from None


def stored_or_solved(store: str, g: Graph, fp: str, *, mode: str, time_limit: float, collective_order: str,
                     plans: bool = False) -> tuple[list[str] | None, str, dict[str, Any], Plan | None]:
    """The usable stored order of `g`, or in "solve" mode one solved inline and stored; else (None, why not).
    Third: the metrics the order was solved with (a stored schedule's; an inline solve has no budget). Fourth:
    a stored plan (only with `plans`, and only one with buckets or transports; the order is then of the bucketed
    graph); an inline solve orders without buckets."""
    sched, why = usable_stored(store, fp, g, collective_order, plans=plans)
    order, metrics = (sched.order, sched.metrics) if sched is not None else (None, {})
    plan = sched.plan if sched is not None and (sched.buckets or sched.transports) else None
    if order is None and mode == "solve":
        from overlapsat.solver import optimize

        r = optimize(g, time_limit=time_limit, collective_order=collective_order)
        if r.cut_by_wall_clock:  # another rank may have finished its work: keep the order every rank can agree on
            raise GraphError("the inline solve was cut by the wall clock; raise time_limit or solve offline")
        r.save(schedule_path(store, fp))
        order = r.names
    return order, why, metrics, plan


_VERIFIED: dict[str, tuple[int, int, int] | None] = {}  # recorded files this process knows hold their graph


def _stamp(path: str) -> tuple[int, int, int] | None:
    """(inode, size, mtime): a file replaced or rewritten since it was checked has another stamp."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def record_graph(store: str, g: Graph, fp: str) -> None:
    """Save `g` for offline solving, once (every rank writes the same file; the first one stays). A recorded
    file that does not load, or holds another graph, is written again: solve-cache could never solve it."""
    path = graph_path(store, fp)
    if os.path.exists(path):
        if _VERIFIED.get(path) == _stamp(path):  # this process checked this very file already: no reload
            return
        from overlapsat.io import load_graph

        try:
            if load_graph(path).fingerprint() == fp:
                _VERIFIED[path] = _stamp(path)
                return
            why = "it holds another graph"
        except GraphError as e:
            why = str(e)
        log.warning("overlapsat: recording %s again: the stored file is unusable (%s)", os.path.basename(path), why)
    save_graph(g, path)
    _VERIFIED[path] = _stamp(path)
    log.info("overlapsat: recorded graph %s (%s) for offline solving", os.path.basename(path), g.name)


class SchedulePass:
    """The Inductor reorder pass: applies stored schedules, records unsolved graphs, never breaks compilation.

    Picklable on purpose: Inductor's FX graph cache pickles its config, this
    pass included, into the cache key. The pickled state is the version, the
    options, the pricing and a digest of the store's schedules, so a schedule
    solved after a compile changes the key (the next compile applies it)
    while an unchanged store hits the cache. Callables (`durations`,
    `on_apply`) are process-local and left out of the state.
    """

    def __init__(self, store: str, *, mode: str = "apply", durations: DurationFn | None = None, record: bool = True,
                 on_apply: Callable[[Graph, list[str]], None] | None = None, time_limit: float = 10.0,
                 collective_order: str = "group", fallback: str = "inductor", profile: str | None = None,
                 calibration: str | None = None) -> None:
        check_pass_options(store, mode, collective_order)
        if fallback not in FALLBACKS:
            raise GraphError(f"fallback must be one of {', '.join(FALLBACKS)}; got {fallback!r}")
        if durations is not None and (profile or calibration):
            raise GraphError("give either durations or profile/calibration, not both")
        self.store = os.path.abspath(store)
        self.mode, self.record, self.fallback = mode, record, fallback
        self.on_apply = on_apply
        self.time_limit = float(time_limit)
        self.collective_order = collective_order
        self.profile, self.calibration = profile, os.path.abspath(calibration) if calibration else None
        self.durations = durations
        self._priced: DurationFn | None = None
        # capture runs on every compile: a per-process key part makes Inductor's caches miss (a cached graph
        # would never reach the pass, and nothing would be recorded)
        self._nonce = os.urandom(8).hex() if mode == "capture" else ""
        if profile or calibration:
            self._pricing()  # a bad profile or calibration file fails here, before any compile

    def _pricing(self) -> DurationFn | str | None:
        """The durations: the user's callable, their profile/calibration, Inductor's own estimates
        (profile="inductor"), or the importer's default (the calibrated H200 model)."""
        if self.durations is not None:
            return self.durations
        if self.profile == INDUCTOR:
            if self.calibration:
                raise GraphError("profile='inductor' uses Inductor's own estimates; a calibration does not apply")
            return INDUCTOR
        if not (self.profile or self.calibration):
            return None
        if self._priced is None:
            from overlapsat.cost import cost_model

            model = cost_model(self.profile, calibration=self.calibration)

            def priced(node: Node) -> float:
                return round(model.duration(node), 3)

            self._priced = priced
        return self._priced

    def __call__(self, snodes: list[Any]) -> list[Any]:
        try:
            return self._reorder(snodes)
        except Exception as e:  # noqa: BLE001 - whatever fails, Inductor's order and the compile go on
            log.warning("overlapsat: keeping Inductor's order for this graph: %s: %s", type(e).__name__, e)
            return snodes

    def _reorder(self, snodes: list[Any]) -> list[Any]:
        # groups by structure, not by their rank-local names: every rank of a 2-D mesh finds the same graph
        g = import_snodes(snodes, name=_graph_name(), durations=self._pricing()).with_structural_groups()
        fp = g.fingerprint()
        if self.mode == "capture":
            self._record(g, fp)
            note("scheduler", g.name, fp, "recorded")
            return snodes
        order, why, _, _ = stored_or_solved(self.store, g, fp, mode=self.mode, time_limit=self.time_limit,
                                         collective_order=self.collective_order)
        if order is not None:
            return self._apply(g, snodes, order, os.path.basename(schedule_path(self.store, fp)))
        self._record(g, fp)
        self._note_miss(g, fp, why)
        note("scheduler", g.name, fp, "no schedule" if why == "no schedule" else "kept Inductor's order",
             why if why != "no schedule" else f"recorded; fallback {self.fallback}")
        if self.fallback == "heuristic":
            return self._apply(g, snodes, self._best_heuristic(g), "best heuristic")
        return snodes

    def _record(self, g: Graph, fp: str) -> None:
        if self.record:
            record_graph(self.store, g, fp)

    def _note_miss(self, g: Graph, fp: str, why: str) -> None:
        """Why this graph ran without a solved schedule: `overlapsat bench STORE` and the user read it."""
        note = {"graph": g.name, "fingerprint": fp, "reason": why, "fallback": self.fallback,
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        atomic_write_text(miss_path(self.store, fp), json.dumps(note, indent=1))
        if why == "no schedule":  # the normal case before an offline solve
            log.info("overlapsat: no schedule yet for %s (%s)", g.name, fp[:12])
        else:  # a stored schedule was refused: the user should know, once
            log.warning("overlapsat: keeping %s for %s: the stored schedule is not usable (%s); `overlapsat "
                        "solve-cache` solves it again", "the best heuristic order" if self.fallback == "heuristic"
                        else "Inductor's order", g.name, why)

    def _best_heuristic(self, g: Graph) -> list[str]:
        """The best valid order of the portfolio: deterministic (work-limited), so every rank picks the same."""
        from overlapsat.evaluate import rank_key
        from overlapsat.heuristics.portfolio import run_all
        from overlapsat.solver import SolveParams

        steps = SolveParams(time_limit=self.time_limit).portfolio_steps
        rows = sorted((h for h in run_all(g, collective_order=self.collective_order, work_limit=steps) if h.valid),
                      key=rank_key)
        if not rows:
            raise GraphError("no heuristic order is valid for this graph")
        return [g.names[i] for i in rows[0].order]

    def _apply(self, g: Graph, snodes: list[Any], order: list[str], what: str) -> list[Any]:
        vs = validate(g, order, collective_order=self.collective_order)
        if vs:
            raise GraphError(f"schedule {what} is invalid for this graph ({vs[0]})")
        by_name = {s.get_name(): s for s in snodes}
        log.info("overlapsat: applying %s to %s (%d nodes)", what, g.name, len(snodes))
        note("scheduler", g.name, g.fingerprint(), "applied", what)
        if self.on_apply is not None:
            self.on_apply(g, order)
        return [by_name[n] for n in order]

    def schedules_digest(self) -> str:
        """What the store can apply: the schedule files' names and contents (missing store: empty)."""
        return schedules_digest(self.store)

    def __getstate__(self) -> dict[str, Any]:
        return {"version": PASS_VERSION, "store": self.store, "mode": self.mode, "record": self.record,
                "time_limit": self.time_limit, "collective_order": self.collective_order, "fallback": self.fallback,
                "profile": self.profile, "calibration": self.calibration,
                "calibration_digest": _file_digest(self.calibration), "schedules": self.schedules_digest(),
                "nonce": self._nonce}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.store, self.mode, self.record = state["store"], state["mode"], state["record"]
        self.time_limit, self.collective_order = state["time_limit"], state["collective_order"]
        self.fallback, self.profile, self.calibration = state["fallback"], state["profile"], state["calibration"]
        self.durations = self.on_apply = self._priced = None
        self._nonce = state.get("nonce", "")

    def uuid(self) -> str:
        """The same key as the pickled state, for Inductor's custom-pass interface."""
        st = self.__getstate__()
        return "overlapsat-" + "-".join(str(st[k]) for k in sorted(st))


def schedule_pass(store: str, *, durations: DurationFn | None = None, record: bool = True,
                  on_apply: Callable[[Graph, list[str]], None] | None = None) -> SchedulePass:
    """An Inductor reorder pass that applies stored schedules and records unsolved graphs (`SchedulePass`)."""
    return SchedulePass(store, durations=durations, record=record, on_apply=on_apply)


def install(mode: str = "apply", store: str = "overlapsat-schedules", *, time_limit: float = 10.0,
            collective_order: str = "group", fallback: str = "inductor", profile: str | None = None,
            calibration: str | None = None, durations: DurationFn | None = None) -> SchedulePass:
    """Switch Inductor's comm/compute reordering to overlapsat, on every rank.

    capture: record each graph in `store`, keep Inductor's order;
    apply:   use the stored schedule when its fingerprint matches and it
             validates; otherwise record the graph and the miss, and keep
             Inductor's order (fallback="inductor") or apply the best
             heuristic order (fallback="heuristic");
    solve:   like apply, but a graph without a schedule is solved inline
             (deterministic, `time_limit`) and its schedule stored.
    Graphs are priced for `profile` (a built-in name such as "h100_sxm", or a
    profile file), corrected by `calibration` (a file from `overlapsat
    calibrate`), or by Inductor's own estimates (profile="inductor"; the
    ports then decide exactly as torch's passes do); the default is the
    calibrated H200 model. Creates `store`.
    Only levels a rank may safely fall back from alone are accepted (`free` is
    not). A callable already in `reorder_for_compute_comm_overlap_passes`
    runs before the pass; torch's own named passes are replaced. Returns the
    installed pass; `uninstall()` (or `installed(...)` as a context manager)
    puts Inductor's settings back.
    """
    torch_module()
    import torch._inductor.config as icfg

    open_store(store)
    p = SchedulePass(store, mode=mode, time_limit=time_limit, collective_order=collective_order, durations=durations,
                     fallback=fallback, profile=profile, calibration=calibration)
    # torch's own named passes are what this one replaces; a callable the user put in the list runs before it
    kept = [x for x in icfg.reorder_for_compute_comm_overlap_passes if callable(x) and not isinstance(x, SchedulePass)]
    swap_config("install", {"reorder_for_compute_comm_overlap": True, "reorder_for_compute_comm_overlap_passes": [*kept, p]})
    name_pricing(INDUCTOR if profile == INDUCTOR else profile or ("your durations" if durations else None), "install")
    name_allocator("install")
    return p


def installed(mode: str = "apply", store: str = "overlapsat-schedules", **options: Any) -> Any:
    """`install(...)` for the block only: `with installed("apply", "schedules") as p: ...`."""
    return installed_by(install, mode, store, **options)


def solve_store(store: str, *, time_limit: float = 60.0, group: Any = None, **options: Any) -> dict[str, str]:
    """Solve every recorded graph in `store` without a usable schedule; fingerprint -> status or outcome.

    Every rank may call it (the README's lines run on every rank). Where torch.distributed is initialized with
    more than one rank in `group` (default: the world), rank 0 of the group solves, and then sends the store's
    schedule files to the others, which write the ones they lack: every rank returns rank 0's answer and finds
    the same schedules, whether or not the ranks share a file system. The others wait in a collective call, so
    the process group's timeout must cover the solve. (`overlapsat.store.solve_store` is the store's own call,
    with jobs, Ray and per-graph outcomes.)
    """
    from overlapsat.store import solve_store as solve_all

    dist = _distributed(group)
    if dist is None or dist.get_rank(group) == 0:
        try:
            answer: Any = {o.fingerprint: o.status or o.outcome
                           for o in solve_all(store, time_limit=time_limit, **options) if o.outcome != "has_schedule"}
        except Exception as e:  # noqa: BLE001 - the other ranks are waiting: they must get the error too
            if dist is None:
                raise
            answer = GraphError(f"rank 0 could not solve the store: {e}")
    if dist is None:
        return answer
    box = [(answer, _schedule_files(store)) if dist.get_rank(group) == 0 else None]
    log.info("overlapsat: %s", "sending the store's schedules to the other ranks" if dist.get_rank(group) == 0
             else "waiting for rank 0 to solve the store")
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
    answer, files = box[0]
    if isinstance(answer, Exception):
        raise answer
    if dist.get_rank(group) != 0:
        open_store(store)
        for name, text in files.items():
            path = os.path.join(store, name)
            if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
                atomic_write_text(path, text)
    return answer


def _distributed(group: Any) -> Any:
    """torch.distributed when it is initialized with more than one rank in `group`, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) < 2:
        return None
    return dist


def _schedule_files(store: str) -> dict[str, str]:
    """The store's schedule files by name: what the other ranks need to apply them."""
    from overlapsat.store import SCHEDULE_SUFFIX

    return {n: open(os.path.join(store, n), encoding="utf-8").read() for n in sorted(os.listdir(store))
            if n.endswith(SCHEDULE_SUFFIX)}
