"""Soak test of every claim overlapsat makes, against brute force (docs/solver.md, Soundness).

    python tests/soak.py --graphs 10000 --jobs 2 --out soak.json

Each graph comes from tests/brute.py (written from MODEL.md, independent of
the library's generators). Per graph: every lower-bound component is checked
against the brute-force optimum, then `optimize` runs once under a budget
picked by the seed (none, impossible, the least feasible peak, or a random
feasible one). Seeds run in child processes, so an abort is counted, not fatal.
Counted: false bounds, false optimal claims, false infeasibility claims,
results over budget or invalid, results worse than the best heuristic, and aborts.
`--interference` solves with the contention tie-break on (the same claims must hold).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.brute import FAILURES, check  # noqa: E402

NO_LISTING = False


def run_chunk(seeds: list[int], time_limit: float, interference: bool = False, edges: bool = False) -> list[dict]:
    """Run seeds in a child process; on an abort, rerun one by one to find the culprit."""
    cmd = [sys.executable, __file__, "--child", ",".join(map(str, seeds)), "--time-limit", str(time_limit)]
    cmd += ["--interference"] if interference else []
    cmd += ["--edges"] if edges else []
    cmd += ["--no-listing"] if NO_LISTING else []
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode == 0:
        return json.loads(p.stdout.strip().splitlines()[-1])
    if len(seeds) == 1:
        return [{"seed": seeds[0], "counts": {"abort": 1}, "failures": [f"abort: rc {p.returncode}"]}]
    return [r for s in seeds for r in run_chunk([s], time_limit, interference, edges)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", type=int, default=10_000)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--chunk", type=int, default=50)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", default="")
    ap.add_argument("--interference", action="store_true", help="solve with the contention tie-break on")
    ap.add_argument("--no-listing", action="store_true", help="without the exhaustive listing of small graphs, so "
                                                              "that CP-SAT's own certificates are what is checked")
    ap.add_argument("--edges", action="store_true", help="graphs at the edges of the input space (tests/brute.py "
                                                         "edge_graph: sizes to 2^50 B, durations 1e-6 to 1e7 us)")
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    global NO_LISTING
    NO_LISTING = a.no_listing
    if a.no_listing:
        import importlib

        opt = importlib.import_module("overlapsat.solver.search")
        opt.EXHAUSTIVE_NODES = opt.EXHAUSTIVE_NODES_NO_ORDER = 0
    if a.child:
        print(json.dumps([check(int(s), a.time_limit, a.interference, a.edges) for s in a.child.split(",")]))
        return
    seeds = list(range(a.first, a.first + a.graphs))
    chunks = [seeds[i:i + a.chunk] for i in range(0, len(seeds), a.chunk)]
    t0 = time.time()
    totals: dict[str, int] = {}
    failures: list[str] = []
    with ThreadPoolExecutor(a.jobs) as ex:
        for rs in ex.map(lambda c: run_chunk(c, a.time_limit, a.interference, a.edges), chunks):
            for r in rs:
                for k, v in r["counts"].items():
                    totals[k] = totals.get(k, 0) + v
                failures += [f"seed {r['seed']}: {f}" for f in r["failures"]]
    summary = {"date": time.strftime("%Y-%m-%d"), "graphs": a.graphs, "first_seed": a.first,
               "interference": a.interference, "edges": a.edges, "listing": not a.no_listing,
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
