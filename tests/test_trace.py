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


def test_trace_shows_launches_and_wait_time_on_the_compute_stream():
    from overlapsat.trace import chrome_trace
    from tests.test_stream_costs import one_collective

    ev = {e["name"]: e for e in chrome_trace(one_collective())["traceEvents"] if e["ph"] == "X"}
    # hand-computed (tests/test_stream_costs.py): launch [2,3), transfer [3,8), stall [6,8), wait's own [8,10)
    assert (ev["launch: c"]["ts"], ev["launch: c"]["dur"]) == (2.0, 1.0)
    assert (ev["c"]["ts"], ev["c"]["dur"]) == (3.0, 5.0)
    assert (ev["stall: w"]["ts"], ev["stall: w"]["dur"]) == (6.0, 2.0)
    assert (ev["w"]["ts"], ev["w"]["dur"]) == (8.0, 2.0)
    assert ev["launch: c"]["tid"] == ev["w"]["tid"] == ev["k1"]["tid"] != ev["c"]["tid"]


def test_a_plans_trace_is_a_process_of_its_own_with_its_buckets_members(tmp_path):
    """#52: `export_chrome_trace(..., plans=...)` adds the plan's timeline as a second process; its merged
    transfer is named as a bucket and carries the members (Perfetto shows them on hover)."""
    import json

    from overlapsat.trace import export_chrome_trace
    from tests.test_plot import _small_plan

    g, h, bucket = _small_plan()
    path = export_chrome_trace(g, None, tmp_path / "t.json", plans=[("plan", h, h.input_order, [bucket])])
    d = json.loads(open(path).read())
    merged = [e for e in d["traceEvents"] if e.get("args", {}).get("members")]
    assert [(e["pid"], e["name"], e["args"]["members"]) for e in merged] == \
        [(2, "bucket 0: 2 x all_gather", list(bucket.members))]
    assert {e["pid"] for e in d["traceEvents"]} == {1, 2} and d["otherData"]["plans"][0]["name"] == "plan"
