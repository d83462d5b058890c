"""The allocator's tensors at a step's peak against the importer's accounting (the rule fixed in
docs/gpu_results.md after run 33's overshoot at `free`).

    python benchmarks/gpu/memory_snapshot.py RUN_DIR [--config d_mem]

RUN_DIR holds what `e2e_step.py --snapshot` kept for one configuration: `snapshot_<cfg>/events.json.xz`
(the allocator's events of one step, each with the generated module and line that asked for the block), the
generated modules themselves, and `after_fusion_<cfg>/after_fusion_<collectives>.graph.json` (Inductor's
nodes after fusion, imported in the order it emits them, with its buffer names). The script replays the
events to the step's peak, names each live block by the buffer the generated line assigns, and sets the
live set against the importer's at the node that produced the last block allocated before the peak:
buffers live on the GPU that the importer has freed (or never had), and the reverse.
"""

from __future__ import annotations

import argparse
import glob
import json
import lzma
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

ASSIGN = re.compile(r"^\s*(buf\d+)\s*=")
COLLECTIVE_CALLS = ("all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce")


def replay(events: list, base: int, stop: int | None = None) -> tuple[int, int, dict]:
    """(peak bytes, index of the event that reached it, blocks live after event `stop` or at the peak):
    `base` bytes were allocated before the trace; a block freed that the trace never allocated is one of
    them. The allocator counts a block free when the free completes."""
    done = "free_completed" if any(e[0] == "free_completed" for e in events) else "free_requested"
    live: dict[int, tuple[int, str]] = {}
    cur = peak = base
    at = -1
    freed_before = 0  # bytes of blocks that existed before the trace, freed during it
    for i, (action, addr, size, where) in enumerate(events):
        if action == "alloc":
            live[addr] = (size, where)
            cur += size
        elif action == done:
            if addr in live:
                cur -= live.pop(addr)[0]
            else:
                cur -= size
                freed_before += size
        if cur > peak and stop is None:
            peak, at = cur, i
        if stop is not None and i == stop:
            break
    if stop is None:
        return replay(events, base, at) if at >= 0 else (peak, at, {})
    live["before_trace"] = (base - freed_before, "before the trace")  # type: ignore[index]
    return cur, stop, live


def buffer_names(run_dir: str, cfg: str) -> tuple[dict[str, str], dict[str, int]]:
    """`module:line` -> the buffer that line assigns (or the line's text), and each module's collective calls
    (which graph it is: the forward's or the backward's)."""
    names: dict[str, str] = {}
    colls: dict[str, int] = {}
    for path in glob.glob(os.path.join(run_dir, f"snapshot_{cfg}", "*.py")):
        mod = os.path.basename(path)
        with open(path, encoding="utf-8", errors="replace") as fi:
            lines = fi.read().splitlines()
        colls[mod] = sum(ln.count(c) for ln in lines for c in COLLECTIVE_CALLS if "torch.ops" in ln)
        for k, ln in enumerate(lines, start=1):
            m = ASSIGN.match(ln)
            names[f"{mod}:{k}"] = m.group(1) if m else ln.strip()[:80]
    return names, colls


def model_live(graph, upto: str) -> dict[str, int]:
    """The importer's live buffers (name -> bytes) after node `upto` allocates (MODEL.md's memory walk)."""
    order = list(graph.names)
    last: dict[str, str] = {}
    for b in graph.buffers:
        for c in b.consumers:
            if b.name not in last or order.index(c) > order.index(last[b.name]):
                last[b.name] = c
    live = {b.name: b.size_free for b in graph.buffers if b.freeable_input}
    for nm in order:
        for b in graph.buffers:
            if b.producer == nm:
                live[b.name] = b.size_alloc
        if nm == upto:
            return live
        for b in graph.buffers:
            if b.name in live and ((last.get(b.name) == nm) or (b.producer == nm and not b.consumers and not b.output)):
                del live[b.name]
    return live


def analyse(run_dir: str, cfg: str) -> dict:
    from overlapsat import load_graph, simulate

    with lzma.open(os.path.join(run_dir, f"snapshot_{cfg}", "events.json.xz"), "rt", encoding="utf-8") as fi:
        snap = json.load(fi)
    names, colls = buffer_names(run_dir, cfg)
    peak, at, live = replay(snap["events"], snap["base_allocated_bytes"])
    by_module: dict[str, int] = {}
    blocks = []
    for key, (size, where) in live.items():
        mod = where.split(":")[0] if where.endswith(tuple("0123456789")) and where.count(":") == 1 else where
        by_module[mod] = by_module.get(mod, 0) + size
        blocks.append({"where": where, "buffer": names.get(where, where), "bytes": size, "key": key})
    last_where = snap["events"][at][3] if at >= 0 else "-"
    out = {"peak_bytes": peak, "peak_event": at, "peak_event_where": last_where,
           "peak_event_buffer": names.get(last_where, last_where),
           "live_by_module": dict(sorted(by_module.items(), key=lambda kv: -kv[1])),
           "modules_collective_calls": colls}
    graphs = {}
    for path in glob.glob(os.path.join(run_dir, f"after_fusion_{cfg}", "after_fusion_*.graph.json")):
        g = load_graph(path)
        graphs[len(g.coll_seq)] = g
    mod = last_where.split(":")[0]
    # a module's text names each collective a few times (the call, its comment, ...): the graph whose count divides
    g = next((gr for n, gr in sorted(graphs.items(), reverse=True) if colls.get(mod) and colls[mod] % n == 0), None)
    if g is not None:
        buf = names.get(last_where, "")
        producer = next((b.producer for b in g.buffers if b.name == buf), None)
        out["model_peak_bytes"] = simulate(g).peak_memory
        if producer is not None:
            ml = model_live(g, producer)
            gpu = {}
            for b in blocks:
                if b["where"].startswith(mod + ":"):
                    gpu[b["buffer"]] = gpu.get(b["buffer"], 0) + b["bytes"]
            out["at_node"] = producer
            out["model_live_bytes_at_node"] = sum(ml.values())
            out["model_inputs_live_bytes"] = sum(v for k, v in ml.items()
                                                 if any(b.name == k and b.freeable_input for b in g.buffers))
            out["gpu_live_in_module_bytes"] = sum(gpu.values())
            out["gpu_only"] = sorted(([k, v] for k, v in gpu.items() if k not in ml), key=lambda kv: -kv[1])[:40]
            out["model_only"] = sorted(([k, v] for k, v in ml.items() if k not in gpu
                                        and not any(b.name == k and b.freeable_input for b in g.buffers)),
                                       key=lambda kv: -kv[1])[:40]
            out["size_differs"] = [[k, gpu[k], ml[k]] for k in gpu if k in ml and abs(gpu[k] - ml[k]) > 4096][:40]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--config", default="d_mem")
    a = ap.parse_args()
    print(json.dumps(analyse(a.run_dir, a.config), indent=1))


if __name__ == "__main__":
    main()
