"""A prototype, not the library's: the relaxation over every bucketing ordered at level free, plus a cut that knows
bucket-mates at level group (benchmarks/results/bench_energetic_2026-12-03.md).

    python benchmarks/bench_bucket_mate_cut.py [--work 10]

At level group a bucket takes its first member's place in the collective sequence, so a collective b issued before
an earlier one a (b passes a) shares a bucket with some c before a, and c's waits end after b's transfer (the
bucket's members wait together). Each pair (a, b) of one group gets: b passes a => some partner c of b before a
(same key, independent, within the cap, not kept apart) has every wait ending after b's transfer. The whole model
of the relaxation is solved with it (monkeypatched in; no incumbent, a safe horizon: the library's heuristic
orders need not meet the cut) and without it, under the input order's peak and with no budget.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from overlapsat import Graph, Problem, SolveParams, load_graph, optimize
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.graph import COLLECTIVE
from overlapsat.plan import bucketable_by_key
from overlapsat.solver import cpsat as cpsat_module
from overlapsat.solver import model as model_module
from overlapsat.solver.memory_bound import Apart, _collective_sets, kept_apart
from overlapsat.solver.plan_bound import analytical_over_bucketings

EXAMPLES = ("tp_small", "fsdp_small", "ddp_small", "moe_small", "fsdp_medium", "tp_large")
_CUT: dict[str, Any] = {}  # while a cut is on (`cut_on`): the bucket cap and the budget its partners are read under


def partners(g: Graph, cap: int | None, apart: Apart | None) -> dict[int, set[int]]:
    """Per collective b, the collectives that may share a bucket with it: same key, neither reaching the other,
    not kept apart by the budget, their bytes together within the cap (a superset of its bucket-mates in any plan).
    Reachability is the overlap bound's table of the collectives after each node (`_collective_sets`)."""
    after = _collective_sets(g)[0]  # per node, bit i: the i-th collective (in id order) follows it
    bit = {c: i for i, c in enumerate(v for v in range(len(g.nodes)) if g.kind[v] == COLLECTIVE)}
    out: dict[int, set[int]] = {}
    for cs in bucketable_by_key(g).values():
        for b in cs:
            for c in cs:
                if c == b or after[c] >> bit[b] & 1 or after[b] >> bit[c] & 1:
                    continue
                if apart is not None and apart.shut and apart.pair(b, c):
                    continue
                if cap is not None and g.nodes[b].nbytes + g.nodes[c].nbytes > cap:
                    continue
                out.setdefault(b, set()).add(c)
    return out


def add_bucket_mate_cut(md: Any) -> None:
    """The cut on a whole model `md`: for each pair (a, b) of a group, a before b in its sequence, either b is
    issued after a, or some partner c of b before a has every wait ending after b's transfer. The partners are read
    off the model's own graph: a search solves the canonical form (decision 58), whose node ids are not the
    caller's. z (per b, growing along the sequence): b shares a bucket with some partner seen so far."""
    g, m = md.g, md.m
    mates = partners(g, _CUT["cap"], kept_apart(g, _CUT["budget"]) if _CUT["budget"] is not None else None)
    for cs in g.group_colls:
        for j, b in enumerate(cs):
            z = None  # before cs[0]: no partner yet (false)
            for i in range(j):
                if i:
                    c, terms = cs[i - 1], [z] if z is not None else []
                    if c in mates.get(b, ()):
                        y = m.new_bool_var("")
                        m.add_hint(y, False)
                        for w in g.waits_of[c]:
                            m.add(md.wait_end[w] >= md.comm_start[b] + md.comm_len[b]).only_enforce_if(y)
                        terms.append(y)
                    if terms:
                        z = m.new_bool_var("")
                        m.add_bool_or(terms).only_enforce_if(z)
                        m.add_hint(z, False)
                if z is None:
                    m.add(md.issue[b] >= md.issue[cs[i]] + 1)
                else:  # b passes cs[i] => z
                    m.add(md.issue[b] >= md.issue[cs[i]] + 1).only_enforce_if(~z)


@contextmanager
def cut_on(cap: int | None, budget: int | None) -> Iterator[None]:
    """Within it, every whole model `optimize` builds carries the cut, and is solved with no incumbent and a safe
    horizon (the library's heuristic orders need not meet the cut, so their makespan is no horizon for it)."""
    streams, whole = model_module.Model.add_collective_streams, cpsat_module.solve_whole

    def with_cut(md: Any) -> None:
        streams(md)
        if md.whole:
            add_bucket_mate_cut(md)

    def without_incumbent(problem: Any, ts: Any, params: Any, tb: Any, incumbent: Any, *a: Any, **k: Any) -> Any:
        return whole(problem, ts, params, tb, None, *a, **k)

    _CUT.update(cap=cap, budget=budget)
    model_module.Model.add_collective_streams = with_cut
    cpsat_module.solve_whole = without_incumbent
    try:
        yield
    finally:
        model_module.Model.add_collective_streams, cpsat_module.solve_whole = streams, whole
        _CUT.clear()


def run(name: str, work: float, use_budget: bool, cut: bool) -> None:
    """One row: the relaxation of a bundled example solved with or without the cut."""
    price = cost_model("h200")
    g = load_graph(bundled(name)).reprice(price)
    pb = Problem.of(g).with_default_budget()
    budget = pb.budget if use_budget else None
    rg = analytical_over_bucketings(pb if use_budget else Problem.of(g), price.duration)[0]
    t = time.monotonic()
    params = SolveParams(time_limit=900, work_limit=work, collective_order="free")
    if cut:
        with cut_on(pb.bucket_cap, budget):
            r = optimize(Problem(rg, budget, "free"), params)
    else:
        r = optimize(Problem(rg, budget, "free"), params)
    ph = r.stats.phases
    print(f"| {name} | {'input order' if use_budget else 'none'} | {'yes' if cut else 'no'} | {r.bound:,.1f} | "
          f"{ph.get('solver_status', '-')} | {ph.get('deterministic_s') or 0:.2f} | {time.monotonic() - t:.1f} |",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=float, default=10.0)
    a = ap.parse_args()
    print(f"{a.work:g} reference seconds of work per solve, deterministic, h200 prices.\n")
    print("| example | budget | cut | bound (us) | CP-SAT status | det s | wall s |\n"
          "| --- | --- | --- | ---: | --- | ---: | ---: |")
    for name in EXAMPLES:
        for use_budget in (True, False):
            for cut in (False, True):
                run(name, a.work, use_budget, cut)


if __name__ == "__main__":
    main()
