"""The `overlapsat` command line: its parser, and `main`, which turns errors into one line and a non-zero exit
(the commands: `commands.py`; what they share: `common.py`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from overlapsat.cli.commands import (
    cmd_bench,
    cmd_calibrate,
    cmd_compare,
    cmd_frontier,
    cmd_inspect,
    cmd_plan,
    cmd_reprice,
    cmd_simulate,
    cmd_solve,
    cmd_solve_cache,
)
from overlapsat.cli.common import (
    _SIGINTS,
    EXIT_BAD_INPUT,
    EXIT_CODES,
    EXIT_INFEASIBLE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NO_ORDER,
    EXIT_OK,
    TEXT_OUTPUTS,
    _noting_sigint,
)
from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE_ORDERS


def _pricing_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--profile", metavar="GPU", help="price the graph for this hardware profile (a built-in name such as "
                                                    "h100_sxm, or a profile file) instead of its own durations")
    sp.add_argument("--calibration", metavar="JSON", help="correct the profile's model with the tables of "
                                                          "`overlapsat calibrate` (their profile is used if none given)")


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


def _unraisable(hook: Any) -> Any:
    """`sys.unraisablehook` that drops the KeyboardInterrupt of a noted Ctrl-C: raised where Python cannot
    propagate it (a weakref callback inside an import, a `__del__`), it would print a traceback and vanish, and
    the command would end as if never interrupted. `_main` reports it instead."""

    def hook_(u: Any) -> None:
        if not (_SIGINTS and u.exc_type is KeyboardInterrupt):
            hook(u)

    return hook_


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
