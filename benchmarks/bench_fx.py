"""overlapsat against torch's FX OverlapScheduler on the FX corpus (docs/fx.md).

    python benchmarks/bench_fx.py [FILES ...] [--limits 10 60] [--level free]

For each graph written by `benchmarks/fx_corpus/make_fx_corpus.py`: the input
order, the peer's order (OverlapScheduler, bucketing off, overlapsat's
durations), and overlapsat at each time limit, all under the peer's memory
rule (input peak plus the larger of 1 GiB and 5 %), at the collective-order
level given (the peer reorders collectives within a group, so `free` is its
own freedom; `group` is what is safe when a rank may fall back alone).
Exposed communication in ms, the proven bound, and the peak of each order;
and what bucketing adds (OverlapScheduler with bucketing on: fewer, larger
collectives, so another graph, priced the same way).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import logging
import os
import time

from overlapsat import graph_from_dict, optimize, simulate, validate
from overlapsat.fmt import fmt_bytes
from overlapsat.torch.fx_peer import peer_budget

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fx_corpus")


def bucket_cell(b: dict | None) -> str:
    if not b:
        return "-"
    return f"{b['exposed_us'] / 1e3:.2f} ({b['collectives']} collectives, peak {fmt_bytes(b['peak_memory'])})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--limits", type=float, nargs="+", default=[10.0, 60.0])
    ap.add_argument("--level", default="free")
    ap.add_argument("--launch-us", type=float, default=None, help="price every collective's launch (decisions.md 17)")
    ap.add_argument("--wait-us", type=float, default=0.0, help="with --launch-us: every wait's own time")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    files = a.files or sorted(glob.glob(os.path.join(HERE, "*.json.gz")))
    cols = " | ".join(f"overlapsat {t:g} s" for t in a.limits)
    print(f"| graph | nodes | collectives | level | input | peer | {cols} | bound | peak input / peer / overlapsat | "
          f"import s | peer bucketed (another graph) |")
    print("| --- | ---: | ---: | --- | ---: | ---: | " + " | ".join("---:" for _ in a.limits) + " | ---: | --- | ---: | --- |")
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            d = json.load(f)
        t0 = time.monotonic()
        g = graph_from_dict(d["graph"])
        t_load = time.monotonic() - t0
        if a.launch_us is not None:
            g = g.with_stream_costs(a.launch_us, a.wait_us)
        base = simulate(g)
        budget = peer_budget(g, base.peak_memory)
        peer = d.get("overlap_scheduler")
        extra = {"overlap_scheduler": peer} if peer else {}
        ms = lambda us: f"{us / 1e3:.2f}"  # noqa: E731
        if peer:
            ps = simulate(g, peer)
            ok = not validate(g, peer, budget, collective_order=a.level, limit=1)
            peer_cell = ms(ps.exposed) + ("" if ok else " (invalid here)")
            peer_peak = fmt_bytes(ps.peak_memory)
        else:
            peer_cell, peer_peak = "-", "-"
        cells, bound, last = [], 0.0, None
        for t in a.limits:
            r = optimize(g, time_limit=t, memory_budget=budget, collective_order=a.level, extra_orders=extra)
            cells.append(ms(r.exposed) + ("" if not r.cut_by_wall_clock else " (clock)"))
            bound, last = max(bound, r.exposed_bound), r
        c = g.counts()
        print(f"| {g.name} | {c['nodes']} | {c['collective']} | {a.level} | {ms(base.exposed)} | {peer_cell} | "
              f"{' | '.join(cells)} | {ms(bound)} | {fmt_bytes(base.peak_memory)} / {peer_peak} / "
              f"{fmt_bytes(last.peak_memory) if last else '-'} | {d.get('seconds', {}).get('import', t_load):.2f} | "
              f"{bucket_cell(d.get('bucketed'))} |", flush=True)


if __name__ == "__main__":
    main()
