"""The Inductor pass object: picklable into Inductor's cache key, and never the cause of a failed compile."""

import logging
import os
import pickle

import pytest

from overlapsat import GraphError
from overlapsat.torch import SchedulePass, schedule_pass
from tests.torch.scripts import run_script


def test_pass_pickles_with_its_version_options_and_schedules(tmp_path):
    p = schedule_pass(str(tmp_path), on_apply=lambda g, o: None)  # a local callable: left out of the state
    blob, key = pickle.dumps(p), p.uuid()
    q = pickle.loads(blob)
    assert isinstance(q, SchedulePass) and q.store == p.store and q.record and q.on_apply is None
    assert pickle.dumps(q) == blob and q.uuid() == key  # same store, same key: the cache can hit
    assert pickle.dumps(schedule_pass(str(tmp_path), record=False)) != blob  # options are part of the key
    # a schedule solved after a compile changes the key, so the next compile applies it
    (tmp_path / "abc.schedule.json").write_text("{}")
    key2 = p.uuid()
    assert pickle.dumps(p) != blob and key2 != key
    (tmp_path / "abc.schedule.json").write_text("{ }")  # and so does a re-solved one
    assert p.uuid() not in (key, key2)


def test_missing_store_is_refused_when_installed(tmp_path):
    with pytest.raises(GraphError, match="not a directory"):
        schedule_pass(str(tmp_path / "missing"))


@pytest.mark.parametrize("fault", ["bad_nodes", "store_gone", "import_error", "unreadable_schedule"])
def test_any_failure_keeps_inductors_order_with_one_warning(tmp_path, caplog, monkeypatch, fault):
    import importlib

    apply = importlib.import_module("overlapsat.torch.apply")
    store = tmp_path / "store"
    store.mkdir()
    p = schedule_pass(str(store))
    snodes = [object(), object()]
    if fault == "store_gone":
        os.rmdir(store)
        monkeypatch.setattr(apply, "import_snodes", lambda s, durations=None: _tiny_graph())
    elif fault == "import_error":
        def boom(*a, **k):
            raise ImportError("no module named torch._inductor.something")
        monkeypatch.setattr(apply, "import_snodes", boom)
    elif fault == "unreadable_schedule":
        g = _tiny_graph()
        monkeypatch.setattr(apply, "import_snodes", lambda s, **kw: g)
        (store / f"{g.fingerprint()}.schedule.json").write_text("{ not json")
    with caplog.at_level(logging.WARNING, logger="overlapsat.torch.apply"):
        out = p(snodes)
    assert out is snodes
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    if fault == "store_gone":  # recording into a store that disappeared is a failure too
        assert len(warnings) == 1
    else:
        assert len(warnings) == 1 and "keeping Inductor's order" in warnings[0].getMessage()


def _tiny_graph():
    from overlapsat import GraphBuilder

    b = GraphBuilder()
    b.compute("a", 1.0)
    b.compute("b", 1.0)
    return b.build()


CACHE_SCRIPT = """
import os, sys, tempfile
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()
import torch
import torch._inductor.config as icfg
from torch._dynamo.utils import counters
from overlapsat.torch import schedule_pass
store = tempfile.mkdtemp()
def f(x):
    return torch.relu(x @ x.T).sum(dim=0) * 2
x = torch.randn(16, 16)
with icfg.patch(reorder_for_compute_comm_overlap=True, reorder_for_compute_comm_overlap_passes=[schedule_pass(store)]):
    for k in range(3):
        if k == 2:  # a schedule solved offline: the key changes, the next compile must not reuse the old code
            open(os.path.join(store, "0" * 32 + ".schedule.json"), "w").write("{}")
        torch._dynamo.reset()
        before = dict(counters["inductor"])
        torch.compile(f)(x)
        print(k, counters["inductor"]["fxgraph_cache_hit"] - before.get("fxgraph_cache_hit", 0),
              counters["inductor"]["fxgraph_cache_bypass"] - before.get("fxgraph_cache_bypass", 0))
"""


@pytest.mark.compile
def test_second_compile_with_the_pass_hits_inductors_cache():
    pytest.importorskip("torch")
    p = run_script(CACHE_SCRIPT)
    rows = [line.split() for line in p.stdout.strip().splitlines()]
    assert rows == [["0", "0", "0"], ["1", "1", "0"], ["2", "0", "0"]], (rows, p.stderr[-2000:])


class _Node:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


def _overlap_graph(group="g0"):
    """k runs before c in Inductor's order; issuing c first hides its transfer (a schedule worth applying).
    "g0": the name the pass gives its only group (decisions.md 48), so the fingerprints below are the pass's."""
    from overlapsat import GraphBuilder

    b = GraphBuilder()
    b.compute("k", 5.0)
    b.collective("c", group=group, duration=5.0)
    b.wait("w", "c")
    return b.build()


def _pass_on(monkeypatch, tmp_path, group="g0", **kw):
    import importlib

    apply = importlib.import_module("overlapsat.torch.apply")
    g = _overlap_graph(group)
    monkeypatch.setattr(apply, "import_snodes", lambda s, **kw: g)
    return SchedulePass(str(tmp_path), **kw), g, [_Node(n) for n in g.input_order]


def test_modes(monkeypatch, tmp_path):
    from overlapsat import load_graph

    solve, g, snodes = _pass_on(monkeypatch, tmp_path, mode="solve", time_limit=5)
    out = solve(snodes)
    assert [s.get_name() for s in out] == ["c", "k", "w"]  # solved inline: the transfer hides behind k
    assert os.path.exists(tmp_path / f"{g.fingerprint()}.schedule.json")
    capture, _, _ = _pass_on(monkeypatch, tmp_path, mode="capture")
    assert capture(snodes) is snodes  # capture never applies, even with a schedule in the store
    assert load_graph(str(tmp_path / f"{g.fingerprint()}.graph.json")).fingerprint() == g.fingerprint()
    apply_, _, _ = _pass_on(monkeypatch, tmp_path, mode="apply")
    assert [s.get_name() for s in apply_(snodes)] == ["c", "k", "w"]  # the stored schedule
    with pytest.raises(GraphError, match="mode"):
        SchedulePass(str(tmp_path), mode="train")
    with pytest.raises(GraphError, match="not safe"):
        SchedulePass(str(tmp_path), collective_order="free")


def test_apply_miss_records_the_graph_and_the_reason_then_falls_back(monkeypatch, tmp_path):
    import json

    keep, g, snodes = _pass_on(monkeypatch, tmp_path, mode="apply")
    assert keep(snodes) is snodes  # no schedule: Inductor's order
    fp = g.fingerprint()
    miss = json.loads((tmp_path / f"{fp}.miss.json").read_text())
    assert miss["reason"] == "no schedule" and miss["fallback"] == "inductor"
    assert (tmp_path / f"{fp}.graph.json").exists()
    best, _, _ = _pass_on(monkeypatch, tmp_path, mode="apply", fallback="heuristic")
    # the best heuristic order of this graph issues the collective first (a brute-force check: 3 orders)
    assert [s.get_name() for s in best(snodes)] == ["c", "k", "w"]
    # a corrupt schedule is a miss with its reason, never applied
    (tmp_path / f"{fp}.schedule.json").write_text("{ not json")
    assert keep(snodes) is snodes
    assert json.loads((tmp_path / f"{fp}.miss.json").read_text())["reason"].startswith("corrupt schedule")
    with pytest.raises(GraphError, match="fallback"):
        SchedulePass(str(tmp_path), fallback="random")


def test_profile_and_calibration_price_the_graph_and_key_the_cache(tmp_path):
    import pickle

    from overlapsat.cost import builtin_calibration, cost_model
    from overlapsat.graph import Node, NodeKind

    node = Node("add", NodeKind.COMPUTE, 0.0, bytes_accessed=2e9)  # memory-bound: HBM 3.35 TB/s against 4.8
    h100 = SchedulePass(str(tmp_path), profile="h100_sxm")
    assert h100._pricing()(node) == round(cost_model("h100_sxm").duration(node), 3)
    assert h100._pricing()(node) != round(cost_model("h200").duration(node), 3)
    cal = tmp_path / "cal.json"
    builtin_calibration("h200").save(str(cal))
    mine = SchedulePass(str(tmp_path), calibration=str(cal))
    assert mine._pricing()(node) == round(cost_model("h200").duration(node), 3)  # the same tables as built in
    key = pickle.dumps(mine)
    edited = builtin_calibration("h200")
    edited.meta["note"] = "re-measured"
    edited.save(str(cal))  # an edited calibration is another key
    assert pickle.dumps(SchedulePass(str(tmp_path), calibration=str(cal))) != key
    with pytest.raises(GraphError, match="profile"):
        SchedulePass(str(tmp_path), profile="h100_sxm", calibration=str(cal))  # tables of another GPU
    with pytest.raises(GraphError):
        SchedulePass(str(tmp_path), profile="no_such_gpu")


def test_install_sets_inductors_config_and_creates_the_store(tmp_path):
    pytest.importorskip("torch")
    import torch._inductor.config as icfg

    from overlapsat.torch import install

    store = tmp_path / "new" / "store"
    with icfg.patch(reorder_for_compute_comm_overlap=False, reorder_for_compute_comm_overlap_passes=[]):
        p = install("capture", str(store))
        assert store.is_dir() and p.mode == "capture"
        assert icfg.reorder_for_compute_comm_overlap and icfg.reorder_for_compute_comm_overlap_passes == [p]


def test_a_rank_whose_group_has_another_name_applies_its_peers_schedule(monkeypatch, tmp_path):
    """The scheduler-node pass names groups by structure too (decisions.md 48): a schedule solved on a graph
    whose group torch named "7" is applied where the same graph's group is named "9", and the store holds one
    schedule."""
    solve, _, snodes = _pass_on(monkeypatch, tmp_path, group="7", mode="solve", time_limit=5)
    assert [s.get_name() for s in solve(snodes)] == ["c", "k", "w"]
    other, _, snodes = _pass_on(monkeypatch, tmp_path, group="9", mode="apply")
    assert [s.get_name() for s in other(snodes)] == ["c", "k", "w"]  # the stored schedule, not Inductor's order
    assert len(list(tmp_path.glob("*.schedule.json"))) == 1
