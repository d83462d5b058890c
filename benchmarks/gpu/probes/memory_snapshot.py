"""The allocator's tensors at a step's peak against the importer's accounting (the rule fixed in
benchmarks/results/gpu_runs.md after run 33's overshoot at `free`).

    python benchmarks/gpu/probes/memory_snapshot.py RUN_DIR [--config d_mem]

RUN_DIR holds what `e2e_step.py --snapshot` kept for one configuration: `snapshot_<cfg>/events.json.xz`
(the allocator's events of one step, each with the generated module and line that asked for the block), the
generated modules themselves, and `after_fusion_<cfg>/after_fusion_<collectives>.graph.json` (Inductor's
nodes after fusion, imported in the order it emits them, with its buffer names). The script replays the
events to the step's peak and names the buffer whose generated line made the peak allocation; it sets the
bytes live there against the importer's post-alloc memory at the node producing that buffer, and the bytes
live after each collective's allocation against the importer's at that collective.
"""

from __future__ import annotations

import argparse
import glob
import json
import lzma
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

ASSIGN = re.compile(r"^\s*(buf\d+)\s*=")
COLLECTIVE_CALLS = ("all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce")


def levels(events: list, base: int) -> list[int]:
    """Bytes live after each event. `base` bytes were allocated before the trace; a freed block the trace never
    allocated is one of them. The allocator counts a block free when the free completes (when the trace has
    such events; else when it is requested)."""
    done = "free_completed" if any(e[0] == "free_completed" for e in events) else "free_requested"
    sizes: dict[int, int] = {}
    cur = base
    out = []
    for action, addr, size, _where in events:
        if action == "alloc":
            sizes[addr] = size
            cur += size
        elif action == done:
            cur -= sizes.pop(addr, size)
        out.append(cur)
    return out


def buffer_names(run_dir: str, cfg: str) -> tuple[dict[str, str], dict[str, int], dict[str, str]]:
    """`module:line` -> the buffer that line assigns (or the line's text); each module's collective calls
    (which graph it is: the forward's or the backward's); `module:line` -> the line's text."""
    names: dict[str, str] = {}
    colls: dict[str, int] = {}
    texts: dict[str, str] = {}
    for path in glob.glob(os.path.join(run_dir, f"snapshot_{cfg}", "*.py")):
        mod = os.path.basename(path)
        with open(path, encoding="utf-8", errors="replace") as fi:
            lines = fi.read().splitlines()
        colls[mod] = sum(ln.count(c) for ln in lines for c in COLLECTIVE_CALLS if "torch.ops" in ln)
        for k, ln in enumerate(lines, start=1):
            m = ASSIGN.match(ln)
            names[f"{mod}:{k}"] = m.group(1) if m else ln.strip()[:80]
            texts[f"{mod}:{k}"] = ln
    return names, colls, texts


def analyse(run_dir: str, cfg: str) -> dict:
    """The step's peak on the GPU, decomposed against the after-fusion import of the graph it falls in: the
    bytes live when that graph started beyond its inputs (state outside the graphs), the model's post-alloc
    memory at the node whose line made the peak allocation, and what is left (allocations the model does not
    have, such as a kernel's workspace). Buffer names are not compared one by one: Inductor's wrapper reuses
    a freed block for a later buffer of the same size (and a saved input's block for a backward buffer), so
    a block keeps the name of its first buffer; the totals are compared instead, at every collective."""
    from overlapsat import load_graph
    from overlapsat.simulate import memory_curve

    with lzma.open(os.path.join(run_dir, f"snapshot_{cfg}", "events.json.xz"), "rt", encoding="utf-8") as fi:
        snap = json.load(fi)
    events, base = snap["events"], snap["base_allocated_bytes"]
    names, colls, texts = buffer_names(run_dir, cfg)
    live = levels(events, base)
    at = max(range(len(live)), key=live.__getitem__)  # the first event at the peak
    peak, where = live[at], events[at][3]
    mod = where.split(":")[0]
    graphs = {}
    for path in glob.glob(os.path.join(run_dir, f"after_fusion_{cfg}", "after_fusion_*.graph.json")):
        g = load_graph(path)
        graphs[len(g.coll_seq)] = g
    # a module's text names each collective a few times (the call, its comment, ...): the graph whose count divides
    n, g = next(((n, gr) for n, gr in sorted(graphs.items(), reverse=True)
                 if colls.get(mod) and colls[mod] % n == 0), (None, None))
    out: dict = {"peak_bytes": peak, "peak_event": at, "peak_where": where, "peak_buffer": names.get(where, where)}
    if g is None:
        return out
    mods = {m for m, c in colls.items() if c % n == 0 and c}  # this graph's modules (the capture's one too)
    first = next(i for i, e in enumerate(events) if e[3].split(":")[0] in mods and e[0] == "alloc")
    before = live[first - 1] if first else base
    inputs = sum(b.size_free for b in g.buffers if b.freeable_input)
    offset = before - inputs  # live when the graph starts, beyond what the model counts as its inputs
    post_alloc, _ = memory_curve(g, list(range(len(g))))
    buf = names.get(where, "")
    producer = next((b.producer for b in g.buffers if b.name == buf), None)
    model_at = post_alloc[g.names.index(producer)] if producer is not None else None
    transient = sum(e[2] for i, e in enumerate(events[: at + 1]) if e[0] == "alloc" and e[3] == where
                    and any(f[0] == "free_completed" and f[1] == e[1] and f[3] == where for f in events[at + 1: at + 4]))
    # the model's post-alloc memory at each collective against the GPU's after the collective's allocation
    coll_nodes = [i for i, nd in enumerate(g.nodes) if nd.kind.name == "COLLECTIVE"]
    gpu_at = [live[i] - offset for i, (action, _, _, w) in enumerate(events)
              if action == "alloc" and w.split(":")[0] in mods
              and any(f"{c}.default(" in texts.get(w, "") for c in COLLECTIVE_CALLS)]
    gaps = [gpu_at[k] - post_alloc[coll_nodes[k]] for k in range(min(len(gpu_at), len(coll_nodes)))]
    out.update({"graph_collectives": n, "live_before_graph_bytes": before, "model_inputs_bytes": inputs,
                "outside_graph_bytes": offset, "graph_part_at_peak_bytes": peak - offset,
                "model_peak_bytes": max(post_alloc), "peak_node": producer, "model_at_peak_node_bytes": model_at,
                "transient_at_peak_bytes": transient,
                "unexplained_at_peak_bytes": None if model_at is None else peak - offset - model_at - transient,
                "collective_gaps_bytes": {"count": len(gaps), "exact": sum(1 for x in gaps if x == 0),
                                          "min": min(gaps, default=0), "max": max(gaps, default=0)}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--config", default="d_mem")
    a = ap.parse_args()
    print(json.dumps(analyse(a.run_dir, a.config), indent=1))


if __name__ == "__main__":
    main()
