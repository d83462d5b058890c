"""The commands, one function each: they read `args` (built by `overlapsat.cli.build_parser`) and return an exit
code; bad input raises GraphError, which the command line turns into one line."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

from overlapsat.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    STOPPED,
    _bucket_lines,
    _corpus,
    _emit,
    _hold,
    _interference,
    _interrupted_write,
    _joint_line,
    _load,
    _plan_graph,
    _plan_model,
    _priced,
    _search,
    _sigint_held,
    _Ticker,
)
from overlapsat.errors import GraphError
from overlapsat.fmt import bound_line, fmt_bytes, fmt_us
from overlapsat.io import save_graph


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

    search = _search(args, workers_in_any_mode=True)
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
