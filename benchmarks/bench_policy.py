"""What each collective-order level gains, on the capture corpus (docs/solver.md, Collective order).

    python benchmarks/bench_policy.py [--work 6] [--graphs llama8_bwd ...]

Per graph and level (chain, global, group, free): the best valid Inductor
pass under that level, the solver's exposed communication and the proven
bound on it, at the same deterministic work (so the figures do not depend on
load). Levels are nested, so a freer level can only gain; the gain is the
solver's exposed time against the "group" level's.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os

from overlapsat import GraphError, load_graph, optimize
from overlapsat.solver import SolveParams

HERE = os.path.dirname(os.path.abspath(__file__))
LEVELS = ("chain", "global", "group", "free")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=float, default=6.0)
    ap.add_argument("--graphs", nargs="*")
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    print("| graph | nodes | " + " | ".join(f"{lv}: pass / solver / bound" for lv in LEVELS) + " |")
    print("| --- | ---: | " + " | ".join("---" for _ in LEVELS) + " |")
    for p in sorted(glob.glob(os.path.join(HERE, "corpus", "*.json.gz"))):
        name = os.path.basename(p).split(".")[0]
        if a.graphs and name not in a.graphs:
            continue
        g = load_graph(p)
        if not g.coll_seq:
            continue
        cells = []
        for level in LEVELS:
            try:
                r = optimize(g, SolveParams(time_limit=600, work_limit=a.work, collective_order=level))
            except GraphError as e:
                cells.append(f"unsatisfiable ({str(e)[:40]})")
                continue
            valid = [h["exposed"] for h in r.heuristics if h["valid"] and h["name"] != "input_order"]
            # proven: bound and value agree to float noise (meets), so one figure is shown for both
            bound = r.exposed if r.proven else r.exposed_bound
            cells.append(f"{min(valid) if valid else float('nan'):.1f} / {r.exposed:.1f} / {bound:.1f}")
        print(f"| {name} | {len(g)} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
