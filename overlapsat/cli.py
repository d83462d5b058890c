"""The `overlapsat` command line. Errors become one line and a non-zero exit."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from overlapsat.errors import GraphError

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERNAL = 0, 2, 3, 4


def _load(path: str | None) -> Any:
    from overlapsat.examples import bundled
    from overlapsat.io import load_graph

    return load_graph(path or bundled())


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def fmt_us(t: float) -> str:
    return f"{t / 1000:.3f} ms" if abs(t) >= 1000 else f"{t:.1f} us"


def _emit(args: argparse.Namespace, payload: dict[str, Any], lines: list[str]) -> None:
    if args.json:
        print(json.dumps(payload, indent=1, default=str))
    else:
        print("\n".join(lines))


def cmd_inspect(args: argparse.Namespace) -> int:
    from overlapsat.bounds import lower_bound
    from overlapsat.simulate import simulate

    g = _load(args.graph)
    r = simulate(g)
    lb = lower_bound(g)
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
        f"  lower bound: makespan {fmt_us(lb.makespan)}, exposed {fmt_us(lb.exposed)}",
    ]
    _emit(args, payload, lines)
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from overlapsat.io import load_schedule
    from overlapsat.simulate import simulate
    from overlapsat.validate import validate

    g = _load(args.graph)
    order = load_schedule(args.schedule, g).order if args.schedule else g.input_order
    vs = validate(g, order, args.memory_budget)
    r = simulate(g, order)
    expo = r.collective_exposure()
    payload = {"graph": g.name, "makespan_us": r.makespan, "exposed_us": r.exposed, "peak_memory": r.peak_memory,
               "valid": not vs, "violations": [str(v) for v in vs], "collective_exposure_us": expo}
    lines = [
        f"graph {g.name}: {'schedule ' + args.schedule if args.schedule else 'input order'}",
        f"  makespan {fmt_us(r.makespan)}, exposed {fmt_us(r.exposed)} ({100 * r.exposed_fraction:.1f}%), "
        f"peak memory {fmt_bytes(r.peak_memory)}, {'valid' if not vs else f'INVALID ({len(vs)} violations)'}",
        *(f"  ! {v}" for v in vs[:10]),
        "  exposure per collective:",
        *(f"    {name:40s} {fmt_us(t)}" for name, t in sorted(expo.items(), key=lambda kv: -kv[1])[: args.top]),
    ]
    _emit(args, payload, lines)
    return EXIT_OK if not vs else EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="overlapsat", description=(
        "Find the issue order of kernels, collectives and waits that hides the most communication. "
        "GRAPH defaults to the bundled example."))
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.add_argument("graph", nargs="?", metavar="GRAPH", help="graph JSON (default: bundled example)")
        sp.add_argument("--json", action="store_true", help="machine-readable output")
        sp.set_defaults(fn=fn)
        return sp

    add("inspect", cmd_inspect, "size, kinds, collectives per group, time, memory and lower bound of a graph")
    sp = add("simulate", cmd_simulate, "figures and per-collective exposure of one order")
    sp.add_argument("--schedule", help="schedule JSON (default: the graph's input order)")
    sp.add_argument("--memory-budget", help="bytes ('40GiB') or ratio of the input order's peak ('1.2x')")
    sp.add_argument("--top", type=int, default=10, help="collectives to list (default 10)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(message)s")
    if not getattr(args, "fn", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    if getattr(args, "memory_budget", None) is not None:
        from overlapsat.budget import MemoryBudget

        try:
            args.memory_budget = MemoryBudget.parse(args.memory_budget)
        except GraphError as e:
            print(f"overlapsat: error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        return int(args.fn(args))
    except GraphError as e:
        if args.debug:
            raise
        from overlapsat.errors import InfeasibleBudgetError

        print(f"overlapsat: error: {e}", file=sys.stderr)
        return EXIT_INFEASIBLE if isinstance(e, InfeasibleBudgetError) else EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("overlapsat: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug in overlapsat: one line unless --debug
        if args.debug:
            raise
        print(f"overlapsat: internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
