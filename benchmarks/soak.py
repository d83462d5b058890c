"""Soak test of every claim overlapsat makes, against brute force (docs/solver.md, Soundness).

    python benchmarks/soak.py --graphs 10000 --jobs 2 --out soak.json

Each graph comes from tests/brute.py (written from MODEL.md, independent of
the library's generators). Per graph: every lower-bound component is checked
against the brute-force optimum, then `optimize` runs once under a budget
picked by the seed (none, impossible, the least feasible peak, or a random
feasible one). Seeds run in child processes, so an abort is counted, not fatal.
Counted: false bounds, false optimal claims, false infeasibility claims,
results over budget or invalid, results worse than the best heuristic, and aborts.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

FAILURES = ("false_bound", "false_optimal", "false_infeasible", "invalid_result", "worse_than_heuristic",
            "status_gap_mismatch", "crash", "abort")


def check(seed: int, time_limit: float) -> dict:
    """One graph: returns counters (failures, outcomes) and details of any failure."""
    import overlapsat as osat
    from overlapsat.bounds import lower_bound
    from tests.brute import brute_force, random_graph, sim

    g, co = random_graph(seed)
    truth = brute_force(g, co)
    out: dict = {"seed": seed, "nodes": len(g.nodes), "counts": {}, "failures": []}

    def count(k: str, detail: str = "") -> None:
        out["counts"][k] = out["counts"].get(k, 0) + 1
        if k in FAILURES:
            out["failures"].append(f"{k}: {detail}")

    if truth is None:
        count("skipped_too_many_orders")
        return out
    opt_free = truth.best(None)
    for name, v in lower_bound(g).as_dict().items():
        if name != "exposed" and v > opt_free + 1e-9 * max(1.0, opt_free):
            count("false_bound", f"{name} {v} > optimum {opt_free}")
    rng = random.Random(seed)
    peaks = sorted({pk for _, _, pk in truth.orders})
    budget = rng.choice([None, truth.min_peak - 1, truth.min_peak, rng.choice(peaks)])
    if budget is not None and budget < 0:
        budget = None
    best = truth.best(budget)
    try:
        r = osat.optimize(g, time_limit=time_limit, memory_budget=budget, collective_order=co, workers=2)
    except osat.InfeasibleBudgetError:
        count("infeasible_claimed")
        if best is not None:
            count("false_infeasible", f"budget {budget}, optimum {best}")
        return out
    except osat.NoValidOrderError:
        count("no_valid_order_in_time" + ("_feasible" if best is not None else "_infeasible"))
        return out
    except Exception as e:  # noqa: BLE001 - counted, with its message
        count("crash", f"{type(e).__name__}: {e}")
        return out
    ms, pk = sim(g, r.order)
    if best is None or (budget is not None and pk > budget) or osat.validate(g, r.order, budget, collective_order=co):
        count("invalid_result", f"budget {budget}, peak {pk}")
        return out
    if r.bound > best + 1e-9 * max(1.0, best):
        count("false_bound", f"result bound {r.bound} > optimum {best}")
    if r.status.value in ("optimal", "heuristic_optimal") and ms > best + 1e-9 * max(1.0, best):
        count("false_optimal", f"{r.status.value} at {ms}, optimum {best}")
    hv = [h["makespan"] for h in r.heuristics if h["valid"]]
    if hv and ms > min(hv) + 1e-9:
        count("worse_than_heuristic", f"{ms} > {min(hv)}")
    if (r.gap == 0.0) != r.proven or (r.status.value in ("optimal", "heuristic_optimal")) != r.proven:
        count("status_gap_mismatch", f"{r.status.value} gap {r.gap}")
    count("status_" + r.status.value)
    if abs(ms - best) <= 1e-9 * max(1.0, best):
        count("result_is_optimum")
    return out


def run_chunk(seeds: list[int], time_limit: float) -> list[dict]:
    """Run seeds in a child process; on an abort, rerun one by one to find the culprit."""
    cmd = [sys.executable, __file__, "--child", ",".join(map(str, seeds)), "--time-limit", str(time_limit)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode == 0:
        return json.loads(p.stdout.strip().splitlines()[-1])
    if len(seeds) == 1:
        return [{"seed": seeds[0], "counts": {"abort": 1}, "failures": [f"abort: rc {p.returncode}"]}]
    return [r for s in seeds for r in run_chunk([s], time_limit)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", type=int, default=10_000)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--chunk", type=int, default=50)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", default="")
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    if a.child:
        print(json.dumps([check(int(s), a.time_limit) for s in a.child.split(",")]))
        return
    seeds = list(range(a.first, a.first + a.graphs))
    chunks = [seeds[i:i + a.chunk] for i in range(0, len(seeds), a.chunk)]
    t0 = time.time()
    totals: dict[str, int] = {}
    failures: list[str] = []
    with ThreadPoolExecutor(a.jobs) as ex:
        for rs in ex.map(lambda c: run_chunk(c, a.time_limit), chunks):
            for r in rs:
                for k, v in r["counts"].items():
                    totals[k] = totals.get(k, 0) + v
                failures += [f"seed {r['seed']}: {f}" for f in r["failures"]]
    summary = {"date": time.strftime("%Y-%m-%d"), "graphs": a.graphs, "first_seed": a.first,
               "time_limit_s": a.time_limit, "wall_s": round(time.time() - t0, 1),
               "failures_total": sum(totals.get(k, 0) for k in FAILURES),
               "counts": dict(sorted(totals.items())), "failures": failures[:100]}
    text = json.dumps(summary, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
