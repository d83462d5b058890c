"""Soak of the plan claims at the edges of the input space, against brute force over every plan.

    python tests/plan_soak.py --graphs 600 --jobs 2 --out benchmarks/results/plan_soak_edges_DATE.json

Per seed, a small graph of gathers of one key (every legal bucketing is listed by `few_bucketings`, which
shares no code with the library's listing), with, by seed: an atomic pair of kernels next to a gather, so that a
bucket's place falls beside it; sizes scaled by up to 2^50 B; every level; both layouts, with a group call's
time per member on half of the coalesced seeds; the copy-engine table of H100s on some copy seeds; and a budget
of none, the exact least peak of one random bucketed graph, the least peak over every plan, or one byte below it.
`optimize_plan` (in a child process, so that an abort is counted) must then: return a valid plan within the
budget and level, no shorter than the best plan brute force finds; report a bound no higher than that best; be
optimal only where it equals it; raise InfeasibleBudgetError only where no plan fits; and raise nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

LEVELS = ("chain", "global", "group", "free")


def edge_plan_graph(seed: int):
    """Gathers of one key (2-3), each fed by a kernel and read by one, sizes scaled up to 2^50 B, an atomic pair
    of kernels beside one gather on some seeds, a dependency between two gathers on others."""
    from overlapsat import Buffer, Graph, Node, NodeKind

    C, K, W = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT
    rnd = random.Random(seed)
    scale = 2 ** rnd.choice([0, 0, 10, 30, 40, 50 - 10])  # buffers up to ~2^50 B
    k = rnd.choice([2, 3])
    nodes, bufs, edges, atomic = [], [], [], []
    for i in range(k):
        nodes += [Node(f"p{i}", C, rnd.choice([1.0, 4.0, 10.0])),
                  Node(f"ag{i}", K, 1.0, group="dp", op="all_gather", nbytes=rnd.choice([1000, 8000]) * scale // 1024
                       or 1, group_size=2, launch=rnd.choice([0.0, 0.0, 1.5]))]
        bufs += [Buffer(f"x{i}", f"p{i}", (f"ag{i}",), rnd.choice([10, 100]) * scale, rnd.choice([10, 100]) * scale)]
    for i in range(k):
        nodes += [Node(f"w{i}", W, rnd.choice([0.0, 0.0, 0.5]), collective=f"ag{i}"),
                  Node(f"m{i}", C, rnd.choice([2.0, 8.0, 20.0]))]
        bufs += [Buffer(f"y{i}", f"ag{i}", (f"w{i}", f"m{i}"), 400 * scale, 400 * scale)]
    if rnd.random() < 0.5:  # the first gather's wait and a kernel as an atomic pair
        order = [nd.name for nd in nodes]
        at = order.index("w0") + 1
        nodes[at:at] = [Node("a0", C, 1.0)]
        atomic.append(("w0", "a0"))
        if k == 3 and rnd.random() < 0.7:  # the last gather reads the first's output: a bucket of the other two
            by = {nd.name: nd for nd in nodes}  # must follow w0, and must not land between w0 and a0
            order = [nd.name for nd in nodes if nd.name not in ("p2", "ag2")]
            at = order.index("a0") + 1
            order[at:at] = ["p2", "ag2"]
            nodes = [by[nm] for nm in order]
            bufs = [replace(b, consumers=(*b.consumers, "ag2")) if b.name == "y0" else b for b in bufs]
        return Graph(tuple(nodes), tuple(bufs), tuple(edges), tuple(atomic), name=f"plan_edges{seed}")
    if rnd.random() < 0.3 and k > 1:  # gather 1 depends on gather 0's reader
        order = [nd.name for nd in nodes]
        order.remove("p1"), order.remove("ag1")
        at = order.index("m0") + 1
        order[at:at] = ["p1", "ag1"]
        by = {nd.name: nd for nd in nodes}
        nodes = [by[nm] for nm in order]
        edges.append(("m0", "p1"))
    return Graph(tuple(nodes), tuple(bufs), tuple(edges), tuple(atomic), name=f"plan_edges{seed}")


def check(seed: int, time_limit: float) -> dict:
    """One seed's claims against brute force: its counts and failures. Logging is off while it runs and as found
    after (the suite calls it in its workers: left off, it silenced every later test's caplog)."""
    import logging

    was = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        return _check(seed, time_limit)
    finally:
        logging.disable(was)


def _check(seed: int, time_limit: float) -> dict:
    from overlapsat import Problem, optimize_plan
    from overlapsat.errors import GraphError, InfeasibleBudgetError, NoValidOrderError
    from overlapsat.graph import Graph, NodeKind
    from overlapsat.plan import laid_out, materialize
    from overlapsat.validate import validate
    from tests.brute import brute_force
    from tests.helpers import WithGroupMember
    from tests.test_plan import _PRICES, few_bucketings

    rnd = random.Random(seed)
    g0 = edge_plan_graph(seed)
    level = LEVELS[seed % 4]
    layout = ("copy", "coalesced")[(seed // 4) % 2]
    base = _PRICES[seed % len(_PRICES)](rnd.choice([0.5, 5.0, 50.0]))
    price = WithGroupMember(base, rnd.choice([0.5, 5.0])) if layout == "coalesced" and rnd.random() < 0.5 else base
    transport = "h100" if layout == "copy" and rnd.random() < 0.25 else None
    g = Graph(tuple(replace(nd, duration=base(nd)) if nd.kind is NodeKind.COLLECTIVE else nd for nd in g0.nodes),
              g0.buffers, g0.edges, g0.atomic_groups, g0.name)
    pricing = price
    judged_graph = g
    if transport is not None:  # the plan is searched, bounded and proven on the copy-engine prices
        from overlapsat.cost.transport import copy_engine

        table = copy_engine(transport)
        group = table.group_of(g)
        judged_graph, pricing = table.repriced(g, group), table.pricing(price, group)
    pb = Problem.of(judged_graph, "none", level, None, layout)
    rg = pb.relaxed
    plans = []  # (buckets, truth) for every plan brute force can list
    for bs in few_bucketings(rg):
        try:
            h = materialize(rg, list(bs), laid_out(pricing, layout))
        except GraphError:  # no valid place (a cycle, an atomic group between): not a plan
            continue
        truth = brute_force(h, level)
        if truth is not None and truth.orders:
            plans.append((bs, truth))
    counts: Counter = Counter()
    failures: list[str] = []
    if not plans:
        counts["skipped"] += 1
        return {"seed": seed, "counts": dict(counts), "failures": failures}
    least = min(t.min_peak for _, t in plans)
    pick = rnd.choice(["none", "bucketed", "least", "below"])
    budget = {"none": None, "bucketed": rnd.choice(plans)[1].min_peak, "least": least, "below": least - 1}[pick]
    said = "none" if budget is None else budget  # no budget, said (not given, a plan gets the input peak)
    best = [t.best(budget) for _, t in plans]
    best_any = min((b for b in best if b is not None), default=None)
    counts[f"budget_{pick}"] += 1
    try:
        r = optimize_plan(Problem.of(g, said, level, None, layout), price, time_limit=time_limit,
                          transport=transport)
    except InfeasibleBudgetError:
        counts["infeasible_claims"] += 1
        if best_any is not None:
            failures.append(f"false infeasible: a plan of {best_any} us fits {budget} B")
        return {"seed": seed, "counts": dict(counts), "failures": failures}
    except NoValidOrderError:
        counts["no_plan_found"] += 1  # not a claim; counted
        return {"seed": seed, "counts": dict(counts), "failures": failures}
    except Exception as e:  # noqa: BLE001 - every other exception is a failure
        failures.append(f"exception {type(e).__name__}: {e}")
        return {"seed": seed, "counts": dict(counts), "failures": failures}
    counts["plans"] += 1
    ix = r.bucketed.index
    if validate(r.bucketed, [ix[n] for n in r.names], budget, collective_order=level):
        failures.append("invalid plan (order, level or budget)")
    if best_any is None:
        failures.append(f"returned a plan ({r.makespan} us) though brute force finds none under {budget} B")
        return {"seed": seed, "counts": dict(counts), "failures": failures}
    if r.makespan < best_any - 1e-9 * max(1.0, best_any):
        failures.append(f"makespan {r.makespan} below the best plan {best_any} (a figure mismatch)")
    if r.bound > best_any * (1 + 1e-9) + 1e-9:
        failures.append(f"bound {r.bound} above the best plan {best_any} under the budget")
    if r.proven:
        counts["optimal_claims"] += 1
        if abs(r.makespan - best_any) > 1e-9 * max(1.0, best_any):
            failures.append(f"false optimal: {r.makespan} us, best plan {best_any} us")
    return {"seed": seed, "counts": dict(counts), "failures": failures}


def run_chunk(seeds: list[int], time_limit: float) -> list[dict]:
    cmd = [sys.executable, __file__, "--child", ",".join(map(str, seeds)), "--time-limit", str(time_limit)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode == 0:
        return json.loads(p.stdout.strip().splitlines()[-1])
    if len(seeds) == 1:
        return [{"seed": seeds[0], "counts": {"abort": 1}, "failures": [f"abort: rc {p.returncode}"]}]
    return [r for s in seeds for r in run_chunk([s], time_limit)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", type=int, default=600)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--chunk", type=int, default=25)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", default="")
    a = ap.parse_args()
    if a.child:
        print(json.dumps([check(int(s), a.time_limit) for s in a.child.split(",")]))
        return
    seeds = list(range(a.first, a.first + a.graphs))
    chunks = [seeds[i:i + a.chunk] for i in range(0, len(seeds), a.chunk)]
    t0 = time.monotonic()
    with ThreadPoolExecutor(a.jobs) as ex:
        results = [r for part in ex.map(lambda c: run_chunk(c, a.time_limit), chunks) for r in part]
    total: Counter = Counter()
    for r in results:
        total.update(r["counts"])
    failures = [{"seed": r["seed"], "failures": r["failures"]} for r in results if r["failures"]]
    out = {"date": time.strftime("%Y-%m-%d"), "graphs": a.graphs, "first": a.first, "time_limit": a.time_limit,
           "seconds": round(time.monotonic() - t0, 1), "counts": dict(sorted(total.items())),
           "false_claims_or_exceptions": sum(len(f["failures"]) for f in failures), "failures": failures}
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
