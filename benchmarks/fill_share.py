"""The fill moves' share of the work (decision 99): `optimize` on each FX corpus graph under torch bucketed's peak,
at two values of `fill_share`, deterministic.

    python benchmarks/fill_share.py [--shares 0.4,0.8] [--time-limit 10]

Per graph and share: the order's makespan (ms), the seconds it took (CUT: the clock, not the work, ended it), and
the fill's sweeps and kept moves.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import time

from overlapsat import Problem, graph_from_dict, optimize

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shares", default="0.4,0.8")
    ap.add_argument("--time-limit", type=float, default=10.0)
    a = ap.parse_args()
    shares = [float(x) for x in a.shares.split(",")]
    print(f"Time limit {a.time_limit:g} s, level 'free', deterministic, budget: torch bucketed's peak (recorded); "
          "makespan in ms (seconds taken; fill sweeps / moves kept).\n")
    print("| graph | nodes | " + " | ".join(f"fill_share {s:g}" for s in shares) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in shares) + " |")
    for path in sorted(glob.glob(os.path.join(HERE, "fx_corpus", "*.json.gz"))):
        d = json.load(gzip.open(path))
        g = graph_from_dict(d["graph"])
        p = Problem.of(g, int(d["bucketed"]["peak_memory"]), "free")
        cells = []
        for s in shares:
            t = time.monotonic()
            r = optimize(p, time_limit=a.time_limit, fill_share=s,
                         extra_orders={"torch OverlapScheduler": d["overlap_scheduler"]})
            f = r.stats.get("fill") or {}
            cells.append(f"{r.makespan / 1000:.2f} ({time.monotonic() - t:.0f} s{' CUT' if r.cut_by_wall_clock else ''}"
                         f"; {f.get('sweeps', 0)} / {f.get('moves_kept', 0)})")
        print(f"| {os.path.basename(path).removesuffix('.json.gz')} | {len(g.nodes):,} | " + " | ".join(cells) + " |",
              flush=True)


if __name__ == "__main__":
    main()
