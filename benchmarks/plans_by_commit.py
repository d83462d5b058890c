"""Deterministic plans of this commit on the bundled examples and the capture corpus, against an earlier run's.

    python benchmarks/plans_by_commit.py --out NEW.jsonl [--against OLD.jsonl] [--budget none|unset]

Each plan: `optimize_plan(Problem.of(g, "none", "group"), cost_model("h200").duration, time_limit=600,
work_limit=1.0, max_evaluations=15)` (no budget; `--budget unset` for a commit before decision 63),
deterministic, so two commits that search alike give the same plan on any machine (none of these runs is cut
by the clock on a 2-core machine). A line per graph: its makespan, buckets and a hash of the order.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import time

from overlapsat import Problem, load_graph, optimize_plan
from overlapsat.cost import cost_model
from overlapsat.examples import bundled

EXAMPLES = ("tp_small", "fsdp_small", "fsdp_medium", "ddp_small", "moe_small")


def _graphs():
    import glob
    import gzip
    import os

    from overlapsat import graph_from_dict

    for name in EXAMPLES:
        yield name, load_graph(bundled(name))
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "corpus", "*.json.gz"))):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            yield os.path.basename(path)[:-8], graph_from_dict(json.load(f)["graph"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--against", default=None, help="an earlier run's jsonl")
    ap.add_argument("--side", default=None, help="the key of the earlier run's lines to compare with, if nested")
    ap.add_argument("--budget", default="none", help="'none' (no budget), or 'unset' for commits before decision "
                                                     "63, where leaving it out meant none")
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    price = cost_model("h200").duration
    old = {}
    if a.against:
        with open(a.against) as f:
            for line in f:
                rec = json.loads(line)
                rec = rec[a.side] if a.side else rec
                old[rec["graph"]] = rec
    rows = []
    with open(a.out, "w") as out:
        for name, g in _graphs():
            t = time.monotonic()
            budget = None if a.budget == "unset" else a.budget
            r = optimize_plan(Problem.of(g, budget, "group"), price, time_limit=600, work_limit=1.0, max_evaluations=15)
            rec = {"graph": name, "makespan": r.makespan, "buckets": [list(b.members) for b in r.buckets],
                   "order_hash": hashlib.sha256("\n".join(r.names).encode()).hexdigest()[:12],
                   "cut": r.cut_by_wall_clock, "s": round(time.monotonic() - t, 1)}
            out.write(json.dumps(rec) + "\n")
            o = old.get(name)
            same = o is not None and (o["buckets"], o["order_hash"]) == (rec["buckets"], rec["order_hash"])
            rows.append(f"| {name} | {o['makespan']:.3f} | {len(o['buckets'])} | " if o else f"| {name} | - | - | ")
            rows[-1] += f"{rec['makespan']:.3f} | {len(rec['buckets'])} | {'yes' if same else '**no**'} |"
            print(rows[-1], flush=True)


if __name__ == "__main__":
    main()
