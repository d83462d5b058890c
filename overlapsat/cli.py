"""The `overlapsat` command line. Errors become one line and a non-zero exit."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.fmt import bound_line, fmt_bytes, fmt_us
from overlapsat.graph import COLLECTIVE_ORDERS
from overlapsat.io import save_graph

# documented in docs/reading.md and in `overlapsat --help`
EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERNAL, EXIT_NO_ORDER, EXIT_INTERRUPTED = 0, 2, 3, 4, 5, 130
EXIT_CODES = f"""exit codes:
  {EXIT_OK}    success
  {EXIT_BAD_INPUT}    bad input: a file, an option or a path to write (the message names it); an invalid schedule
  {EXIT_INFEASIBLE}    the memory budget is proven unreachable
  {EXIT_INTERNAL}    internal error (a bug: rerun with --debug and report it)
  {EXIT_NO_ORDER}    no order within the memory budget was found in time (not a proof that none exists)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); solve writes the best order known so far to --out once the graph is
       loaded and an order within the budget is known (the input order or better); before that, nothing"""


def _load(path: str | None) -> Any:
    """A graph file, or a bundled example by name (`overlapsat inspect tp_small`)."""
    import os

    from overlapsat.examples import BUNDLED_DIR, bundled
    from overlapsat.io import load_graph

    if path and not os.path.exists(path) and os.sep not in path and "/" not in path:
        names = sorted(f[:-5] for f in os.listdir(BUNDLED_DIR) if f.endswith(".json"))
        if path.removesuffix(".json") in names:
            return load_graph(bundled(path))
        raise GraphError(f"graph file {path!r} does not exist, and no bundled example has that name "
                         f"(bundled: {', '.join(names)})")
    return load_graph(path or bundled())


def _priced(g: Any, args: argparse.Namespace) -> Any:
    """The graph re-priced for --profile / --calibration, when given (docs/cost_model.md)."""
    profile, cal = getattr(args, "profile", None), getattr(args, "calibration", None)
    if not (profile or cal):
        return g
    from overlapsat.cost import cost_model

    return g.reprice(cost_model(profile, calibration=cal))


def _plan_model(args: argparse.Namespace, what: str) -> Any:
    """The cost model that prices merged collectives (--profile / --calibration); refused by name without one."""
    if not (args.profile or args.calibration):
        raise GraphError(f"{what}: a merged collective is priced by a cost model: give --profile (e.g. h200) or "
                         "--calibration")
    from overlapsat.cost import cost_model

    return cost_model(args.profile, calibration=args.calibration)


def _pricing_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--profile", metavar="GPU", help="price the graph for this hardware profile (a built-in name such as "
                                                    "h100_sxm, or a profile file) instead of its own durations")
    sp.add_argument("--calibration", metavar="JSON", help="correct the profile's model with the tables of "
                                                          "`overlapsat calibrate` (their profile is used if none given)")


TEXT_OUTPUTS = ("out", "trace", "csv")  # the outputs that may go to standard output ('-')


def _check_outputs(args: argparse.Namespace) -> None:
    """Every path the command will write, checked before any work (a bad one costs no solve). `-` is standard
    output for one text output at most, and not beside --json, which prints there too."""
    from overlapsat.io import STDOUT, check_writable

    to_stdout = [opt for opt in TEXT_OUTPUTS if getattr(args, opt, None) == STDOUT]
    if getattr(args, "plot", None) == STDOUT:
        raise GraphError("--plot -: a timeline is a picture; give a file name (.png or .svg)")
    if len(to_stdout) + bool(getattr(args, "json", False) and to_stdout) > 1:
        raise GraphError(f"only one output can go to standard output ('-'): --{', --'.join(to_stdout)}"
                         + (" and --json" if getattr(args, "json", False) else ""))
    for opt in ("out", "plot", "trace", "csv"):
        path = getattr(args, opt, None)
        if path:
            check_writable(path)


def _output_files(args: argparse.Namespace) -> dict[str, tuple[int, int, int] | None]:
    """Each output file's (inode, size, mtime) now, None where there is none: what an interrupt compares with."""
    out: dict[str, tuple[int, int, int] | None] = {}
    for opt in ("out", "plot", "trace", "csv"):
        path = getattr(args, opt, None)
        if path and path != "-":
            try:
                st = os.stat(path)
                out[path] = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                out[path] = None
    return out


def _written_since(args: argparse.Namespace, before: dict[str, tuple[int, int, int] | None]) -> str:
    """What an interrupted command left behind, read off its output files: each is written whole or not at all
    (replaced in one rename), so a file that changed since the start is this run's, complete."""
    now = _output_files(args)
    wrote = [p for p, st in now.items() if st is not None and st != before.get(p)]
    if not wrote:
        return "nothing written"
    return f"wrote {', '.join(wrote)}; the outputs not yet written were not written"


def _emit(args: argparse.Namespace, payload: dict[str, Any], lines: list[str]) -> None:
    """The command's report: on stdout, or on stderr when an output file goes to stdout (`-`)."""
    if args.json:
        print(json.dumps(payload, indent=1, default=str))
    elif any(getattr(args, opt, None) == "-" for opt in TEXT_OUTPUTS):
        print("\n".join(lines), file=sys.stderr)
    else:
        print("\n".join(lines))


def cmd_inspect(args: argparse.Namespace) -> int:
    from overlapsat.bounds import lower_bound
    from overlapsat.simulate import simulate

    g = _load(args.graph)
    r = simulate(g)
    lb = lower_bound(g, args.collective_order)
    per_group = {grp: len(cs) for grp, cs in zip(g.groups, g.group_colls)}
    payload = {"graph": g.name, "fingerprint": g.fingerprint(), "counts": g.counts(), "collectives_per_group": per_group,
               "compute_us": g.compute_total, "comm_us": g.comm_total,
               "input_order": {"makespan_us": r.makespan, "exposed_us": r.exposed, "peak_memory": r.peak_memory},
               "lower_bound": lb.as_dict()}
    c = g.counts()
    lines = [
        f"graph {g.name}  (fingerprint {payload['fingerprint']})",
        f"  nodes {c['nodes']}: {c['compute']} compute, {c['collective']} collective, {c['wait']} wait; "
        f"{c['buffers']} buffers, {c['edges']} edges",
        "  collectives per group: " + ", ".join(f"{k}={v}" for k, v in per_group.items()),
        f"  compute {fmt_us(g.compute_total)}, communication {fmt_us(g.comm_total)}",
        f"  input order: makespan {fmt_us(r.makespan)}, exposed {fmt_us(r.exposed)} "
        f"({100 * r.exposed_fraction:.1f}%), peak memory {fmt_bytes(r.peak_memory)}",
        "  " + bound_line(lb.makespan, lb.exposed, f"analytical, collective order {args.collective_order!r}"),
    ]
    _emit(args, payload, lines)
    return EXIT_OK


def _plan_graph(args: argparse.Namespace, g: Any, sched: Any) -> Any:
    """The bucketed graph a plan file's order is of, `g` re-priced by the profile as `plan` prices it (the same
    profile must be given, as `plan` was: a merged collective's time comes from the cost model, not the graph)."""
    from overlapsat.plan import laid_out, materialize

    what = f"simulate: {args.schedule} is a plan ({len(sched.buckets)} buckets)"
    model = _plan_model(args, what)
    if sched.transports:
        raise GraphError(f"{what} that moves {len(sched.transports)} all_gathers by copy engine: `simulate` does not "
                         "price transports; `plan --json` reports its figures")
    return materialize(g.reprice(model).relaxed(args.collective_order), list(sched.plan.buckets),
                       laid_out(model.duration, sched.layout))


def _bucket_lines(g: Any, buckets: list[list[str]]) -> list[str]:
    """One line per bucket: its kind and group (its key), its bytes, and its members in issue order."""
    from overlapsat.fmt import fmt_bytes

    out = []
    for k, members in enumerate(buckets):
        nds = [g.node(m) for m in members]
        total = sum(int(nd.nbytes or 0) for nd in nds)
        out.append(f"  bucket {k}: {nds[0].op} on group {nds[0].group}, {len(nds)} collectives, "
                   f"{fmt_bytes(total)}: {', '.join(members)}")
    return out


def cmd_simulate(args: argparse.Namespace) -> int:
    from overlapsat.budget import resolve_budget
    from overlapsat.schedules import load_schedule
    from overlapsat.simulate import simulate
    from overlapsat.validate import validate

    g = _load(args.graph)
    sched = load_schedule(args.schedule, g) if args.schedule else None
    order = sched.order if sched is not None else g.input_order
    target = _plan_graph(args, g, sched) if sched is not None and sched.buckets else _priced(g, args)
    budget = resolve_budget(g, args.memory_budget)  # a ratio is of the unbucketed graph's input order, as in `plan`
    vs = validate(target, order, budget, collective_order=args.collective_order)
    r = simulate(target, order)
    expo = r.collective_exposure()
    payload = {"graph": g.name, "makespan_us": r.makespan, "exposed_us": r.exposed, "peak_memory": r.peak_memory,
               "valid": not vs, "violations": [str(v) for v in vs], "collective_exposure_us": expo,
               "buckets": sched.buckets if sched is not None else []}
    lines = [
        f"graph {g.name}: {'schedule ' + args.schedule if args.schedule else 'input order'}"
        + (f", a plan of {len(sched.buckets)} buckets" if sched is not None and sched.buckets else ""),
        *(_bucket_lines(g, sched.buckets) if sched is not None else []),
        f"  makespan {fmt_us(r.makespan)}, exposed {fmt_us(r.exposed)} ({100 * r.exposed_fraction:.1f}%), "
        f"peak memory {fmt_bytes(r.peak_memory)}, {'valid' if not vs else f'INVALID ({len(vs)} violations)'}",
        *(f"  ! {v}" for v in vs[:10]),
        "  exposure per collective:",
        *(f"    {name:40s} {fmt_us(t)}" for name, t in sorted(expo.items(), key=lambda kv: -kv[1])[: args.top]),
    ]
    _emit(args, payload, lines)
    return EXIT_OK if not vs else EXIT_BAD_INPUT


class _Ticker:
    """Progress while a command works: a line kept current on a terminal (stderr, redrawn twice a second), or a
    `logging` line (logger "overlapsat.progress") at each phase and every `every_s` seconds otherwise. It shows
    the phase (loading, heuristics, model, lns, polish), the elapsed time, the best makespan and the bound. It
    names no end time: a deterministic run ends when its work is done, which the clock does not predict."""

    def __init__(self, enabled: bool, every_s: float = 5.0, prefix: str = "") -> None:
        import threading
        import time

        self.tty = sys.stderr.isatty()
        self.on, self.every_s, self.prefix = enabled, every_s, prefix
        self.t0 = time.monotonic()
        self.phase_name, self.best, self.bound = "loading", math.inf, 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: Any = None
        if self.on:
            self._thread = threading.Thread(target=self._run, name="overlapsat-progress", daemon=True)
            self._thread.start()

    def line(self) -> str:
        import time

        best = fmt_us(self.best) if math.isfinite(self.best) else "-"
        bound = fmt_us(self.bound) if self.bound > 0 else "-"
        return (f"{self.prefix}{self.phase_name}: {time.monotonic() - self.t0:.1f} s, best makespan {best}, "
                f"bound {bound}")

    def _show(self) -> None:
        with self._lock:
            if self.tty:
                sys.stderr.write("\r" + self.line().ljust(90))
                sys.stderr.flush()
            else:
                logging.getLogger("overlapsat.progress").info(self.line())

    def _run(self) -> None:
        while not self._stop.wait(0.5 if self.tty else self.every_s):
            self._show()

    def __call__(self, p: Any) -> None:  # on_progress: an improvement
        self.best, self.bound = min(self.best, p.makespan_us), max(self.bound, p.bound_us)
        if self.on and self.tty:
            self._show()

    def phase(self, p: Any) -> None:  # on_phase: what runs now
        changed, self.phase_name = p.phase != self.phase_name, p.phase
        self.best, self.bound = min(self.best, p.makespan_us), max(self.bound, p.bound_us)
        if self.on and changed and p.phase != "done":
            self._show()

    def done(self) -> None:
        self._stop.set()
        if self.on and self.tty:
            with self._lock:
                sys.stderr.write("\r" + " " * 100 + "\r")
                sys.stderr.flush()


STOPPED = {"proof": "proof (the order meets a proven bound)", "work": "the work budget", "clock": "the clock",
           "interrupt": "Ctrl-C", "rule": "a stopping rule"}


def _search(args: argparse.Namespace) -> dict[str, Any]:
    """--time-limit, --work and --timed as optimize's options, with the command's clock: the limit counts from
    the command's start, loading included (decision 57), while the work budget, and so a deterministic answer,
    follows the limit as given."""
    if args.timed and args.work is not None:
        raise GraphError("--work sets a deterministic budget; --timed stops on the clock: give one of them")
    if getattr(args, "workers", None) is not None and not args.timed and args.fn is not cmd_solve_cache:
        # said, not ignored (solve-cache also reserves them per Ray task, so there they mean something)
        raise GraphError("--workers sets CP-SAT's workers under --timed; a deterministic search runs one (the same "
                         "answer on any machine): add --timed, or leave --workers out")
    from overlapsat.solver.params import TimeBudget

    clock = TimeBudget.left_of(args.time_limit, time.monotonic() - getattr(args, "started", time.monotonic()))
    return {"time_limit": args.time_limit, "work_limit": args.work, "deterministic": not args.timed, "clock": clock}


def _solver_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                    help="seconds per graph (default 10), a wall-clock limit in both modes. Deterministic (the "
                         "default): the work budget, 0.5 x S, ends the search, and the same answer comes on any "
                         "machine and load unless the clock cuts it first (then the result says so); with --timed: "
                         "the search stops on the clock at S")
    sp.add_argument("--work", type=float, default=None, metavar="W",
                    help="deterministic work budget per graph (reference seconds, decision 83; default 0.5 x "
                         "--time-limit); it binds every phase (docs/solver.md, Determinism)")
    sp.add_argument("--timed", action="store_true",
                    help="stop on the clock at --time-limit instead of on the work budget (maybe not reproducible)")
    sp.add_argument("--memory-budget", metavar="X",
                    help="bytes ('40GiB'), a ratio of the input order's peak ('1.2x'), or 'none'. Plans (plan, "
                         "compare --plans, solve-cache --plans) default to the input order's peak (1.0x): a plan "
                         "never peaks above the order it replaces unless told so; orders default to none. In "
                         "solve-cache, a graph the torch bridge captured is held to it after Inductor's fusion "
                         "(a ratio of the captured order's peak there, decisions 82 and 86)")
    sp.add_argument("--collective-order", choices=list(COLLECTIVE_ORDERS), default="group",
                    help="which collective reorderings are allowed, strictest first: chain (Inductor's: one in flight), "
                         "global, group (default: each process group's input order), free (only when every rank "
                         "applies the same solved order; docs/solver.md)")
    sp.add_argument("--workers", type=int, default=None,
                    help="CP-SAT workers, with --timed (default: cores, at most 8); a deterministic search runs one, "
                         "and is refused this option, except in solve-cache, which reserves them per Ray task")
    sp.add_argument("--no-progress", action="store_true", help="no progress line even on a terminal")
    sp.add_argument("--interference", metavar="PRESET|F_COMPUTE,F_COMM",
                    help="GPU slowdowns under overlap: h200-step (fitted on H200 training steps), h200-pre-enqueued, "
                         "or two factors. solve breaks the plain model's ties by them; compare adds each order's "
                         "contended makespan and the tie-broken exact order (docs/cost_model.md)")


def _interference(spec: str | None):
    """--interference: a measured preset's name or 'F_COMPUTE,F_COMM'."""
    if spec is None:
        return None
    from overlapsat.cost.interference import H200_NVLINK, H200_STEP, Interference

    presets = {"h200-step": H200_STEP, "h200-pre-enqueued": H200_NVLINK}
    if spec in presets:
        return presets[spec]
    try:
        fc, fn = (float(x) for x in spec.split(","))
    except ValueError:
        raise GraphError(f"--interference {spec!r}: expected {' or '.join(presets)} or two factors "
                         "'F_COMPUTE,F_COMM' such as '1.5,1.3'") from None
    try:
        return Interference(fc, fn)
    except GraphError as e:
        raise GraphError(f"--interference {spec!r}: {e}") from None


def _hold(spec: str | None) -> float | None:
    """--hold: 'h200' or a fraction in [0, 1]."""
    if spec is None:
        return None
    from overlapsat.cost.hold import H200_HOLD, check_hold

    if spec == "h200":
        return H200_HOLD
    try:
        return check_hold(float(spec))
    except (ValueError, GraphError):
        raise GraphError(f"--hold {spec!r}: expected h200 or a fraction in [0, 1] such as 0.7") from None


def cmd_compare(args: argparse.Namespace) -> int:
    import importlib.util

    from overlapsat.compare import compare

    if args.plot and importlib.util.find_spec("matplotlib") is None:  # say so before solving, not after
        raise GraphError("--plot needs matplotlib, which is not installed: pip install 'overlapsat[plot]'")
    if args.plot and not args.plot.lower().endswith((".png", ".svg", ".pdf")):
        raise GraphError(f"--plot {args.plot!r}: the picture's name must end in .png, .svg or .pdf")
    inter = _interference(args.interference)
    hold = _hold(args.hold)
    plans = None
    if args.bucket_layout is not None and not args.plans:
        raise GraphError("--bucket-layout is a choice of plans: give --plans with it")
    if args.plans:
        plans = _plan_model(args, "compare --plans").duration
    tick = _Ticker(not (args.json or args.no_progress))
    g = _priced(_load(args.graph), args)
    others = {f"other graph {os.path.basename(p)}": _priced(_load(p), args) for p in args.other_graph}
    try:
        c = compare(g, **_search(args), memory_budget=args.memory_budget,
                    collective_order=args.collective_order, workers=args.workers, on_progress=tick, on_phase=tick.phase,
                    other_graphs=others, interference=inter, hold=hold, plans=plans, bucket_layout=args.bucket_layout)
    finally:
        tick.done()
    interrupted = bool(c.result.stats.get("interrupted"))
    plan = next((r for r in c.other_rows if r.name == "overlapsat plan"), None)  # with --plans: drawn and traced too
    if args.plot:
        from overlapsat.plot import plot_timeline

        best = c.best_heuristic
        panels: list[tuple[Any, ...]] = [("input order", c.input_row.order),
                                         (f"best heuristic: {best.method}", best.order),
                                         (f"exact ({c.result.status.value})", c.exact.order)]
        if plan is not None:
            panels.append((f"overlapsat plan ({len(plan.buckets)} buckets)", plan.order, plan.sim.graph,
                           plan.buckets))
        plot_timeline(g, panels, args.plot, memory_budget=c.memory_budget)
    if args.trace:
        from overlapsat.trace import export_chrome_trace

        export_chrome_trace(g, c.exact.order, args.trace, name=f"{g.name} (exact)",
                            plans=[(f"{g.name} (overlapsat plan, {len(plan.buckets)} buckets)", plan.sim.graph,
                                    plan.order, plan.buckets)] if plan is not None else [])
    payload = {"graph": g.name, "nodes": len(g), "rows": c.records(), "bound_us": c.bound,
               "exposed_bound_us": c.exposed_bound, "status": c.result.status.value, "memory_budget": c.memory_budget,
               **({"hold": hold} if hold is not None else {})}
    lines = [f"graph {g.name}: {len(g)} nodes, compute {fmt_us(g.compute_total)}, communication {fmt_us(g.comm_total)}",
             "", c.to_markdown()]
    if args.plot:
        lines.append(f"timeline: {args.plot}")
    if args.trace:
        lines.append(f"trace: {args.trace}")
    _emit(args, payload, lines)
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def cmd_solve(args: argparse.Namespace) -> int:
    from overlapsat.solver import optimize

    inter = _interference(args.interference)
    tick = _Ticker(not (args.json or args.no_progress))
    try:
        g = _priced(_load(args.graph), args)  # (--out was checked before any work, by _check_outputs)
        g.fingerprint()  # the file names it: computed within the limit, not after the search's deadline
    except KeyboardInterrupt:
        tick.done()
        print("overlapsat: interrupted while loading the graph: no order was known, nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        r = optimize(g, **_search(args), memory_budget=args.memory_budget,
                     collective_order=args.collective_order, workers=args.workers, on_progress=tick,
                     on_phase=tick.phase, interference=inter)
    except KeyboardInterrupt:  # outside the solver's own guarded searches (their Ctrl-C returns a result)
        tick.done()
        return _interrupted_write(g, args)
    finally:
        tick.done()
    base = r.baseline
    valid_h = [h["exposed"] for h in r.heuristics if h["valid"]]
    best_h = fmt_us(min(valid_h)) if valid_h else "none within the budget"
    payload = {"graph": g.name, "out": args.out, **r.summary()}
    lines = [
        f"graph {g.name}: {len(g)} nodes -> {'standard output' if args.out == '-' else args.out}",
        f"  status {r.status.value} ({r.method}){': ' + r.message if r.message else ''}",
        f"  search ended by: {STOPPED[r.stopped_by]} ({'deterministic' if not args.timed else 'timed'}, "
        f"work {r.stats.get('work_used', 0.0):.2f})",
        f"  makespan {fmt_us(r.makespan)} (input order {fmt_us(base['makespan'])})",
        f"  exposed  {fmt_us(r.exposed)} (input order {fmt_us(base['exposed'])}, best heuristic "
        f"{best_h}, bound {fmt_us(r.exposed_bound)}, "
        f"gap {100 * r.gap:.1f}%)",
        f"  peak memory {fmt_bytes(r.peak_memory)}" + (f" (budget {fmt_bytes(r.memory_budget)})" if r.memory_budget else ""),
        f"  {r.stats.get('total_s', 0):.1f} s",
    ]
    pol = r.stats.get("contention_polish")
    if pol is not None:  # an estimate beside the model's figures, which the tie-break never worsens
        payload["contention_polish"] = pol
        lines.insert(-1, f"  interference tie-break: contended makespan {fmt_us(pol['contended_before_us'])} -> "
                         f"{fmt_us(pol['contended_after_us'])} ({pol['moves']} moves; an estimate, not covered by "
                         "the status or bound)")
    with _sigint_held():  # last: everything above is computed, so a failure leaves no file behind
        r.save(args.out)
    _emit(args, payload, lines)
    return EXIT_INTERRUPTED if r.stats.get("interrupted") else EXIT_OK


def _joint_line(j: dict) -> str:
    """What the joint CP-SAT model of buckets and order did (decision 43), as `overlapsat plan` says it."""
    if "skipped" in j:
        return f"  joint model (CP-SAT, buckets and order): not run ({j['skipped']})"
    if j.get("error"):
        return f"  joint model (CP-SAT, buckets and order): failed ({j['error']}); the search's plan kept"
    scope = ("every legal bucket, so its bound holds over every plan" if j.get("complete")
             else "runs of neighbouring collectives, so no bound from it")
    within = "within the budget" if j.get("under_budget") else "no budget"  # decision 103: complete ones keep it
    return (f"  joint model (CP-SAT, buckets and order, level free, {within}): {j.get('candidates')} candidate "
            f"buckets ({scope}); CP-SAT {str(j.get('solver_status')).lower()}"
            + ("; its plan was shorter and was kept" if j.get("used") else ""))


def cmd_plan(args: argparse.Namespace) -> int:
    from overlapsat.problem import Problem
    from overlapsat.solver.plan_bound import reach_note
    from overlapsat.solver.plan_search import optimize_plan

    model = _plan_model(args, "plan")
    transport = None
    if args.transport is not None:
        from overlapsat.cost.transport import copy_engine

        transport = copy_engine(args.transport)  # a bad table is named before any work
    g = _load(args.graph)
    g.fingerprint()  # the file names it: computed within the limit, not after the search's deadline
    priced = g.reprice(model)
    tick = _Ticker(not (args.json or args.no_progress))
    try:
        pb = Problem.of(priced, args.memory_budget, args.collective_order, args.bucket_cap, args.bucket_layout)
        r = optimize_plan(pb, model.duration, **_search(args), workers=args.workers, on_phase=tick.phase,
                          transport=transport)
    finally:
        tick.done()
    ps, info = r.stats["plan"], r.plan_info
    assert info is not None
    # the bucket lists last: the summary has "buckets" too, as a count
    payload = {"graph": g.name, "out": args.out, **r.summary(), "budget_source": info.budget_source,
               "buckets": [list(b.members) for b in r.buckets],
               "transports": {"copy_engine": list(r.transports)}, "layout": r.layout}
    budget = (f"budget {fmt_bytes(r.memory_budget)}, {info.budget_source}" if r.memory_budget is not None
              else "no budget (--memory-budget none)")
    lines = [
        f"graph {g.name}: {len(g)} nodes, {len(g.coll_seq)} collectives -> "
        f"{'standard output' if args.out == '-' else args.out}",
        f"  plan: {len(r.buckets)} {'coalesced ' if r.layout == 'coalesced' else ''}buckets "
        f"({sum(len(b.members) for b in r.buckets)} collectives merged); "
        + (f"every one of the {info.every_bucketing} legal bucketings ordered" if info.every_bucketing is not None
           else f"{info.scored} bucketings scored, {info.moves_kept} moves kept"),
        *([_joint_line(ps["joint"])] if "joint" in ps else []),
        *([f"  transport: {len(r.transports)} of {info.offered} offered all_gathers "
           f"(group {ps['transport']['group']}) by copy engine, where its price ({transport.source}) is below "
           "NCCL's"] if transport is not None else []),
        *(["  warm starts (best scoring pass on each bucketed graph): "
           + ", ".join(f"{k} {fmt_us(v)}" if math.isfinite(v) else f"{k}: no order found within the budget"
                       for k, v in info.starts.items())] if info.starts else []),
        f"  makespan {fmt_us(r.makespan)}, exposed {fmt_us(r.exposed)}, peak memory "
        f"{fmt_bytes(r.peak_memory)} ({budget})",
        *([f"  no bucket: {info.no_bucket_reason}"] if not r.buckets
          else _bucket_lines(g, [list(b.members) for b in r.buckets])),
        f"  order: status {info.bucketing_status}, bound {fmt_us(info.bucketing_bound_us)} -- for the schedules of "
        "these buckets",
        f"  over every bucketing: status {r.status.value}, " + ("optimal (proven)" if r.proven else
                                                              f"bound {fmt_us(r.bound)}, gap {100 * r.gap:.1f}% "
                                                              "of the makespan")
        + (f", over {info.bound_scope}" if info.bound_scope else "")  # how the budget entered it (decision 109)
        + "".join(f"; {n}" for n in info.bound_notes),
        *([f"  {reach}"] if (reach := reach_note(r.bound, r.makespan, info.relaxation_reach_us, r.memory_budget)) else []),
        (f"  best unbucketed order found {fmt_us(r.unbucketed)}: "
         + (f"bucketing bought {fmt_us(r.bought)}" if r.buckets else
            f"the plan search's order moves bought {fmt_us(r.bought)}" if r.bought > 0 else "the plan is that order"))
        if r.unbucketed < float("inf") else "  no unbucketed order was judged",
    ]
    with _sigint_held():
        r.save(args.out, g)
    _emit(args, payload, lines)
    return EXIT_OK


def cmd_frontier(args: argparse.Namespace) -> int:
    from overlapsat.frontier import plan_frontier

    model = _plan_model(args, "frontier")
    if args.memory_budget is not None:
        raise GraphError("frontier: give the budgets to show with --budgets, not --memory-budget")
    g = _load(args.graph).reprice(model)
    search = _search(args)  # its clock: each budget's plan search gets a share of what is left of the command's limit
    fr = plan_frontier(g, model.duration, budgets=args.budgets, collective_order=args.collective_order,
                       bucket_layout=args.bucket_layout, workers=args.workers, **search)
    if args.plot:
        fr.plot(args.plot)
    _emit(args, {"graph": g.name, "input_peak_bytes": fr.input_peak, "points": fr.records()},
          fr.to_markdown().splitlines() + ([f"picture: {args.plot}"] if args.plot else []))
    return EXIT_OK


@contextmanager
def _sigint_held() -> Iterator[None]:
    """A Ctrl-C while the answer is written waits until it is written (then it ends the command)."""
    import signal

    pressed: list[int] = []
    try:
        old = signal.signal(signal.SIGINT, lambda *_: pressed.append(1))
    except ValueError:  # not the main thread: nothing to hold
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if pressed:
        raise KeyboardInterrupt


def _interrupted_write(g: Any, args: argparse.Namespace) -> int:
    """Ctrl-C between the solver's phases: the input order is the best order known, if it meets the budget."""
    from overlapsat.schedules import save_schedule
    from overlapsat.validate import validate

    with _sigint_held():
        if validate(g, g.input_order, args.memory_budget, collective_order=args.collective_order, limit=1):
            print("overlapsat: interrupted before any order within the budget was known: nothing written",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
        save_schedule(args.out, g, g.input_order, metrics={"status": "interrupted", "method": "input_order"})
    print(f"overlapsat: interrupted: wrote the input order, the best order known then, to {args.out}",
          file=sys.stderr)
    return EXIT_INTERRUPTED


def _corpus(paths: list[str]) -> list[str]:
    """Graph files: a schedule store's recorded graphs (`*.graph.json`), or every `.json`/`.json.gz` of a directory."""
    import glob
    import os

    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            recorded = sorted(glob.glob(os.path.join(p, "*.graph.json")))
            files += recorded or sorted(glob.glob(os.path.join(p, "*.json")) + glob.glob(os.path.join(p, "*.json.gz")))
        elif os.path.exists(p):
            files.append(p)
        else:
            raise GraphError(f"bench: {p!r} is neither a file nor a directory")
    if not files:
        raise GraphError(f"bench: no graph files in {', '.join(paths)}")
    return files


def cmd_bench(args: argparse.Namespace) -> int:
    import csv

    from overlapsat.compare import TIE_BROKEN, compare
    from overlapsat.io import atomic_write_text, load_graph

    inter = _interference(args.interference)
    files = _corpus(args.paths)
    recs: list[dict[str, Any]] = []
    bad: list[dict[str, str]] = []
    show = not args.json and sys.stderr.isatty()
    names: dict[str, int] = {}
    for k, f in enumerate(files):
        if show:
            sys.stderr.write(f"\r[{k + 1}/{len(files)}] {f} ...")
            sys.stderr.flush()
        try:  # one bad file is reported and skipped; the rest are benchmarked
            g = _priced(load_graph(f), args)
        except GraphError as e:
            bad.append({"file": f, "error": str(e)})
            continue
        names[g.name] = names.get(g.name, 0) + 1
        label = g.name if names[g.name] == 1 else f"{g.name} ({g.fingerprint()[:8]})"
        c = compare(g, **_search(args), memory_budget=args.memory_budget,
                    collective_order=args.collective_order, workers=args.workers, interference=inter)
        ex, bh, inp = c.exact, c.best_heuristic, c.input_row
        recs.append({"graph": label, "file": f, "nodes": len(g), "input_makespan_us": inp.makespan,
                     "exact_makespan_us": ex.makespan, "input_exposed_us": inp.exposed,
                     "best_heuristic": bh.method, "heuristic_exposed_us": bh.exposed, "exact_exposed_us": ex.exposed,
                     "exposed_bound_us": c.exposed_bound, "status": c.result.status.value, "gap": c.gap(ex),
                     "reduction_vs_heuristic": 1 - ex.exposed / bh.exposed if bh.exposed > 0 else 0.0,
                     "reduction_vs_input": 1 - ex.exposed / inp.exposed if inp.exposed > 0 else 0.0})
        if c.contended:  # the exact order's contended makespan, and the tie-broken one's (the same when none moved)
            tie = c.contended.get(TIE_BROKEN, c.contended["exact"])
            recs[-1].update(exact_contended_us=c.contended["exact"].makespan, tie_broken_contended_us=tie.makespan)
    if show:
        sys.stderr.write("\r" + " " * 100 + "\r")
    if not recs:
        raise GraphError("bench: no readable graph among " + ", ".join(b["file"] + " (" + b["error"] + ")" for b in bad))

    def total_reduction(key: str) -> float:
        # 1 - (exact exposure summed over graphs) / (the other's, summed); a ratio of sums stays meaningful when
        # a graph's exposure drops to 0, where a geometric mean of per-graph ratios degenerates to 100 %
        other = sum(r[key] for r in recs)
        return 1 - sum(r["exact_exposed_us"] for r in recs) / other if other > 0 else 0.0

    summary = {"graphs": len(recs), "skipped": len(bad),
               "total_reduction_vs_best_heuristic": total_reduction("heuristic_exposed_us"),
               "total_reduction_vs_input_order": total_reduction("input_exposed_us"),
               "solved_to_optimality": sum(r["status"] in ("optimal", "heuristic_optimal") for r in recs),
               "mean_gap": sum(r["gap"] for r in recs) / len(recs)}
    if args.csv:
        import io

        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(recs[0]))
        w.writeheader()
        w.writerows(recs)
        atomic_write_text(args.csv, buf.getvalue())
    lines = ["| graph | nodes | input makespan | exact makespan | input exposed | best heuristic | heuristic exposed | "
             "exact exposed | vs heuristic | status | gap |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |"]
    for r in recs:
        lines.append(f"| {r['graph']} | {r['nodes']} | {fmt_us(r['input_makespan_us'])} | "
                     f"{fmt_us(r['exact_makespan_us'])} | {fmt_us(r['input_exposed_us'])} | {r['best_heuristic']} | "
                     f"{fmt_us(r['heuristic_exposed_us'])} | {fmt_us(r['exact_exposed_us'])} | "
                     f"{100 * r['reduction_vs_heuristic']:.1f}% | {r['status']} | {100 * r['gap']:.1f}% |")
    red_h = 100 * summary["total_reduction_vs_best_heuristic"]
    lines += ["", f"{summary['graphs']} graphs: total exposed communication {red_h:.1f}% "
              f"lower than the best heuristic's and {100 * summary['total_reduction_vs_input_order']:.1f}% lower than "
              f"the input order's (summed over graphs); {summary['solved_to_optimality']} solved to optimality; "
              f"mean gap {100 * summary['mean_gap']:.1f}%"]
    lines += [f"skipped {b['file']}: {b['error']}" for b in bad]
    _emit(args, {"graphs": recs, "skipped": bad, "summary": summary}, lines)
    return EXIT_OK if not bad else EXIT_BAD_INPUT


def cmd_solve_cache(args: argparse.Namespace) -> int:
    from overlapsat.store import solve_store

    search = _search(args)
    opts: dict[str, Any] = {"collective_order": args.collective_order,
                            "interference": _interference(args.interference), "deterministic": search["deterministic"]}
    if search["work_limit"] is not None:
        opts["work_limit"] = search["work_limit"]
    if args.memory_budget is not None:
        opts["memory_budget"] = args.memory_budget
    if args.workers:
        opts["workers"] = args.workers
    if args.plans:
        opts["plans"] = args.plans
    if args.bucket_cap is not None:
        opts["bucket_cap"] = args.bucket_cap
    if args.bucket_layout is not None:
        opts["bucket_layout"] = args.bucket_layout
    show = not args.json and sys.stderr.isatty()
    count = [0]

    def done(o: Any) -> None:
        count[0] += 1
        if show:
            sys.stderr.write(f"\r{count[0]} graph(s) done, last {o.fingerprint[:12]}: {o.outcome}   ")
            sys.stderr.flush()

    outs = solve_store(args.store, time_limit=args.time_limit, jobs=args.jobs, executor=args.executor, on_done=done,
                       **opts)
    if show:
        sys.stderr.write("\r" + " " * 100 + "\r")
    lines = ["| graph | fingerprint | outcome | status | input makespan | makespan | buckets | input exposed | exposed "
             "| seconds |", "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def us(x: float | None) -> str:
        return fmt_us(x) if x is not None else "-"

    for o in outs:
        lines.append(f"| {o.graph or '-'} | {o.fingerprint[:12]} | {o.outcome} | {o.status or '-'} | "
                     f"{us(o.input_makespan_us)} | {us(o.makespan_us)} | {'-' if o.buckets is None else o.buckets} | "
                     f"{us(o.input_exposed_us)} | {us(o.exposed_us)} | {o.seconds:.1f} |")
    errors = [o for o in outs if o.outcome == "error"]
    lines += [f"error {o.fingerprint[:12]}: {o.message}" for o in errors]
    lines += [f"{o.fingerprint[:12]}: {o.message}" for o in outs if o.outcome != "error" and o.message]
    tally = {k: sum(o.outcome == k for o in outs)
             for k in ("solved", "replaced_corrupt", "replaced_over_budget", "kept_captured", "kept_moved",
                       "has_schedule", "locked", "error")}
    lines.append(", ".join(f"{v} {k}" for k, v in tally.items() if v) or "no recorded graphs")
    _emit(args, {"store": args.store, "graphs": [o.as_dict() for o in outs], "summary": tally}, lines)
    return EXIT_BAD_INPUT if errors else EXIT_OK


def cmd_reprice(args: argparse.Namespace) -> int:
    g = _priced(_load(args.graph), args)
    save_graph(g, args.out)
    _emit(args, {"graph": g.name, "out": args.out, "fingerprint": g.fingerprint(), "compute_us": g.compute_total,
                 "comm_us": g.comm_total},
          [f"graph {g.name} priced for {args.profile or 'the calibration profile'} -> {args.out}: "
           f"compute {fmt_us(g.compute_total)}, communication {fmt_us(g.comm_total)}"])
    return EXIT_OK


def cmd_calibrate(args: argparse.Namespace) -> int:
    from overlapsat.cost import build_calibration, load_profile
    from overlapsat.io import read_json

    load_profile(args.profile)  # fails early, naming the profile
    raw: dict[str, Any] = {}
    for key, paths in (("collectives", args.collectives), ("compute", args.compute)):
        merged: dict[str, Any] | None = None
        for path in paths or []:
            d = read_json(path, "measurement")
            rows = "collectives" if key == "collectives" else "kernels"
            if rows not in d:
                raise GraphError(f"measurement file {path!r} has no {rows!r} list (is it from calibrate_{key}.py?)")
            merged = d if merged is None else {**merged, rows: merged[rows] + d[rows]}
        raw[key] = merged
    if not raw["collectives"] and not raw["compute"]:
        raise GraphError("calibrate: give --collectives and/or --compute measurement files")
    cal = build_calibration(args.profile, raw["collectives"], raw["compute"])
    cal.save(args.out)
    payload = {"out": args.out, "profile": args.profile,
               "collective_tables": [f"{op}/{n}" for op, n in cal.collectives], "gemm": cal.gemm is not None,
               "memory": cal.memory is not None}
    _emit(args, payload, [f"calibration for {args.profile} -> {args.out}: "
                          f"{len(cal.collectives)} collective table(s), GEMM table {'yes' if cal.gemm else 'no'}, "
                          f"memory table {'yes' if cal.memory else 'no'}"])
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    from overlapsat import __version__

    p = argparse.ArgumentParser(prog="overlapsat", description=(
        "Find the issue order of kernels, collectives and waits that hides the most communication. "
        "GRAPH is a graph file or a bundled example's name (default: tp_small)."),
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"overlapsat {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    # --debug is also accepted after the command; SUPPRESS keeps the subparser from resetting the top-level value
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks and debug logging")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=argparse.ArgumentParser)
    _sub_add = sub.add_parser

    def sub_parser(name: str, **kw: Any) -> argparse.ArgumentParser:
        return _sub_add(name, parents=[common], epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
                        **kw)

    sub.add_parser = sub_parser  # type: ignore[method-assign]

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.add_argument("graph", nargs="?", metavar="GRAPH",
                        help="graph file, or a bundled example's name (default: tp_small)")
        sp.add_argument("--json", action="store_true", help="machine-readable output")
        sp.set_defaults(fn=fn)
        return sp

    sp = add("inspect", cmd_inspect, "size, kinds, collectives per group, time, memory and lower bound of a graph")
    sp.add_argument("--collective-order", choices=list(COLLECTIVE_ORDERS), default="group",
                    help="the collective-order policy the lower bound assumes (default group)")
    sp = add("simulate", cmd_simulate, "figures and per-collective exposure of one order")
    sp.add_argument("--schedule", help="schedule or plan JSON (default: the graph's input order); a plan needs the "
                                       "--profile or --calibration it was planned with")
    _pricing_args(sp)
    sp.add_argument("--memory-budget", help="bytes ('40GiB') or ratio of the input order's peak ('1.2x')")
    sp.add_argument("--top", type=int, default=10, help="collectives to list (default 10)")
    sp.add_argument("--collective-order", choices=list(COLLECTIVE_ORDERS), default="group",
                    help="the collective-order policy the order is validated against (default group)")
    sp = add("compare", cmd_compare, "input order, every heuristic and the exact solver side by side")
    _solver_args(sp)
    _pricing_args(sp)
    sp.add_argument("--plot", metavar="OUT", help="timeline picture (.png or .svg) of input, best heuristic and exact")
    sp.add_argument("--trace", metavar="OUT", help="Chrome/Perfetto trace JSON of the exact schedule")
    sp.add_argument("--other-graph", action="append", default=[], metavar="GRAPH",
                    help="a row for another graph in its input order, such as torch's bucketed result; shown "
                         "apart from this graph's rows (repeatable)")
    sp.add_argument("--hold", metavar="h200|H",
                    help="add each order's exposure with transfers held back by running GEMMs: h200 (0.70, measured "
                         "on H200 training steps) or a fraction in [0, 1]; an estimate beside the model's figures "
                         "(docs/cost_model.md)")
    sp.add_argument("--plans", action="store_true",
                    help="add plan rows (buckets and order), priced by --profile or --calibration: torch's greedy "
                         "buckets with the best pass, and overlapsat's plan (docs/plan_search.md)")
    sp.add_argument("--bucket-layout", choices=["copy", "coalesced"],
                    help="with --plans: how overlapsat's plan issues each bucket (copy, torch's; default) or "
                         "coalesced (one group call); torch's rows keep torch's copies")
    sp = add("solve", cmd_solve, "solve and write the schedule file")
    _solver_args(sp)
    _pricing_args(sp)
    sp.add_argument("--out", required=True, metavar="SCHEDULE", help="schedule JSON to write")
    sp = add("plan", cmd_plan, "choose buckets and an order together, and write the plan (a schedule file of "
                               "version 2; 3 with copy-engine transports; 4 with coalesced buckets)")
    _solver_args(sp)
    _pricing_args(sp)
    sp.add_argument("--transport", metavar="TABLE", help="let each all_gather move by copy engine where that is "
                    "cheaper: a measured table, h100 or a transport.json (docs/MODEL.md, Transport)")
    sp.add_argument("--bucket-cap", metavar="SIZE", help="the most bytes one bucket may merge, e.g. 25MiB "
                    "(default: no cap)")
    sp.add_argument("--bucket-layout", choices=["copy", "coalesced"], default="copy",
                    help="issue each bucket through one buffer copied in and out (copy, torch's; default) or as "
                         "one group call on the members' own buffers (coalesced; docs/MODEL.md, Buckets)")
    sp.add_argument("--out", required=True, metavar="PLAN", help="plan JSON to write")
    sp = add("frontier", cmd_frontier, "the best plan found at each of a range of memory budgets, with its bound "
                                       "within each: the speed-memory trade-off (docs/plan_search.md)")
    _solver_args(sp)
    _pricing_args(sp)
    sp.add_argument("--budgets", nargs="+", metavar="X", help="budgets to show ('6GiB', '1.2x', 'none'); default: "
                    "the lowest peak found, the input order's peak, torch bucketed's peak, and none")
    sp.add_argument("--bucket-layout", choices=["copy", "coalesced"], default="copy",
                    help="how the plans issue each bucket (as for plan)")
    sp.add_argument("--plot", metavar="FILE", help="also draw makespan and bound against the budget (.png, .svg)")
    sp = sub.add_parser("bench", help="compare over a corpus of graphs, one row per graph plus a summary",
                        description="compare over a corpus of graphs, one row per graph plus a summary")
    sp.add_argument("paths", nargs="+", metavar="DIR_OR_FILES")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.add_argument("--csv", metavar="OUT", help="also write one CSV row per graph")
    _solver_args(sp)
    _pricing_args(sp)
    sp.set_defaults(fn=cmd_bench)
    sp = add("reprice", cmd_reprice, "write the graph priced for another GPU (--profile) or measured tables "
                                     "(--calibration, from `overlapsat calibrate`)")
    _pricing_args(sp)
    sp.add_argument("--out", required=True, metavar="GRAPH", help="graph JSON to write")
    sp = sub.add_parser("solve-cache", help="solve every graph recorded in a schedule store that has no usable schedule",
                        description="solve every graph the torch bridge recorded in STORE that has no usable schedule "
                                    "(missing, corrupt or invalid), in parallel; safe to interrupt, rerun, or run twice "
                                    "at once (docs/torch.md)")
    sp.add_argument("store", metavar="STORE")
    sp.add_argument("--jobs", type=int, default=1, metavar="N", help="graphs solved at once (default 1)")
    sp.add_argument("--executor", choices=["local", "ray"], default="local",
                    help="local processes (default) or a Ray cluster (RAY_ADDRESS, else a local instance; "
                         "pip install 'overlapsat[ray]')")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.add_argument("--plans", metavar="PROFILE", help="write plans (buckets and order, priced by this profile's "
                                                       "cost model, e.g. h200) instead of orders; apply them with "
                                                       "install_fx(..., plans=True) (docs/plan_search.md)")
    sp.add_argument("--bucket-cap", metavar="SIZE", help="with --plans: the most bytes one bucket may merge, "
                                                         "e.g. 25MiB (default: no cap)")
    sp.add_argument("--bucket-layout", choices=["copy", "coalesced"], help="with --plans: how each bucket is "
                    "issued, copy (default) or coalesced (docs/MODEL.md, Buckets)")
    _solver_args(sp)
    sp.set_defaults(fn=cmd_solve_cache)
    sp = sub.add_parser("calibrate", help="build cost-model tables from measurement files",
                        description="build cost-model calibration tables from the JSON files that "
                                    "benchmarks/calibrate_collectives.py and calibrate_compute.py write")
    sp.add_argument("--profile", required=True, help="hardware profile name or file the tables belong to")
    sp.add_argument("--collectives", nargs="*", metavar="JSON", help="collective measurement file(s)")
    sp.add_argument("--compute", nargs="*", metavar="JSON", help="compute measurement file(s)")
    sp.add_argument("--out", required=True, metavar="JSON", help="calibration file to write")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.set_defaults(fn=cmd_calibrate)
    return p


_SIGINTS: list[int] = []  # Ctrl-C presses seen by this command (see `_noting_sigint`)


def _noting_sigint(signum: int, frame: Any) -> None:
    """Python's own Ctrl-C behaviour (KeyboardInterrupt), remembered: an interrupt that lands inside a C
    extension's import surfaces as another exception (ImportError "initialization failed"), which is then
    still reported as the interrupt it was, not as a bug."""
    _SIGINTS.append(signum)
    raise KeyboardInterrupt


def _unraisable(hook: Any) -> Any:
    """`sys.unraisablehook` that drops the KeyboardInterrupt of a noted Ctrl-C: raised where Python cannot
    propagate it (a weakref callback inside an import, a `__del__`), it would print a traceback and vanish, and
    the command would end as if never interrupted. `_main` reports it instead."""

    def hook_(u: Any) -> None:
        if not (_SIGINTS and u.exc_type is KeyboardInterrupt):
            hook(u)

    return hook_


def main(argv: Sequence[str] | None = None, started: float | None = None) -> int:
    """The command line; `started` (a `time.monotonic()`): when the command started, where that was before this
    call (the entry point's imports), for its time limit."""
    import signal

    started = time.monotonic() if started is None else started

    _SIGINTS.clear()
    ours = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the main thread, nobody else's handler
    hook = sys.unraisablehook
    outputs: list[tuple[argparse.Namespace, dict[str, tuple[int, int, int] | None]]] = []
    try:
        if ours:
            signal.signal(signal.SIGINT, _noting_sigint)
            sys.unraisablehook = _unraisable(hook)
        return _main(argv, started, outputs)
    except KeyboardInterrupt:  # outside the command's own handler: building the parser, or reporting an error
        said = _written_since(*outputs[0]) if outputs else "nothing written"
        print(f"overlapsat: interrupted: {said}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if ours:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sys.unraisablehook = hook


SIZE_OPTIONS = ("--memory-budget", "--bucket-cap")


def _sizes_joined(argv: list[str]) -> list[str]:
    """`--memory-budget -5GB` as two words: argparse reads `-5GB` as an option and says "expected one argument";
    joined (`--memory-budget=-5GB`), the budget's own parser says what is wrong with it."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in SIZE_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-") \
                and not argv[i + 1].startswith("--") and len(argv[i + 1]) > 1:
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        if argv[i] == "--":  # what follows is not options
            out.extend(argv[i:])
            break
        out.append(argv[i])
        i += 1
    return out


def _main(argv: Sequence[str] | None, started: float,
          outputs: list[tuple[argparse.Namespace, dict[str, tuple[int, int, int] | None]]]) -> int:
    """The command; `outputs` gets its arguments and output files' state as soon as they are known, so that an
    interrupt `main` catches can say what was written."""
    parser = build_parser()
    args = parser.parse_args(_sizes_joined(sys.argv[1:] if argv is None else list(argv)))
    args.started = started
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(message)s")
    logging.getLogger("overlapsat.progress").setLevel(logging.INFO)  # the periodic lines when stderr is no terminal
    if not getattr(args, "fn", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    if getattr(args, "memory_budget", None) is not None:
        from overlapsat.budget import MemoryBudget, is_none_said

        try:
            args.memory_budget = args.memory_budget if is_none_said(args.memory_budget) else \
                MemoryBudget.parse(args.memory_budget)
        except GraphError as e:
            print(f"overlapsat: error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    before = _output_files(args)
    outputs.append((args, before))
    try:
        _check_outputs(args)
        code = int(args.fn(args))
        if _SIGINTS and code == EXIT_OK:  # a Ctrl-C Python swallowed (`_unraisable`): still an interrupt
            print(f"overlapsat: interrupted: {_written_since(args, before)}", file=sys.stderr)
            return EXIT_INTERRUPTED
        return code
    except GraphError as e:
        if args.debug:
            raise
        from overlapsat.errors import InfeasibleBudgetError, NoValidOrderError

        print(f"overlapsat: error: {e}", file=sys.stderr)
        if isinstance(e, InfeasibleBudgetError):
            return EXIT_INFEASIBLE
        return EXIT_NO_ORDER if isinstance(e, NoValidOrderError) else EXIT_BAD_INPUT
    except KeyboardInterrupt:  # every file is written whole or not at all: say which
        print(f"overlapsat: interrupted: {_written_since(args, before)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as e:  # reading or writing a user's file: the path is theirs, the fix is theirs
        if args.debug:
            raise
        where = f" {e.filename!r}" if e.filename else ""
        print(f"overlapsat: error: cannot access{where}: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # a bug in overlapsat: one line unless --debug
        if _SIGINTS:  # an interrupt that surfaced as another exception
            print(f"overlapsat: interrupted: {_written_since(args, before)}", file=sys.stderr)
            return EXIT_INTERRUPTED
        if args.debug:
            raise
        print(f"overlapsat: internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
