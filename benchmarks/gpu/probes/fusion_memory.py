"""Does Inductor's fusion keep the peak overlapsat's FX-level order was solved for? A CPU check (run 33).

    python benchmarks/gpu/probes/fusion_memory.py [--layers 2 --dim 512 ...]

Run 33 (benchmarks/results/gpu_runs.md) measured 5.41 GB where the FX-level model of its budgeted `free` order
predicted 5.17 GB. One candidate: Inductor fuses pointwise nodes after the FX pass has ordered the graph, and
with `pin="compute"` nothing stops a fusion from moving a node, and so a free, across the order. This script
compiles the same re-gather step (`e2e_step.build`, smaller) on the CPU with the fake process group, solves
it at `free` (with and without a budget), applies the orders, and imports Inductor's nodes after fusion
(`_post_fusion_custom_pass`, `overlapsat.torch.importer.import_snodes`): their peak in the order Inductor
will emit, against the FX-level prediction of the applied order. The scheduler-level import frees a
collective's input at the collective (Inductor's own accounting, decisions.md 18), which can only lower its
peak, so a scheduler-level peak above the FX-level one is the fusion's (or the lowering's) doing.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def run(a: argparse.Namespace) -> list[dict]:
    import torch
    import torch._inductor.config as icfg
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from benchmarks.gpu.e2e_step import after_fusion, build
    from overlapsat import load_graph, simulate
    from overlapsat.store import solve_store, usable_schedule
    from overlapsat.torch.fx_apply import install_fx

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ind_fusion_")
    icfg.force_disable_caches = True
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=a.world)
    torch.manual_seed(0)
    model = build(a.dim, a.heads, a.ffn, a.layers, a.seq, a.world, "cpu", torch.float32, 1, True)
    x = torch.randn(1, a.seq, a.dim)
    rows = []
    for label, budget in (("d", None), ("d_mem 1.3", 1.3)):
        store = tempfile.mkdtemp(prefix="osat_fusion_")
        cap: list[tuple[int, int]] = []
        torch._dynamo.reset()
        install_fx("capture", store, collective_order="free")
        icfg._post_fusion_custom_pass = functools.partial(after_fusion, sink=cap)
        torch.compile(model)(x).sum().backward()
        icfg._post_fusion_custom_pass = None
        # a work limit the wall clock never ends first on this machine: the same orders on every run
        outs = solve_store(store, time_limit=a.solve_s * 20, work_limit=a.solve_s * 0.6, collective_order="free",
                           memory_budget=budget)
        fx = {}
        for f in sorted(glob.glob(os.path.join(store, "*.graph.json"))):
            g = load_graph(f)
            order, why = usable_schedule(store, os.path.basename(f)[: -len(".graph.json")], g, "free")
            if order is None:
                raise SystemExit(f"{label}: no usable schedule for {f} ({why})")
            fx[len(g)] = (simulate(g, None).peak_memory, simulate(g, order).peak_memory, len(g.coll_seq))
        cap_colls = dict(cap)
        for pin in ("compute", "all"):  # the same solved orders, applied with either pinning
            sched: list[tuple[int, int]] = []
            torch._dynamo.reset()
            install_fx("apply", store, collective_order="free", pin=pin)
            icfg._post_fusion_custom_pass = functools.partial(after_fusion, sink=sched)
            torch.compile(model)(x).sum().backward()
            icfg._post_fusion_custom_pass = None
            by_colls = dict(sched)
            for nodes, (captured, solved, colls) in sorted(fx.items()):
                rows.append({"case": f"{label}, pin {pin}", "budget": budget, "pin": pin, "fx_nodes": nodes,
                             "collectives": colls, "fx_captured_peak": captured, "fx_solved_peak": solved,
                             "after_fusion_peak": by_colls.get(colls),
                             "captured_after_fusion_peak": cap_colls.get(colls),
                             "solve": [o.as_dict().get("status") for o in outs]})
    dist.destroy_process_group()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=1376)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--solve-s", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = run(a)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print("| case | graph (FX nodes, collectives) | captured order: FX model / after fusion | solved order: FX model "
          "/ after fusion | budget (1.3 x captured, FX) |")
    print("| --- | --- | --- | --- | ---: |")

    def pair(fx: int, af: int | None) -> str:
        return f"{fx / 1e6:.2f} / " + ("-" if af is None else f"{af / 1e6:.2f} MB ({100 * (af / fx - 1):+.1f} %)")

    for r in rows:
        bud = f"{1.3 * r['fx_captured_peak'] / 1e6:.2f} MB" if r["budget"] else "-"
        print(f"| {r['case']} | {r['fx_nodes']}, {r['collectives']} | "
              f"{pair(r['fx_captured_peak'], r['captured_after_fusion_peak'])} | "
              f"{pair(r['fx_solved_peak'], r['after_fusion_peak'])} | {bud} |")


if __name__ == "__main__":
    main()
