"""Plans against torch's peers on the FX corpus, all scored by overlapsat's simulator (calibrated H200 pricing).

    python benchmarks/bench_plan.py [--time-limit 30] [--level free] [--budget torch] [--parts S] [--corpus DIR]
                                    [NAME ...]

Per graph (benchmarks/fx_corpus, or the folder `--corpus` names, such as the held-out graphs of
benchmarks/fx_heldout; the level given):
  - torch reorder-only: torch's OverlapScheduler order of the unbucketed graph (stored in the corpus file);
  - torch bucketed: torch's OverlapScheduler with bucketing on, a graph of its own (its figure in the file);
  - torch pre-bucketed: torch's FSDP pre-bucketing, then its OverlapScheduler without bucketing (likewise);
  - torch's pre-buckets, overlapsat order: those pre-buckets as a plan of this graph, ordered by `optimize`;
  - torch overlap-preserving buckets of overlapsat's order: torch's OverlapPreservingBucketer run on
    overlapsat's order (`optimize`, 30 s, free; recorded in the file), ordered by `optimize`;
  - overlapsat order: `optimize` on the unbucketed graph, given torch reorder-only's order as a candidate (as the
    torch bridge records it beside a captured graph);
  - torch's buckets, overlapsat's order: torch's bucketed scheduler's buckets (recorded in the corpus file)
    as a plan of this graph, ordered by `optimize` (the same time limit);
  - TBB, overlapsat order: transformer-block bucketing (per block, its parameters' gathers in one bucket and
    their gradients' reduce-scatters in another; `make_fx_corpus.block_buckets`), ordered by `optimize`;
  - overlapsat plan: `optimize_plan` (buckets by local search from torch's greedy bucketer and every peer's
    buckets above, then `optimize`; never longer than the overlapsat order or the four rows ordered by
    overlapsat, which it is given as `unbucketed` and `solved`, or than torch reorder-only's order, given as
    `extra_orders`, where that is valid);
  - the bound over every bucketing (MODEL.md "Bounds over every bucketing") and the plan's gap to it.

A second table gives each row's peak memory (GiB, MODEL.md's rule; torch bucketed: the figure its corpus file
records) and its contended makespan (`simulate_contended` with the H200 step preset, an estimate the bound does
not cover; torch bucketed: not recorded). `--budget R` solves every overlapsat row under R times the input
order's peak and marks a peer above it; "plan vs best peer" and the geomean count only the peers valid at the
level and within the budget.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import math
import os
import time

from overlapsat import Problem, evaluate, optimize
from overlapsat.cost.interference import H200_STEP, simulate_contended
from overlapsat.cost.model import cost_model
from overlapsat.io import graph_from_dict
from overlapsat.plan import bucket_problems, materialize
from overlapsat.solver.plan_search import as_buckets, optimize_plan

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--corpus", default=os.path.join(HERE, "fx_corpus"),
                    help="the folder of corpus files (make_fx_corpus.py's output)")
    ap.add_argument("--level", default="free")
    ap.add_argument("--budget", default=None,
                    help="a ratio of the input order's peak memory (1.0), 'torch' (each graph's torch bucketed peak, "
                         "as its corpus file records it), or none (the default: no budget, said as 'none')")
    ap.add_argument("--parts", type=float, default=None, metavar="S",
                    help="after each graph, where its plan's time goes against the bound: each group's transfer "
                         "time in the plan and in the relaxation over every bucketing, and the relaxation ordered "
                         "under the budget by `optimize` for S seconds (what a lift could prove at most)")
    ap.add_argument("--fill-share", type=float, default=None,
                    help="the fill moves' share of each solve's work (SolveParams.fill_share; 0: none; default: the "
                         "library's)")
    a = ap.parse_args()
    price = cost_model("h200").duration
    limit = {"time_limit": a.time_limit} | ({} if a.fill_share is None else {"fill_share": a.fill_share})
    print(f"Time limit {a.time_limit:g} s per solve, level {a.level!r}, deterministic, makespans in ms"
          + ("" if a.fill_share is None else f", fill_share {a.fill_share:g}")
          + (", budget: torch bucketed's peak (recorded)" if a.budget == "torch" else
             f", budget {float(a.budget):g} x the input order's peak" if a.budget is not None else ", no budget")
          + ".\n")
    extra: list[str] = []  # the second table's rows
    print("| graph | nodes | torch reorder-only | torch bucketed | torch pre-bucketed | "
          "torch's buckets, overlapsat order | torch's pre-buckets, overlapsat order | "
          "torch overlap-preserving buckets of overlapsat's order, overlapsat order | "
          "TBB, overlapsat order | overlapsat order | overlapsat plan (buckets) | plan vs best peer | "
          "bound over bucketings | plan gap | plan s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ratios, parts = [], []
    for path in sorted(glob.glob(os.path.join(a.corpus, "*.json.gz"))):
        name = os.path.basename(path).removesuffix(".json.gz")
        if a.names and name not in a.names:
            continue
        d = json.load(gzip.open(path))
        g = graph_from_dict(d["graph"])
        budget = ("none" if a.budget is None else int(d["bucketed"]["peak_memory"]) if a.budget == "torch"
                  else f"{float(a.budget)!r}x")
        p = Problem.of(g, budget, a.level)
        reorder = evaluate(p.on(p.relaxed), "torch", g.order_indices(d["overlap_scheduler"]))
        torch_bucketed = d["bucketed"]["makespan_us"]
        torch_pre = (d.get("prebucketed") or {}).get("makespan_us", math.inf)
        # torch's OverlapScheduler order is a candidate, as the torch bridge records it beside each graph
        torch_order = {"torch OverlapScheduler": d["overlap_scheduler"]}
        order = _or_none(optimize, p, **limit, extra_orders=torch_order)
        peers = peer_rows(d, p, price, limit)
        t = time.monotonic()
        plan = _or_none(optimize_plan, p, price, **limit,
                        starts={k: v[0] for k, v in peers.items() if v[0]}, unbucketed=order, extra_orders=torch_order,
                        solved={k: (v[0], v[2]) for k, v in peers.items() if v[2] is not None})
        dt = time.monotonic() - t
        if plan is None or order is None:  # nothing within this budget was found (no claim that none exists)
            print(f"| {name} | {len(g.nodes):,} | no {'plan' if plan is None else 'order'} within the budget "
                  f"({p.budget:,} B) was found |" + " |" * 13, flush=True)
            continue
        # the best peer valid here: at the level, and under the budget where one is given (torch's own graphs:
        # by the peak their corpus file records)
        within = [reorder.makespan if reorder.valid else math.inf]
        for fig, rec in ((torch_bucketed, d["bucketed"]), (torch_pre, d.get("prebucketed") or {})):
            peak = rec.get("peak_memory")
            within.append(fig if p.budget is None or peak is None or peak <= p.budget else math.inf)
        best_torch = min(within + [v[2].makespan for v in peers.values() if v[2] is not None])
        if math.isfinite(best_torch):
            ratios.append(plan.makespan / best_torch)
        versus = f"{100 * (plan.makespan / best_torch - 1):+.1f} %" if math.isfinite(best_torch) else "- (none within)"
        cells = [_cell(p, p.relaxed, reorder.order, reorder.peak_memory),
                 _figure(d["bucketed"].get("peak_memory"), None, p.budget),
                 _figure((d.get("prebucketed") or {}).get("peak_memory"), None, p.budget)]
        cells += [_cell(p, r.graph, r.order, r.peak_memory) if r is not None else "- | -" for _, _, r in peers.values()]
        cells += [_cell(p, order.graph, order.order, order.peak_memory),
                  _cell(p, plan.bucketed, plan.order, plan.peak_memory)]
        extra.append(f"| {name} | " + " | ".join(cells) + " |")
        print(f"| {name} | {len(g.nodes):,} | {reorder.makespan / 1e3:.2f}{'' if reorder.valid else ' (invalid)'} | "
              f"{torch_bucketed / 1e3:.2f} | {torch_pre / 1e3:.2f} | "
              + " | ".join(f"{r.makespan / 1e3:.2f} ({len(lg)}/{len(rc)})" if r is not None else "-"
                           for lg, rc, r in peers.values())
              + f" | {order.makespan / 1e3:.2f} | {plan.makespan / 1e3:.2f} "
              f"({len(plan.buckets)}) | {versus} | {plan.bound / 1e3:.2f} | "
              f"{100 * plan.gap:.1f} % | {dt:.0f} |", flush=True)
        if a.parts is not None:
            parts.append(_parts(name, p, price, plan, a.parts))
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"\nGeomean, plan against the best peer (torch's three, and the four bucketings under overlapsat's "
              f"order; a peer above the budget does not count): {100 * (geo - 1):+.2f} % over {len(ratios)} graphs")
    if extra:
        cols = ("torch reorder-only", "torch bucketed", "torch pre-bucketed", "torch's buckets, overlapsat order",
                "torch's pre-buckets, overlapsat order", "torch overlap-preserving, overlapsat order",
                "TBB, overlapsat order", "overlapsat order", "overlapsat plan")
        print("\nPeak memory (GiB; * above the budget) and contended makespan (ms, H200 step preset, an estimate):\n")
        print("| graph | " + " | ".join(f"{c} peak | {c} contended" for c in cols) + " |")
        print("| --- |" + " ---: |" * (2 * len(cols)))
        print("\n".join(extra))
    if parts:
        print("\nWhere the plan's time goes against the bound (ms; --parts):\n\n" + "\n\n".join(parts))


def _parts(name: str, p: Problem, price, plan, seconds: float) -> str:
    """One graph's lines for --parts: per process group, the plan's transfer time (its bucketed graph) and where
    its stream idles between its first start and its last end, beside the relaxation's transfer time; and the
    relaxation ordered under the budget: its best order is the most any bound read from it could prove."""
    from overlapsat.simulate import simulate
    from overlapsat.solver.params import SolveParams
    from overlapsat.solver.plan_bound import analytical_over_bucketings

    sim = simulate(plan.bucketed, plan.order)
    rg = analytical_over_bucketings(p, price)[0]  # the relaxation the plan's bound is read from
    lines = [f"{name}: plan {plan.makespan / 1e3:.2f}, bound {plan.bound / 1e3:.2f}, compute "
             f"{plan.bucketed.compute_total / 1e3:.2f}"]
    for gi, (cs, rcs) in enumerate(zip(plan.bucketed.group_colls, rg.group_colls)):
        cs = sorted(cs, key=lambda c: sim.start[c])
        busy = sum(plan.bucketed.dur[c] for c in cs)
        idle = sim.end[cs[-1]] - sim.start[cs[0]] - busy
        lines.append(f"- group {gi} ({plan.bucketed.groups[gi]}): {len(cs)} transfers in the plan, busy "
                     f"{busy / 1e3:.2f}, idle between its first and last {idle / 1e3:.2f}; {len(rcs)} in the "
                     f"relaxation, busy {sum(rg.dur[c] for c in rcs) / 1e3:.2f}")
    try:
        r = optimize(Problem(rg, p.budget, "free"), SolveParams(time_limit=seconds, collective_order="free"))
        lines.append(f"- the relaxation under the budget, {seconds:g} s: best order {r.makespan / 1e3:.2f}, proven "
                     f"bound {r.bound / 1e3:.2f}")
    except Exception as e:  # noqa: BLE001 - the parts stand without it
        lines.append(f"- the relaxation under the budget: {type(e).__name__}")
    return "\n".join(lines)


def peer_rows(d: dict, p: Problem, price, limit: dict) -> dict[str, tuple[list, list, object]]:
    """Each peer bucketing a corpus file records, on `p`: (its legal buckets, every bucket as recorded, `optimize`
    of the legal ones under `limit`, None where there are none or nothing within the budget was found)."""
    peers = {}
    for key, buckets in (("torch OverlapScheduler buckets", (d["bucketed"] or {}).get("buckets", [])),
                         ("torch FSDP pre-bucketing", (d.get("prebucketed") or {}).get("buckets", [])),
                         ("torch overlap-preserving on overlapsat's order",
                          (d.get("overlap_preserving") or {}).get("buckets", [])),
                         ("TBB", d.get("tbb", []))):
        recorded = list(as_buckets(p.relaxed, buckets))  # members in the group's input order
        legal = [b for b in recorded if not bucket_problems(p.relaxed, [b])]
        res = _or_none(optimize, p.on(materialize(p.relaxed, legal, price)), **limit) if legal else None
        peers[key] = (legal, recorded, res)
    return peers


def _or_none(solve, *args, **kwargs):
    """A solve's result, or None where it found nothing within the budget (GraphError: said, not a crash)."""
    from overlapsat.errors import GraphError

    try:
        return solve(*args, **kwargs)
    except GraphError as e:
        print(f"<!-- {type(e).__name__}: {str(e)[:160]} -->", flush=True)
        return None


def _figure(peak: int | None, contended: float | None, budget: int | None) -> str:
    over = "*" if peak is not None and budget is not None and peak > budget else ""
    pk = f"{peak / 2**30:.2f}{over}" if peak is not None else "-"
    return f"{pk} | " + (f"{contended / 1e3:.2f}" if contended is not None else "-")


def _cell(p: Problem, graph, order, peak: int) -> str:
    """A row's peak (as its result has it) and the contended makespan of its `order` on `graph` (a bucketed
    graph for the plan and the peers)."""
    return _figure(peak, simulate_contended(graph, order, H200_STEP).makespan, p.budget)


def _rows_of(raws: list[str]) -> dict[str, list[str]]:
    """Each graph's row over several raw files; a graph in two of them is an error (which run would it be?)."""
    rows: dict[str, list[str]] = {}
    for raw in raws:
        for cells in _graph_rows(raw):
            if cells[0] in rows:
                raise ValueError(f"{cells[0]} is in more than one of {raws}")
            rows[cells[0]] = cells
    return rows


def _graph_rows(raw: str) -> list[list[str]]:
    """The cells of each graph's row of the first table of a raw file of this benchmark (one with a plan)."""
    rows = []
    for line in open(raw, encoding="utf-8"):
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 15 and cells[11].endswith("%") and cells[0] != "graph":
            rows.append(cells)
    return rows


def verdict(raw: str) -> str:
    """The page's sentence on a raw file of this benchmark: where the plan is ahead of, level with and behind the
    best peer, and its gap to the bound over every bucketing."""
    # the gap from the makespans, not from its rounded cell: 5.02 % shows as "5.0 %" and is not within 5 %
    rows = [(cells[0], float(cells[11].split()[0]), 100 * (1 - _ms(cells[12]) / _ms(cells[10])))
            for cells in _graph_rows(raw)]
    ahead = sorted(v for _, v, _ in rows if v < 0)
    behind = [(v, n) for n, v, _ in rows if v > 0]
    level = sum(v == 0 for _, v, _ in rows)
    gaps = sorted((gap, n) for n, _, gap in rows)
    out = (f"The plan is ahead of the best peer on {len(ahead)} of {len(rows)} graphs (by {-ahead[-1]:.1f} to "
           f"{-ahead[0]:.1f} %), level on {level}")
    out += "".join(f", {v:.1f} % behind on {n}" for v, n in sorted(behind, reverse=True))
    small = sum(gap <= 5.0 for gap, _ in gaps)
    most = gaps[-1][0]
    shown = f"{most:.2f}" if f"{most:.1f}" == "5.0" else f"{most:.1f}"  # two decimals where one hides the side
    return (out + f"; its gap to the bound over every bucketing is at most 5 % on {small} of {len(rows)} graphs, "
            f"and {shown} % at most ({gaps[-1][1]}).")


def _ms(cell: str) -> float:
    """A makespan cell of a raw file, inf where there is none or it is invalid."""
    return math.inf if cell == "-" or "invalid" in cell else float(cell.split()[0])


def _against_bucketed_and_tbb(raw: str, column: int) -> tuple[float, float, float]:
    """A column of each graph's row against the better of torch bucketed and TBB: geomean, least and most, in %."""
    ratios = [_ms(cells[column]) / min(_ms(cells[3]), _ms(cells[8])) for cells in _graph_rows(raw)]
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    return 100 * (geo - 1), 100 * (min(ratios) - 1), 100 * (max(ratios) - 1)


def versus_bucketed_and_tbb(raw: str) -> str:
    """The page's sentence on the issue's own measure: the plan against the better of torch bucketed and TBB
    (in overlapsat's order) on each graph of a raw file, as a geomean and a range."""
    geo, lo, hi = _against_bucketed_and_tbb(raw, 10)
    return (f"Against the better of torch bucketed and TBB alone, the issue's own measure, the geomean is "
            f"{geo:+.2f} % (per graph {lo:+.2f} to {hi:+.2f} %).")


def verdict_table(raw: str) -> list[str]:
    """The page's verdict table of a raw file of this benchmark: the issue's peers (torch reorder-only, torch
    bucketed, TBB in overlapsat's order), overlapsat's order and plan, the plan against the best peer, the bound
    over every bucketing and the plan's gap to it."""
    keep = (0, 1, 2, 3, 8, 9, 10, 11, 12, 13)
    out = ["| graph | nodes | torch reorder-only | torch bucketed | TBB, overlapsat order | overlapsat order | "
           "overlapsat plan (buckets) | plan vs best peer | bound over bucketings | plan gap |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    return out + ["| " + " | ".join(cells[k] for k in keep) + " |" for cells in _graph_rows(raw)]


def at_the_bound(raw: str) -> str:
    """The page's sentence on how far the issue's own measure could go: a plan at the bound over every bucketing
    on each graph of a raw file, against the better of torch bucketed and TBB, as a geomean and a range."""
    geo, lo, hi = _against_bucketed_and_tbb(raw, 12)
    return (f"A plan at the bound over every bucketing on each graph would be {geo:+.2f} % (geomean) "
            f"against the better of torch bucketed and TBB (per graph {lo:+.2f} to {hi:+.2f} %).")


def by_time_limit(short: str | list[str], long: str | list[str],
                  labels: tuple[str, str] = ("10 s", "60 s")) -> list[str]:
    """The page's table of raw files of this benchmark at two time limits (each limit's graphs in one file or
    several, a graph in at most one of them): per graph, the plan, its gap to the bound over every bucketing and
    its ratio to the better of torch bucketed and TBB, at each."""
    def peer(cells: list[str]) -> float:
        return min(_ms(cells[3]), _ms(cells[8]))

    a, b = (_rows_of([raws] if isinstance(raws, str) else raws) for raws in (short, long))
    s, t = labels
    out = [f"| graph | plan, {s} | gap, {s} | vs torch bucketed or TBB, {s} | plan, {t} | gap, {t} | "
           f"vs torch bucketed or TBB, {t} |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in sorted(a.keys() & b.keys()):
        x, y = a[name], b[name]
        out.append(f"| {name} | {x[10]} | {x[13]} | {100 * (_ms(x[10]) / peer(x) - 1):+.2f} % | {y[10]} | {y[13]} | "
                   f"{100 * (_ms(y[10]) / peer(y) - 1):+.2f} % |")
    return out


if __name__ == "__main__":
    main()
