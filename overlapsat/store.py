"""A schedule store: the directory where the torch bridge records graphs and finds their schedules.

Layout, one pair per graph, keyed by its structural fingerprint (so every rank
finds the same file): `<fp>.graph.json` (recorded by capture), `<fp>.schedule.json`
(written by `solve_store` or the inline solve), `<fp>.lock` (held while a graph
is being solved), `<fp>.miss.json` (why the last apply fell back) and
`<fp>.fused.json` (the captured order's peak after Inductor's fusion: a
default budget's bytes after fusion, decision 82).

`solve_store` solves every graph without a usable schedule, one graph per task,
in local processes or on Ray. Why it is safe to kill, rerun or run twice:

- a schedule is written atomically (temporary file, then rename), so a file
  is either complete or absent;
- each graph is solved under an exclusive `flock` on its lock file, which the
  kernel releases when the holder dies; a second run skips a locked graph, and
  re-checks for a schedule once it holds the lock;
- a schedule that does not load, belongs to another graph or fails the
  validator counts as missing and is solved again;
- any failure stays inside its task and is reported on that graph's row.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from overlapsat.errors import GraphError, InfeasibleBudgetError, NoValidOrderError

log = logging.getLogger(__name__)

GRAPH_SUFFIX, SCHEDULE_SUFFIX, LOCK_SUFFIX, MISS_SUFFIX = ".graph.json", ".schedule.json", ".lock", ".miss.json"
FUSED_SUFFIX = ".fused.json"
OVER = "solved under a budget it went over"  # why a stored plan is set aside (decision 82)
EXECUTORS = ("local", "ray")


# a recorded graph's meta key for orders from elsewhere (name -> node names): torch's OverlapScheduler's, recorded by
# the FX bridge (`add_torch_order`); `solve_one` gives them to the search as candidates (decision 74)
TORCH_ORDER = "extra_orders"


def graph_path(store: str, fp: str) -> str:
    return os.path.join(store, fp + GRAPH_SUFFIX)


def schedule_path(store: str, fp: str) -> str:
    return os.path.join(store, fp + SCHEDULE_SUFFIX)


def miss_path(store: str, fp: str) -> str:
    return os.path.join(store, fp + MISS_SUFFIX)


def fused_path(store: str, fp: str) -> str:
    return os.path.join(store, fp + FUSED_SUFFIX)


def fused_record(store: str, fp: str) -> dict[str, Any]:
    """What the store knows of `fp` after Inductor's fusion (decision 82): `captured_peak_after_fusion` (the
    captured order's peak there, Inductor's own estimate on its fused nodes), and, once a plan under the default
    budget went over that peak after fusion, `over` (the FX budgets such plans were solved under) and
    `next_fx_budget` (the FX budget the next solve takes: the last one less the excess); `moved`, the FX budgets
    of those plans that nodes moved after fusion brought back within it, and `kept`, those of them kept because
    no plan fits the tighter budget (decision 88). Empty when none was recorded, when the file does not read
    as one (the FX budget then stands alone, as before the record), or when it was read before decision 111 (on
    the order before Inductor's own re-sorting by memory, looser than what Inductor emits: the next capture or
    miss records it again)."""
    import json

    try:
        with open(fused_path(store, fp), encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(rec, dict) or not _positive(rec.get("captured_peak_after_fusion")) \
            or rec.get("read_on") != READ_ON:
        return {}
    out: dict[str, Any] = {"captured_peak_after_fusion": rec["captured_peak_after_fusion"]}
    over = rec.get("over")
    good_over = isinstance(over, list) and all(map(_positive, over))
    if _positive(rec.get("next_fx_budget")) and good_over:
        out.update(next_fx_budget=rec["next_fx_budget"], over=over)
    for key in ("targets", "next_by_target"):  # a given budget's (decision 86): keyed by FX budget, by target
        val = rec.get(key)
        if isinstance(val, dict) and val and all(k.isdigit() and _positive(v) for k, v in val.items()):
            out[key] = val
    if "next_by_target" in out and good_over:
        out["over"] = over
    else:
        out.pop("next_by_target", None)
    for key in ("moved", "kept"):  # decision 88: FX budgets whose plan the moves after fusion fitted, and kept
        val = rec.get(key)
        if "over" in out and isinstance(val, list) and all(map(_positive, val)):
            out[key] = val
    return out


def _positive(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


READ_ON = "emitted"  # a captured peak after fusion read on the order Inductor emits (decision 111)


def _write_fused(store: str, fp: str, rec: dict[str, Any]) -> None:
    """Write `fp`'s record after fusion whole (atomically: a reader sees the old record or the new one)."""
    import json

    from overlapsat.io import atomic_write_text

    atomic_write_text(fused_path(store, fp), json.dumps({**rec, "read_on": READ_ON}))


def record_fused_peak(store: str, fp: str, peak: int) -> None:
    """Keep the captured order's peak after Inductor's fusion, once: every rank compiles the same graph, and the
    first record stays."""
    if not fused_record(store, fp):
        _write_fused(store, fp, {"captured_peak_after_fusion": int(peak)})


def record_over(store: str, fp: str, fx_budget: int, excess: int, target: int | None = None,
                moved: bool = False) -> int | None:
    """A plan solved under the FX budget `fx_budget` went `excess` bytes over its budget after fusion (`target`;
    None: the default, the captured order's peak there): that schedule is stale, and the next solve of `fp` under
    the same budget takes `fx_budget - excess` (or less, if an earlier record asks less). `moved`: nodes moved
    after fusion (or sorted memory-first there) brought it back within the budget, so where no plan fits the
    tighter one it is kept (decisions 88 and 92). Returns that next FX budget; None without a captured record to
    add it to, or for a kept plan fitted again (a kept plan not fitted this time is set aside like any other)."""
    rec = fused_record(store, fp)
    if not rec:
        return None
    if int(fx_budget) in rec.get("kept", ()):
        if moved:  # kept, and fitted again: it stays
            return None
        for key in ("kept", "moved"):  # kept, but no longer fitted after fusion: set aside like any other
            rec[key] = [b for b in rec.get(key, []) if b != int(fx_budget)]
    nxt = max(1, int(fx_budget) - int(excess))
    default = target is None or int(target) == rec["captured_peak_after_fusion"]
    if default:
        nxt = min(nxt, rec.get("next_fx_budget", nxt))
        rec["next_fx_budget"] = nxt
    else:
        by = rec.setdefault("next_by_target", {})
        nxt = by[str(int(target))] = min(nxt, by.get(str(int(target)), nxt))
    rec["over"] = sorted({*rec.get("over", []), int(fx_budget)})
    if moved:
        rec["moved"] = sorted({*rec.get("moved", []), int(fx_budget)})
    _write_fused(store, fp, rec)
    return nxt


def keep_moved(store: str, fp: str, fx_budget: int) -> bool:
    """Decision 88: where no plan fits the tighter FX budget, the plan solved under `fx_budget` stays if the moves
    after fusion fitted it (`record_over(..., moved=True)`); True if it does."""
    rec = fused_record(store, fp)
    if int(fx_budget) not in rec.get("moved", ()):
        return False
    rec["kept"] = sorted({*rec.get("kept", []), int(fx_budget)})
    _write_fused(store, fp, rec)
    return True


def after_fusion_budget(store: str, fp: str, graph: Any, budget: Any) -> tuple[int, int, bool] | None:
    """Decision 86: a budget given for a graph whose captured order's peak after fusion is recorded bounds the
    graph as Inductor emits it. Returns (`target`, the bytes after fusion: a ratio of the recorded peak, or the
    size given; the FX budget to solve under: the target plus what fusion removed from the captured order, or
    the tighter one recorded after a plan went over that target; whether it is that tighter one). None where the
    budget stays the FX model's: no record, no budget given, or "none"."""
    from overlapsat.budget import as_budget
    from overlapsat.simulate import peak_memory

    rec = fused_record(store, fp)
    mb = as_budget(budget)
    if not rec or mb is None:
        return None
    fused = rec["captured_peak_after_fusion"]
    target = mb.resolve_from(fused)
    if target == fused:
        later = rec.get("next_fx_budget")
    else:
        later = rec.get("next_by_target", {}).get(str(target))
    fx = later if later is not None else max(1, target + peak_memory(graph) - fused)
    if str(fx) not in rec.get("targets", {}):  # what apply holds a plan solved under `fx` to, after fusion
        rec.setdefault("targets", {})[str(fx)] = target
        _write_fused(store, fp, rec)
    return target, fx, later is not None


def recorded_pricings(store: str, most: int = 3) -> set[str]:
    """The pricings (`meta["pricing"]`) of up to `most` recorded graphs of `store`, newest first: what a pass
    that finds no schedule compares its own pricing with (a graph's fingerprint includes its prices)."""
    import json

    try:
        paths = sorted((graph_path(store, fp) for fp in recorded(store)), key=os.path.getmtime, reverse=True)
    except (GraphError, OSError):
        return set()
    out = set()
    for path in paths[:most]:
        try:
            with open(path, encoding="utf-8") as f:
                priced = (json.load(f).get("meta") or {}).get("pricing")
        except (OSError, ValueError):
            continue
        if isinstance(priced, str):
            out.add(priced)
    return out


def recorded(store: str) -> list[str]:
    """Fingerprints of the recorded graphs, sorted."""
    if not os.path.isdir(store):
        raise GraphError(f"schedule store {store!r} is not a directory")
    return sorted(n[: -len(GRAPH_SUFFIX)] for n in os.listdir(store) if n.endswith(GRAPH_SUFFIX))


def usable_stored(store: str, fp: str, graph: Any, collective_order: str | None = None, *,
                  plans: bool = False) -> tuple[Any, str]:
    """The stored Schedule for `graph` (a `Graph`, or a `Problem`: its level and budget) when it loads, matches
    and validates; else (None, why not). A plan (a schedule with buckets) is usable only with `plans`: its
    order is validated on the bucketed graph, and its buckets against the problem's bucket cap."""
    from overlapsat.problem import as_problem
    from overlapsat.schedules import load_schedule
    from overlapsat.validate import validate

    problem = as_problem(graph, None, collective_order)
    graph = problem.graph
    path = schedule_path(store, fp)
    if not os.path.exists(path):
        return None, "no schedule"
    try:
        sched = load_schedule(path, graph)
    except GraphError as e:
        return None, f"corrupt schedule: {e}"
    target = problem
    if sched.transports and not plans:
        return None, "a plan with copy-engine transports (install_fx(plans=True) applies it)"
    if sched.buckets:
        if not plans:
            return None, "a bucketed plan (the scheduler-node pass applies orders only; install_fx(plans=True) " \
                         "applies plans)"
        from overlapsat.plan import laid_out, materialize
        from overlapsat.schedules import unpriced

        over = problem.over_cap(sched.plan.buckets)
        if over:
            return None, f"outside the bucket policy: {over[0]}"
        target = problem.on(materialize(problem.relaxed, sched.plan.buckets, laid_out(unpriced, sched.layout)))
    vs = validate(target, sched.order, limit=1)
    if vs:
        return None, f"invalid schedule: {vs[0]}"
    rec = fused_record(store, fp)
    fx = sched.metrics.get("memory_budget")
    if fx in rec.get("over", ()) and fx not in rec.get("kept", ()):
        target = rec.get("targets", {}).get(str(fx))
        if target is not None and target != rec["captured_peak_after_fusion"]:
            return None, (f"{OVER} after Inductor's fusion ({target} B); solve-cache solves it again under "
                          f"{rec.get('next_by_target', {}).get(str(target), fx)} B (decision 86)")
        return None, (f"{OVER} after Inductor's fusion; solve-cache solves it again "
                      f"under {rec.get('next_fx_budget', fx)} B (decision 82)")
    return sched, "ok"


def _stale_budget(store: str, fp: str, graph: Any) -> int | None:
    """The FX budget the stored schedule of `fp` (`graph`'s) was solved under (None: none readable)."""
    from overlapsat.schedules import load_schedule

    try:
        fx = load_schedule(schedule_path(store, fp), graph).metrics.get("memory_budget")
    except (GraphError, OSError):
        return None
    return fx if _positive(fx) else None


def usable_schedule(store: str, fp: str, graph: Any, collective_order: str | None = None, *,
                    plans: bool = False) -> tuple[list[str] | None, str]:
    """The stored order for `graph` (a `Graph` or a `Problem`) when it loads, matches and validates; else (None,
    why not). With `plans`, a plan's order (of its bucketed graph) counts too."""
    sched, why = usable_stored(store, fp, graph, collective_order, plans=plans)
    return (sched.order if sched is not None else None), why


def schedules_digest(store: str) -> str:
    """The store's schedule files and after-fusion records, names and contents, as one hash (a missing store:
    the empty hash).

    Part of the torch passes' cache keys: a newly solved schedule changes the
    key, an unchanged store keeps it."""
    import hashlib

    h = hashlib.sha256()
    try:
        for n in sorted(x for x in os.listdir(store) if x.endswith((SCHEDULE_SUFFIX, FUSED_SUFFIX))):
            h.update(n.encode())
            with open(os.path.join(store, n), "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    except OSError:
        pass
    return h.hexdigest()


@contextmanager
def graph_lock(store: str, fp: str) -> Iterator[bool]:
    """An exclusive, non-blocking lock on one graph; yields False when another process holds it."""
    import fcntl

    path = os.path.join(store, fp + LOCK_SUFFIX)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@dataclass
class Outcome:
    """What happened to one recorded graph."""

    fingerprint: str
    graph: str = ""  # the graph's name, once loaded
    outcome: str = ""  # solved | replaced_corrupt | replaced_over_budget | kept_captured | kept_moved | has_schedule
    # | locked | error
    status: str = ""  # the solver's status when solved
    exposed_us: float | None = None
    input_exposed_us: float | None = None
    makespan_us: float | None = None  # the step's time: a plan can expose more and still be shorter
    input_makespan_us: float | None = None
    buckets: int | None = None  # a plan's buckets (None: an order)
    seconds: float = 0.0
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def solve_one(store: str, fp: str, time_limit: float, options: dict[str, Any], started: float | None = None) -> Outcome:
    """Solve one recorded graph under its lock; never raises (a task's failure is its row's). Its time limit
    counts from `started` (a `time.time()`: when the caller launched it), else from this call, loading included."""
    import time

    t0 = time.monotonic()
    since = (lambda: time.time() - started) if started is not None else (lambda: time.monotonic() - t0)
    out = Outcome(fp)
    try:
        with graph_lock(store, fp) as mine:
            if not mine:
                out.outcome, out.message = "locked", "another run is solving this graph"
                return out
            from overlapsat.io import load_graph
            from overlapsat.solver import optimize

            g = load_graph(graph_path(store, fp))
            out.graph = g.name
            if g.fingerprint() != fp:
                raise GraphError(f"file name says fingerprint {fp} but the graph has {g.fingerprint()}")
            co = options.get("collective_order", "group")
            order, why = usable_schedule(store, fp, g, co, plans=True)  # re-checked under the lock
            if order is not None:
                out.outcome = "has_schedule"
                return out
            opts = dict(options)
            profile = opts.pop("plans", None)
            priced, mismatch = g.meta.get("pricing"), ""
            if profile is not None and isinstance(profile, str) and priced not in (None, profile):
                # the graph's own durations are the recording's; merged collectives would be priced by another GPU
                mismatch = (f"recorded with pricing {priced!r} but planned with {profile!r}: merged collectives are "
                            f"priced for {profile!r} and the rest for {priced!r}, so buckets rarely pay; run "
                            f"solve-cache --plans {priced}, or capture again with profile={profile!r}")
                log.warning("overlapsat: graph %s (%s) %s", g.name, fp[:12], mismatch)
            extra = recorded_orders(g)
            tightened, asked, raised, rec = None, opts.get("memory_budget"), "", fused_record(store, fp)
            if asked is None and "next_fx_budget" in rec:
                tightened = rec["next_fx_budget"]  # the default, less what fusion added
            elif (fused := after_fusion_budget(store, fp, g, asked)) is not None:  # decision 86
                target, opts["memory_budget"], again = fused
                tightened = opts["memory_budget"] if again else None
            if tightened is not None:  # decision 95: not below the memory floor, the first time
                tightened, raised = _not_below_floor(g, tightened, rec.get("over", ()))
                opts["memory_budget"] = tightened
            said = f" ({raised})" if raised else ""  # the remark closes a kept order's message
            try:
                if profile is not None:  # a plan: buckets and order (docs/plans.md), priced by the profile's model
                    from overlapsat.cost import cost_model
                    from overlapsat.problem import Problem
                    from overlapsat.solver.plan_search import optimize_plan

                    r = optimize_plan(Problem.of(g, opts.pop("memory_budget", None), co, opts.pop("bucket_cap", None),
                                                 opts.pop("bucket_layout", None) or "copy"),
                                      cost_model(profile).duration, time_limit=time_limit, clock=_clock(time_limit, since()),
                                      extra_orders=extra, **opts)
                    out.buckets = len(r.buckets)
                else:
                    r = optimize(g, time_limit=time_limit, clock=_clock(time_limit, since()), extra_orders=extra, **opts)
            except (InfeasibleBudgetError, NoValidOrderError) as e:  # proven, or none found in the time
                if tightened is None:
                    raise
                stale = _stale_budget(store, fp, g)
                if stale is not None and keep_moved(store, fp, stale):  # decision 88
                    out.outcome = "kept_moved"
                    out.message = (f"no plan fits the FX budget of {tightened} B set after fusion went over its "
                                   f"budget, so the plan stays as the moves after Inductor's fusion fitted it "
                                   f"(decision 88): {e}{said}")
                    return out
                out.outcome = "kept_captured"
                out.message = (f"no plan fits the FX budget of {tightened} B set after fusion went over the captured "
                               f"order's peak (decision 82), so the captured order stays: {e}" if asked is None else
                               f"no plan fits the FX budget of {tightened} B set after fusion went over the budget of "
                               f"{target} B after fusion (decision 86), so the captured order stays: {e}") + said
                return out
            r.save(schedule_path(store, fp))
            out.outcome = ("solved" if why == "no schedule" else "replaced_over_budget" if why.startswith(OVER)
                           else "replaced_corrupt")
            out.status, out.exposed_us, out.input_exposed_us = r.status.value, r.exposed, r.baseline["exposed"]
            out.makespan_us, out.input_makespan_us = r.makespan, r.baseline["makespan"]
            no_bucket = (f"no bucket: {r.plan_info.no_bucket_reason}" if profile is not None and not r.buckets
                         and r.plan_info is not None else "")
            out.message = "; ".join(x for x in ("" if why == "no schedule" else why, raised, mismatch, no_bucket) if x)
    except Exception as e:  # noqa: BLE001 - one bad graph is reported and skipped; the rest are solved
        out.outcome, out.message = "error", f"{type(e).__name__}: {e}"
    finally:
        out.seconds = time.monotonic() - t0
    return out


def _not_below_floor(g: Any, fx_budget: int, over: Any) -> tuple[int, str]:
    """Decision 95: the tighter FX budget a record asks for, raised to the graph's memory floor where it fell
    below it (there it is proven unreachable, and the captured order would stay), unless a plan solved at that
    floor went over already; and a remark where it was raised."""
    from overlapsat.solver.memory_bound import peak_floor

    floor = int(peak_floor(g)[0])
    if fx_budget < floor and floor not in {int(b) for b in over}:
        return floor, (f"the tighter FX budget of {fx_budget} B is below the graph's memory floor, so it was solved "
                       f"at the floor, {floor} B (decision 95)")
    return int(fx_budget), ""


def recorded_orders(g: Any) -> dict[str, list[str]]:
    """The orders from elsewhere a recorded graph holds (`TORCH_ORDER`); a malformed entry raises GraphError
    naming the key, never silently dropped."""
    orders = g.meta.get(TORCH_ORDER) or {}
    if not isinstance(orders, dict) or not all(isinstance(k, str) and isinstance(v, list) and
                                               all(isinstance(x, str) for x in v) for k, v in orders.items()):
        raise GraphError(f"graph {g.name!r}: meta[{TORCH_ORDER!r}] must map names to lists of node names")
    for name, order in orders.items():
        unknown = sorted(set(order) - set(g.names))
        if unknown:
            raise GraphError(f"graph {g.name!r}: meta[{TORCH_ORDER!r}][{name!r}] names {len(unknown)} node(s) the "
                             f"graph lacks, e.g. {unknown[0]!r}")
    return orders


def _clock(time_limit: float, spent: float) -> Any:
    """The graph's clock: what is left of its time limit after `spent` seconds (`TimeBudget.left_of`)."""
    from overlapsat.solver.params import TimeBudget

    return TimeBudget.left_of(time_limit, spent)


def solve_store(store: str, *, time_limit: float = 60.0, jobs: int = 1, executor: str = "local",
                on_done: Callable[[Outcome], None] | None = None, **options: Any) -> list[Outcome]:
    """Solve every recorded graph of `store` without a usable schedule; one Outcome per graph.

    `jobs` graphs are solved at once (local processes, or Ray tasks; Ray joins
    the cluster in RAY_ADDRESS or starts a local instance). `options` go to
    `optimize`; without `workers`, each solve gets an equal share of the cores.
    `plans="h200"` (a profile) writes plans instead of orders (`optimize_plan`,
    merged collectives priced by that profile's cost model): apply them with
    `install_fx(..., plans=True)`. With it, `transport="h100"` (a copy-engine
    table) lets each plan move all_gathers by copy engine where that is cheaper, `bucket_cap="25MiB"`
    bounds each bucket's bytes (`Problem.bucket_cap`), and `bucket_layout="coalesced"` issues each bucket as
    one group call with no copies (`Problem.bucket_layout`, decision 55).
    """
    if executor not in EXECUTORS:
        raise GraphError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise GraphError(f"jobs must be an integer >= 1, got {jobs!r}")
    from overlapsat.solver import SolveParams

    SolveParams.from_kwargs(time_limit=time_limit, **{k: v for k, v in options.items()
                                                      if k not in ("memory_budget", "plans", "transport",
                                                                   "bucket_cap", "bucket_layout")})
    if options.get("plans") is not None:
        from overlapsat.cost import cost_model

        cost_model(options["plans"])  # an unknown profile fails here, not in every task
    if options.get("bucket_layout") is not None:
        if options.get("plans") is None:
            raise GraphError("bucket_layout is a choice of plans: pass plans=PROFILE with it")
        from overlapsat.plan import check_layout

        check_layout(options["bucket_layout"])  # an unknown layout fails here, not in every task
    if options.get("bucket_cap") is not None:
        if options.get("plans") is None:
            raise GraphError("bucket_cap bounds plans: pass plans=PROFILE with it")
        from overlapsat.budget import resolve_size

        resolve_size(options["bucket_cap"], "bucket cap")  # a bad size fails here, not in every task
    if options.get("transport") is not None:
        if options.get("plans") is None:
            raise GraphError("transport is a choice of plans: pass plans=PROFILE with it")
        from overlapsat.cost.transport import copy_engine

        options["transport"] = copy_engine(options["transport"])  # an unknown table fails here too
    # (bad options fail here, not in every task; a budget is resolved per graph by optimize)
    options.setdefault("workers", max(1, min(8, (os.cpu_count() or 1) // jobs)))
    todo: list[str] = []
    done: list[Outcome] = []
    for fp in recorded(store):
        if os.path.exists(schedule_path(store, fp)):
            try:
                from overlapsat.io import load_graph

                g = load_graph(graph_path(store, fp))
                # a usable plan (`overlapsat plan` into the store) is kept: not overwritten by an order
                order, _ = usable_schedule(store, fp, g, options.get("collective_order", "group"), plans=True)
            except GraphError:
                order = None  # the task reports the bad graph
            if order is not None:
                done.append(Outcome(fp, graph=g.name, outcome="has_schedule"))
                continue
        todo.append(fp)
    results: list[Outcome] = []
    run = _run_ray if executor == "ray" else _run_local
    for o in run(store, todo, time_limit, jobs, options):
        if on_done is not None:
            on_done(o)
        results.append(o)
    by_fp = {o.fingerprint: o for o in done + results}
    return [by_fp[fp] for fp in sorted(by_fp)]


def _run_local(store: str, todo: list[str], time_limit: float, jobs: int, options: dict[str, Any],
               worker: list[str] | None = None) -> Iterator[Outcome]:
    """Each graph in a fresh interpreter of its own (`python -m overlapsat.store`), `jobs` at a time: one that
    dies (OR-Tools has aborted the process on rare models) costs its own row only. A fresh interpreter, not
    multiprocessing: spawn would run the caller's unguarded main script again (a torchrun rank script)."""
    import pickle
    import subprocess
    import sys
    import time

    cmd = worker or [sys.executable, "-m", "overlapsat.store"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # this process's imports
    queue = list(todo)
    running: dict[str, Any] = {}
    try:
        while queue or running:
            while queue and len(running) < jobs:
                fp = queue.pop(0)
                proc = subprocess.Popen([*cmd, str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                assert proc.stdin is not None
                # the graph's time limit counts from here: the process's start and imports are part of it
                proc.stdin.write(pickle.dumps((store, fp, time_limit, options, time.time())))
                proc.stdin.close()
                running[fp] = proc
            fp, proc = _first_done(running)
            del running[fp]
            out = proc.stdout.read() if proc.stdout is not None else b""
            proc.wait()
            try:
                got = pickle.loads(out) if proc.returncode == 0 else None
            except Exception:  # noqa: BLE001 - a truncated answer is a death like any other
                got = None
            yield got if isinstance(got, Outcome) else Outcome(
                fp, outcome="error", message=f"the solver's process died (exit code {proc.returncode}); the other "
                                             "graphs are unaffected")
    finally:
        for proc in running.values():
            proc.kill()


def _first_done(running: dict[str, Any]) -> tuple[str, Any]:
    """The first of the running solver processes to finish (polled: a few times a second is plenty)."""
    import time

    while True:
        for fp, proc in running.items():
            if proc.poll() is not None:
                return fp, proc
        time.sleep(0.05)


def _worker_main(argv: list[str]) -> None:
    """`python -m overlapsat.store PARENT_PID`: solve the pickled (store, fp, time_limit, options) read from
    stdin and write the pickled Outcome to stdout."""
    import pickle
    import sys

    _die_with_parent(int(argv[0]) if argv else None)
    store, fp, time_limit, options, started = pickle.loads(sys.stdin.buffer.read())
    out = solve_one(store, fp, time_limit, options, started)
    sys.stdout.buffer.write(pickle.dumps(out))
    sys.stdout.flush()


def _die_with_parent(parent: int | None) -> None:
    """A run that is killed takes its solver processes with it (Linux: the parent-death signal), so that no
    orphan goes on writing into the store; elsewhere a dead parent is noticed only at the end."""
    import signal
    import sys

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:  # noqa: BLE001 - best effort
            return
    if parent is not None and os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _run_ray(store: str, todo: list[str], time_limit: float, jobs: int, options: dict[str, Any]) -> Iterator[Outcome]:
    try:
        import ray
    except ImportError:
        raise GraphError("--executor ray needs Ray: pip install 'overlapsat[ray]'") from None
    if not ray.is_initialized():
        ray.init(logging_level=logging.WARNING, include_dashboard=False)
    task = ray.remote(num_cpus=options.get("workers", 1), max_retries=0)(solve_one)
    queue = list(todo)
    running: dict[Any, str] = {}
    while queue or running:
        while queue and len(running) < jobs:  # at most `jobs` graphs in flight, as locally
            fp = queue.pop(0)
            running[task.remote(os.path.abspath(store), fp, time_limit, options)] = fp
        ready, _ = ray.wait(list(running), num_returns=1)
        for ref in ready:
            fp = running.pop(ref)
            try:
                yield ray.get(ref)
            except Exception as e:  # noqa: BLE001 - a task that died on its node
                yield Outcome(fp, outcome="error", message=f"Ray task failed: {type(e).__name__}: {e}")


__all__ = ["EXECUTORS", "Outcome", "fused_path", "fused_record", "graph_lock", "graph_path", "miss_path",
           "record_fused_peak", "record_over", "recorded", "schedule_path", "schedules_digest", "solve_one",
           "solve_store", "usable_schedule", "usable_stored"]

if __name__ == "__main__":  # the worker: through the module's own name, so that Outcome pickles as such
    import sys

    from overlapsat import _process

    _process.defer_or_tools = True  # a worker's limit counts from its start: OR-Tools loads when a search needs it
    from overlapsat.store import _worker_main as work

    work(sys.argv[1:])
