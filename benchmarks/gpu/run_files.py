"""Reading what a GPU run left behind: profiler traces and stored graphs.

Traces are kept as `.json`, `.json.gz` (runs before 27) or `.json.xz` (runs 27 on, and the earlier ones since
recompressed for the device's carry limit); stores as `store.tar.gz`. Every script reads them through here, so
that they all read the same events from the same files.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import tarfile
import tempfile
from collections.abc import Iterator
from typing import Any

_OPENERS = ((".xz", lzma.open), (".gz", gzip.open))


def trace_events(path: str) -> list[dict]:
    """Every event of a profiler trace, compressed or not."""
    opener = next((o for ext, o in _OPENERS if path.endswith(ext)), open)
    with opener(path, "rt", encoding="utf-8") as f:
        ev = json.load(f)
    return ev.get("traceEvents", ev) if isinstance(ev, dict) else ev


def kernels_of(events: list[dict]) -> list[dict]:
    """The GPU kernels among a trace's events: complete events of category `kernel`."""
    return [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"]


def trace_kernels(path: str) -> list[dict]:
    """The GPU kernel events of a profiler trace, compressed or not."""
    return kernels_of(trace_events(path))


def run_trace(run: str, cfg: str = "d") -> str:
    """The path of a run's kept trace for one configuration; exits naming the run if there is none."""
    names = [f"trace_{cfg}.json{ext}" for ext in (".xz", ".gz", "")]
    for name in names:
        p = os.path.join(run, name)
        if os.path.exists(p):
            return p
    raise SystemExit(f"{run}: no {', '.join(names)}")


def unpack_store(tar_path: str, into: str | None = None) -> str:
    """Unpack a run's `store.tar.gz` (into a new temporary folder unless `into`); returns the folder holding
    `store/<cfg>/*.graph.json`."""
    into = into or tempfile.mkdtemp()
    with tarfile.open(tar_path) as t:
        t.extractall(into, filter="data")
    return into


def stored_schedules(store: str, collective_order: str) -> Iterator[tuple[str, Any, Any, str]]:
    """Each graph a store recorded (by file name): its fingerprint, the graph, its usable stored order or plan
    (`store.usable_stored` with plans; None where there is none) and why not. The probes and the step's
    prediction read a store through here, so that they all judge the same schedules the same way."""
    from overlapsat import load_graph
    from overlapsat.store import usable_stored

    for fn in sorted(f for f in os.listdir(store) if f.endswith(".graph.json")):
        fp = fn[: -len(".graph.json")]
        g = load_graph(os.path.join(store, fn))
        sched, why = usable_stored(store, fp, g, collective_order, plans=True)
        yield fp, g, sched, why
