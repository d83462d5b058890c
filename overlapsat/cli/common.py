"""What the commands share: loading a graph and its prices, output files written whole or not at all, the search's
options and clock, the progress line, and Ctrl-C held while a file is written."""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.fmt import fmt_bytes, fmt_us

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


TEXT_OUTPUTS = ("out", "trace", "csv")  # the outputs that may go to standard output ('-')


def _emit(args: argparse.Namespace, payload: dict[str, Any], lines: list[str]) -> None:
    """The command's report: on stdout, or on stderr when an output file goes to stdout (`-`)."""
    if args.json:
        print(json.dumps(payload, indent=1, default=str))
    elif any(getattr(args, opt, None) == "-" for opt in TEXT_OUTPUTS):
        print("\n".join(lines), file=sys.stderr)
    else:
        print("\n".join(lines))


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
    out = []
    for k, members in enumerate(buckets):
        nds = [g.node(m) for m in members]
        total = sum(int(nd.nbytes or 0) for nd in nds)
        out.append(f"  bucket {k}: {nds[0].op} on group {nds[0].group}, {len(nds)} collectives, "
                   f"{fmt_bytes(total)}: {', '.join(members)}")
    return out


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


def _search(args: argparse.Namespace, workers_in_any_mode: bool = False) -> dict[str, Any]:
    """--time-limit, --work and --timed as optimize's options, with the command's clock: the limit counts from
    the command's start, loading included (decision 57), while the work budget, and so a deterministic answer,
    follows the limit as given. `workers_in_any_mode`: --workers means something without --timed too (solve-cache
    reserves that many CPUs per Ray task); elsewhere it is refused there (decision 116)."""
    if args.timed and args.work is not None:
        raise GraphError("--work sets a deterministic budget; --timed stops on the clock: give one of them")
    if getattr(args, "workers", None) is not None and not args.timed and not workers_in_any_mode:
        # said, not ignored
        raise GraphError("--workers sets CP-SAT's workers under --timed; a deterministic search runs one (the same "
                         "answer on any machine): add --timed, or leave --workers out")
    from overlapsat.solver.params import TimeBudget

    clock = TimeBudget.left_of(args.time_limit, time.monotonic() - getattr(args, "started", time.monotonic()))
    return {"time_limit": args.time_limit, "work_limit": args.work, "deterministic": not args.timed, "clock": clock}


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


_SIGINTS: list[int] = []  # Ctrl-C presses seen by this command (see `_noting_sigint`)


def _noting_sigint(signum: int, frame: Any) -> None:
    """Python's own Ctrl-C behaviour (KeyboardInterrupt), remembered: an interrupt that lands inside a C
    extension's import surfaces as another exception (ImportError "initialization failed"), which is then
    still reported as the interrupt it was, not as a bug."""
    _SIGINTS.append(signum)
    raise KeyboardInterrupt


