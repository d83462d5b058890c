"""Chrome trace export against the trace-event format."""

import json
from collections import defaultdict

from overlapsat import simulate
from overlapsat.examples import tp_transformer
from overlapsat.heuristics import best
from overlapsat.trace import chrome_trace, export_chrome_trace


def test_trace_event_format(tmp_path):
    g = tp_transformer(layers=1, seed=0)
    order = best(g).order
    p = tmp_path / "t.json"
    export_chrome_trace(g, order, p)
    d = json.loads(p.read_text())
    ev = d["traceEvents"]
    for e in ev:
        assert {"ph", "pid", "name"} <= set(e)
        if e["ph"] in ("X", "C"):
            assert isinstance(e["ts"], (int, float))
        if e["ph"] == "X":
            assert "dur" in e and "tid" in e and e["dur"] >= 0
    # one slice per compute/collective node; stalls only for waits that stall
    sim = simulate(g, order)
    node_slices = [e for e in ev if e["ph"] == "X" and e.get("cat") in ("compute", "collective")]
    assert sorted(e["name"] for e in node_slices) == sorted(n.name for n in g.nodes if n.kind.value != "wait")
    stalls = [e for e in ev if e.get("cat") == "stall"]
    assert len(stalls) == sum(1 for s in sim.stall if s > 0)
    # per track: slices do not overlap and are in time order (one stream each)
    by_tid = defaultdict(list)
    for e in ev:
        if e["ph"] == "X":
            by_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_tid.values():
        assert spans == sorted(spans)
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:]))
    counters = [e["ts"] for e in ev if e["ph"] == "C"]
    assert counters == sorted(counters)
    assert max(e["args"]["bytes"] for e in ev if e["ph"] == "C") == sim.peak_memory
    assert d["otherData"]["makespan_us"] == sim.makespan


def test_trace_input_order_default():
    g = tp_transformer(layers=1, seed=0)
    d = chrome_trace(g)
    assert d["otherData"]["exposed_us"] == simulate(g).exposed
