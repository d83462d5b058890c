"""What a plan's predicted peak is made of (issue "plans within the memory a user has", item "memory the model can
be trusted on"): at the step where each stored plan's bucketed graph peaks (MODEL.md's rule), its live bytes by
kind.

    python benchmarks/gpu/probes/peak_split.py [RUN_FOLDER ...]

Kinds: the buckets' own buffers (torch's merge: the gathered buffer from the copy-in, the concatenated inputs, a
reduce-scatter's input copy), collectives' outputs (unbucketed ones, and members' outputs after a copy-out),
outputs of FLOP-less ops (which Inductor inlines into their readers: never allocated; probes/inline_probe.py),
the graph's freeable inputs (saved activations in a backward), its outputs (saved activations in a forward), and
every other buffer (kernels' outputs).
Default: the 4-GPU runs of 2026-11-28.
"""

from __future__ import annotations

import os
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUNS = [os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-28", r)
        for r in ("eqshape_w4", "eqshape_w4_regather", "eqshape_w4_tp2")]
KINDS = ("bucket buffers", "collective outputs", "FLOP-less outputs", "freeable inputs", "graph outputs", "other")


def split(folder: str) -> list[dict]:
    """Per stored schedule with buckets in `folder`'s store (configuration, graph): its peak and the live bytes
    at the peak step by kind."""
    import overlapsat as o
    from overlapsat.plan import laid_out, materialize
    from overlapsat.schedules import unpriced
    from overlapsat.simulate import memory_curve

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(os.path.join(folder, "second", "store.tar.gz")) as t:
            t.extractall(tmp, filter="data")
        for cfg in sorted(os.listdir(os.path.join(tmp, "store"))):
            d = os.path.join(tmp, "store", cfg)
            for name in sorted(f for f in os.listdir(d) if f.endswith(".schedule.json")):
                g = o.load_graph(os.path.join(d, name.replace(".schedule.json", ".graph.json")))
                s = o.load_schedule(os.path.join(d, name), g)
                if not s.plan.buckets:
                    continue
                h = materialize(g.relaxed("free"), s.plan.buckets, laid_out(unpriced, s.layout))
                ids = h.order_indices(list(s.order))
                post_alloc, _ = memory_curve(h, ids)
                at = max(range(len(ids)), key=post_alloc.__getitem__)
                pos = {v: k for k, v in enumerate(ids)}
                free_ops = {nd.name for nd in g.nodes if nd.duration == 0.0}
                bucket_nodes = {n for b in s.plan.buckets for n in b.nodes}
                by = dict.fromkeys(KINDS, 0)
                for j, prod in enumerate(h.b_prod):
                    if prod < 0 and not h.b_fin[j]:
                        continue  # parameters: left out of the peak
                    made = pos[prod] if prod >= 0 else -1
                    cons = h.b_cons[j]
                    last = max((pos[c] for c in cons), default=made if prod >= 0 else 0)
                    if made > at or (not h.b_out[j] and last < at):
                        continue  # not live at the peak step
                    kind = _kind(h, j, bucket_nodes, free_ops)
                    by[kind] += h.b_alloc[j] if prod >= 0 else h.b_free[j]
                rows.append({"run": os.path.basename(folder), "config": cfg, "graph": name.split(".")[0][:8],
                             "nodes": len(ids), "buckets": len(s.plan.buckets), "peak": int(post_alloc[at]),
                             **by})
    return rows


def _kind(h, j: int, bucket_nodes: set[str], free_ops: set[str]) -> str:
    """Which of KINDS buffer j of the bucketed graph `h` is."""
    from overlapsat.graph import COLLECTIVE

    prod = h.b_prod[j]
    if prod < 0:
        return "freeable inputs"
    if h.b_out[j]:
        return "graph outputs"
    pname = h.names[prod]
    if h.buffers[j].name.endswith((".out", ".in", ".cat")) and pname in bucket_nodes:
        return "bucket buffers"
    if h.kind[prod] == COLLECTIVE or pname in bucket_nodes:
        return "collective outputs"
    return "FLOP-less outputs" if pname in free_ops else "other"


def table(folders: list[str] = RUNS) -> list[str]:
    lines = ["| run | configuration | graph | buckets | peak GB | " + " | ".join(f"{k} GB" for k in KINDS) + " |",
             "| --- | --- | --- | ---: | ---: | " + " | ".join("---:" for _ in KINDS) + " |"]
    for folder in folders:
        for r in split(folder):
            lines.append(f"| {r['run']} | {r['config']} | {r['graph']} ({r['nodes']:,} nodes) | {r['buckets']} | "
                         f"{r['peak'] / 1e9:.3f} | " + " | ".join(f"{r[k] / 1e9:.3f}" for k in KINDS) + " |")
    return lines


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1:] or RUNS)))
