"""Chrome trace-event / Perfetto export of a schedule.

One process, one thread (track) per stream: the compute stream, where wait
stalls appear as their own slices, and one per communication group; memory is
a counter track. Timestamps are microseconds, as the format expects.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from overlapsat.graph import COLLECTIVE, WAIT, Graph
from overlapsat.io import atomic_write_text
from overlapsat.simulate import simulate


def chrome_trace(graph: Graph, order: Sequence[int | str] | None = None, *, name: str | None = None,
                 buckets: Sequence[Any] = (), pid: int = 1) -> dict[str, Any]:
    """A Chrome/Perfetto trace of `order` on `graph`; for a plan, `graph` is the bucketed graph and `buckets` its
    buckets: each merged transfer is named "bucket k" and carries its members (shown on hover)."""
    sim = simulate(graph, order)
    bucket_of = {b.name: (k, b) for k, b in enumerate(buckets)}
    tids = {"compute": 1, **{g: 2 + i for i, g in enumerate(graph.groups)}}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name or graph.name}},
        *({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
           "args": {"name": "compute stream" if s == "compute" else f"comm: {s}"}} for s, tid in tids.items()),
    ]
    for step, v in enumerate(sim.order):
        nd = graph.nodes[v]
        k = graph.kind[v]
        if k == WAIT:
            if sim.stall[v] > 0:
                events.append({"ph": "X", "pid": pid, "tid": tids["compute"], "name": f"stall: {nd.name}",
                               "cat": "stall", "ts": sim.start[v], "dur": sim.stall[v],
                               "args": {"step": step, "collective": nd.collective}})
            if graph.dur[v] > 0:  # its own time, after the stall (decisions.md 17)
                events.append({"ph": "X", "pid": pid, "tid": tids["compute"], "name": nd.name, "cat": "wait",
                               "ts": sim.start[v] + sim.stall[v], "dur": graph.dur[v],
                               "args": {"step": step, "collective": nd.collective}})
            continue
        if k == COLLECTIVE and graph.launch[v] > 0:  # the launch on the compute stream, before the transfer
            events.append({"ph": "X", "pid": pid, "tid": tids["compute"], "name": f"launch: {nd.name}",
                           "cat": "launch", "ts": sim.issue[v], "dur": graph.launch[v], "args": {"step": step}})
        tid = tids["compute"] if k != COLLECTIVE else tids[nd.group]  # type: ignore[index]
        args: dict[str, Any] = {"step": step}
        label = nd.name
        if k == COLLECTIVE:
            args.update(op=nd.op, bytes=nd.nbytes, group_size=nd.group_size, issued_at=sim.issue[v])
            if nd.name in bucket_of:
                bk, b = bucket_of[nd.name]
                label = f"bucket {bk}: {len(b.members)} x {nd.op}"
                args.update(bucket=bk, members=list(b.members))
        events.append({"ph": "X", "pid": pid, "tid": tid, "name": label,
                       "cat": "collective" if k == COLLECTIVE else "compute", "ts": sim.start[v],
                       "dur": graph.dur[v], "args": args})
    last = None
    for step, v in enumerate(sim.order):
        val = sim.mem_post_alloc[step]
        if val != last:
            events.append({"ph": "C", "pid": pid, "name": "memory", "ts": sim.issue[v], "args": {"bytes": val}})
            last = val
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"graph": graph.name, "fingerprint": graph.fingerprint(), "makespan_us": sim.makespan,
                          "exposed_us": sim.exposed, "peak_memory": sim.peak_memory}}


def export_chrome_trace(graph: Graph, order: Sequence[int | str] | None, path: str | os.PathLike[str], *,
                        name: str | None = None, plans: Sequence[tuple[str, Graph, Sequence[int], Sequence[Any]]] = ()
                        ) -> str:
    """Write the trace JSON (open it in ui.perfetto.dev or chrome://tracing). Each of `plans` (name, bucketed
    graph, order, buckets) is a process of its own beside the order's, its buckets named with their members."""
    trace = chrome_trace(graph, order, name=name)
    for k, (pname, h, porder, buckets) in enumerate(plans):
        extra = chrome_trace(h, porder, name=pname, buckets=buckets, pid=2 + k)
        trace["traceEvents"] += extra["traceEvents"]
        trace["otherData"].setdefault("plans", []).append({"name": pname, **extra["otherData"]})
    atomic_write_text(path, json.dumps(trace))
    return os.fspath(path)
