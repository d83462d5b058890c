"""How much of a plan's predicted peak is buffers Inductor never makes (issue "plans within the memory a user
has": the unbudgeted plan with the re-gather on 4 GPUs predicted 7.22 GB and measured 4.91).

    python benchmarks/gpu/probes/inline_probe.py [STORE.tar.gz [CONFIG]]
    python benchmarks/gpu/probes/inline_probe.py --graph GRAPH.json ...

The FX importer prices FLOP-less ops (pointwise, casts) as Inductor fuses them: inside a fused chain an op costs
no time (duration 0). Inductor inlines such ops into the kernels that read them, so their outputs never exist and
their inputs are read where those readers run. MODEL.md's memory rule keeps every FX node's output alive from the
node to its last reader, so an order that hoists a 0-duration op far ahead of its reader is charged for a buffer
that is never allocated. This walks each stored schedule of CONFIG (default p_free) twice on its bucketed graph:
by the rule, and with every 0-duration compute op inlined (its output dropped, its inputs' readers replaced by its
own readers, transitively). It prints both peaks, and the op moved furthest from its first reader.
"""

from __future__ import annotations

import os
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STORE = os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-28", "eqshape_w4_regather", "second", "store.tar.gz")


def _peak(h, order: list[str], inlined: set[str]) -> int:
    """MODEL.md's peak of `order` on `h`, with the outputs of `inlined` ops absent and their inputs read by the
    ops' own readers."""
    outs: dict[str, list] = {}
    for b in h.buffers:
        if b.producer:
            outs.setdefault(b.producer, []).append(b)

    def readers(b) -> list[str]:
        r = []
        for c in b.consumers:
            r.append(c)
            if c in inlined:
                for ob in outs.get(c, []):
                    r += readers(ob)
        return r

    pos = {n: k for k, n in enumerate(order)}
    mem, alloc, free = 0, {}, {}
    for b in h.buffers:
        if b.producer in inlined:
            continue
        if b.freeable_input:
            mem += b.size_alloc
        else:
            alloc.setdefault(b.producer, []).append(b)
        if not b.output:
            rs = readers(b)
            free.setdefault(max(rs, key=pos.__getitem__) if rs else b.producer, []).append(b)
    peak = mem
    for n in order:
        mem += sum(b.size_alloc for b in alloc.get(n, []))
        peak = max(peak, mem)
        mem -= sum(b.size_free for b in free.get(n, []))
    return peak


def probe(store: str = STORE, config: str = "p_free") -> list[dict]:
    """Per stored schedule of `config` with buckets: its peak by MODEL.md's rule, with 0-duration ops inlined,
    and the 0-duration op placed furthest ahead of its first reader (name, position, reader's position)."""
    import overlapsat as o
    from overlapsat.graph import NodeKind
    from overlapsat.plan import laid_out, materialize
    from overlapsat.schedules import unpriced

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(store) as t:
            t.extractall(tmp, filter="data")
        folder = os.path.join(tmp, "store", config)
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".schedule.json"):
                continue
            g = o.load_graph(os.path.join(folder, name.replace(".schedule.json", ".graph.json")))
            s = o.load_schedule(os.path.join(folder, name), g)
            if not s.plan.buckets:
                continue
            h = materialize(g.relaxed("free"), s.plan.buckets, laid_out(unpriced, s.layout))
            order = list(s.order)
            pos = {n: k for k, n in enumerate(order)}
            free_ops = {nd.name for nd in g.nodes if nd.kind is NodeKind.COMPUTE and nd.duration == 0.0}
            ahead = max(((pos[b.producer], min(pos[c] for c in b.consumers), b.producer) for b in h.buffers
                         if b.producer in free_ops and b.consumers and b.size_alloc > 0),
                        key=lambda r: r[1] - r[0])
            rows.append({"graph": name.split(".")[0], "nodes": len(order), "peak": _peak(h, order, set()),
                         "inlined_peak": _peak(h, order, free_ops), "furthest": ahead})
    return rows


def graph_peaks(path: str) -> tuple[int, int]:
    """A graph file in its own order (torch's configurations' graphs, saved by e2e_step.py with
    OSAT_SAVE_TORCH_GRAPHS): its peak by MODEL.md's rule and with 0-duration ops inlined."""
    import overlapsat as o
    from overlapsat.graph import NodeKind

    g = o.load_graph(path)
    free_ops = {nd.name for nd in g.nodes if nd.kind is NodeKind.COMPUTE and nd.duration == 0.0}
    return _peak(g, list(g.names), set()), _peak(g, list(g.names), free_ops)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--graph"]:
        for path in argv[1:]:
            peak, inlined = graph_peaks(path)
            print(f"{os.path.basename(path)}: peak {peak / 1e9:.4f} GB by MODEL.md's rule, {inlined / 1e9:.4f} GB "
                  f"with FLOP-less ops inlined")
        return
    for r in probe(*argv):
        at, reader, op = r["furthest"]
        print(f"{r['graph']} ({r['nodes']} nodes): peak {r['peak'] / 1e9:.2f} GB by MODEL.md's rule, "
              f"{r['inlined_peak'] / 1e9:.2f} GB with FLOP-less ops inlined; furthest ahead: {op} at {at}, "
              f"its first reader at {reader}")


if __name__ == "__main__":
    main(sys.argv[1:])
