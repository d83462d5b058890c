"""What re-placing collectives within the budget (heuristics/prefetch.py, decision 72) gives the portfolio, on the
FX corpus's backward graphs under torch bucketed's peak.

    python benchmarks/bench_prefetch.py [--out benchmarks/results/bench_prefetch_DATE.md]

Per graph: torch's reorder-only order (recorded in the corpus file), the best valid order of the portfolio
without the pass and with it (`run_all`, no work limit: every pass runs to completion), the best of `optimize` at
10 s (deterministic), and the bound of the unbucketed graph. Makespans in ms.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import logging
import os
import time

from overlapsat import Problem, graph_from_dict, optimize, simulate
from overlapsat.heuristics import portfolio

HERE = os.path.dirname(os.path.abspath(__file__))


def _best(rows) -> tuple[float, str]:
    h = min((h for h in rows if h.valid), key=lambda h: (h.makespan, h.name))
    return h.makespan / 1e3, h.name


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    lines = [f"budget: torch bucketed's peak (recorded), level free, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}",
             "", "| graph | nodes | torch reorder-only | portfolio without the pass | portfolio with it "
             "| best row | optimize 10 s | its bound | stopped by |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |"]
    print("\n".join(lines), flush=True)
    for path in sorted(glob.glob(os.path.join(HERE, "fx_corpus", "*_bwd.json.gz"))):
        d = json.load(gzip.open(path))
        g = graph_from_dict(d["graph"])
        p = Problem.of(g, int(d["bucketed"]["peak_memory"]), "free")
        torch_ms = simulate(p.relaxed, d["overlap_scheduler"]).makespan / 1e3
        keep = portfolio._prefetched
        portfolio._prefetched = lambda *args, **kw: []  # the portfolio as it was before decision 72
        try:
            without, _ = _best(portfolio.run_all(p))
        finally:
            portfolio._prefetched = keep
        with_, name = _best(portfolio.run_all(p))
        r = optimize(p, time_limit=10)
        row = (f"| {os.path.basename(path).removesuffix('.json.gz')} | {len(g.nodes):,} | {torch_ms:.2f} | "
               f"{without:.2f} | {with_:.2f} | {name} | {r.makespan / 1e3:.2f} | {r.bound / 1e3:.2f} | {r.stopped_by} |")
        lines.append(row)
        print(row, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
