"""Installing a pass and taking it out again: Inductor's settings come back exactly, a post-grad pass the user
had set is chained rather than replaced, capture runs past Inductor's caches, and `summary()` says what ran."""

import logging
import os
import pickle

import pytest

torch = pytest.importorskip("torch")
import torch._inductor.config as icfg  # noqa: E402

from overlapsat.torch import install, installed, installed_fx, summary, uninstall  # noqa: E402
from overlapsat.torch.apply import SchedulePass  # noqa: E402
from overlapsat.torch.fx_apply import FxSchedulePass, install_fx  # noqa: E402
from overlapsat.torch.installing import ChainedPass, note, reset_summary  # noqa: E402

SETTINGS = ("post_grad_custom_post_pass", "reorder_for_peak_memory", "reorder_for_compute_comm_overlap",
            "reorder_for_compute_comm_overlap_passes", "allow_buffer_reuse", "_post_fusion_custom_pass")


def _settings():
    return {k: getattr(icfg, k) for k in SETTINGS}


def test_uninstall_puts_back_what_each_install_changed(tmp_path):
    before = _settings()
    install("capture", str(tmp_path))
    assert icfg.reorder_for_compute_comm_overlap is True
    install_fx("apply", str(tmp_path), buffer_reuse=False)
    assert isinstance(icfg.post_grad_custom_post_pass, FxSchedulePass) and icfg.allow_buffer_reuse is False
    assert uninstall() is True  # the FX install
    assert icfg.post_grad_custom_post_pass is before["post_grad_custom_post_pass"]
    assert icfg.allow_buffer_reuse is before["allow_buffer_reuse"]
    assert icfg.reorder_for_compute_comm_overlap is True  # still the first install's
    assert uninstall() is True
    assert _settings() == before
    assert uninstall() is False


def test_context_managers_restore_even_when_the_block_raises(tmp_path):
    before = _settings()
    with pytest.raises(RuntimeError), installed_fx("apply", str(tmp_path)) as p:
        assert icfg.post_grad_custom_post_pass is p
        raise RuntimeError("user code")
    assert _settings() == before
    with installed("apply", str(tmp_path)) as p:
        assert icfg.reorder_for_compute_comm_overlap_passes[-1] is p
    assert _settings() == before


def test_a_users_post_grad_pass_runs_first_and_a_second_install_replaces_only_ours(tmp_path):
    calls = []

    def theirs(graph):
        calls.append("theirs")

    with icfg.patch(post_grad_custom_post_pass=theirs):
        p1 = install_fx("capture", str(tmp_path))
        chain = icfg.post_grad_custom_post_pass
        assert isinstance(chain, ChainedPass) and chain.first is theirs and chain.then is p1
        assert chain.uuid() is None  # their pass has no key: Inductor skips its cache, as it did before
        p2 = install_fx("apply", str(tmp_path))
        assert icfg.post_grad_custom_post_pass.first is theirs and icfg.post_grad_custom_post_pass.then is p2
        uninstall()
        uninstall()
        assert icfg.post_grad_custom_post_pass is theirs
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.ops.aten.relu.default, (x,)))
    ChainedPass(theirs, lambda graph: calls.append("ours"))(g)
    assert calls == ["theirs", "ours"]


def test_a_users_scheduler_pass_is_kept_before_ours_and_torchs_named_passes_are_replaced(tmp_path):
    def mine(snodes):
        return snodes

    with icfg.patch(reorder_for_compute_comm_overlap_passes=["sink_waits", mine]):
        p = install("apply", str(tmp_path))
        assert icfg.reorder_for_compute_comm_overlap_passes == [mine, p]
        uninstall()
        assert icfg.reorder_for_compute_comm_overlap_passes == ["sink_waits", mine]


def test_uninstall_leaves_a_setting_changed_after_the_install_and_says_so(tmp_path, caplog):
    with icfg.patch(reorder_for_peak_memory=True):
        install_fx("apply", str(tmp_path))
        icfg.reorder_for_peak_memory = True  # the user changed it back by hand
        with caplog.at_level(logging.WARNING, logger="overlapsat"):
            uninstall()
        assert icfg.reorder_for_peak_memory is True
        assert any("reorder_for_peak_memory" in r.getMessage() for r in caplog.records)


def test_capture_keys_miss_inductors_caches_and_apply_keys_hit(tmp_path):
    """A capture pass never hits a cache entry made by another process (the graph would never reach it):
    the FX pass has no key (Inductor bypasses its cache), the scheduler pass a per-process part."""
    assert FxSchedulePass(str(tmp_path), mode="capture").uuid() is None
    assert FxSchedulePass(str(tmp_path), mode="apply").uuid() == FxSchedulePass(str(tmp_path), mode="apply").uuid()
    a, b = SchedulePass(str(tmp_path), mode="capture"), SchedulePass(str(tmp_path), mode="capture")
    assert pickle.dumps(a) != pickle.dumps(b) and a.uuid() != b.uuid()
    assert pickle.dumps(pickle.loads(pickle.dumps(a))) == pickle.dumps(a)  # a cache entry's key reads back
    c, d = SchedulePass(str(tmp_path), mode="apply"), SchedulePass(str(tmp_path), mode="apply")
    assert pickle.dumps(c) == pickle.dumps(d)


def test_install_names_the_pricing_profile(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="overlapsat"), installed_fx("apply", str(tmp_path), profile="h100_sxm"):
        pass
    assert any("h100_sxm profile" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="overlapsat"), installed("apply", str(tmp_path)):
        pass
    assert any("h200 profile" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("settings,expandable", [
    ("", False), ("expandable_segments:True", True), ("garbage_collection_threshold:0.6,expandable_segments:True", True),
    ("expandable_segments:False", False), ("max_split_size_mb:128", False),
])
def test_install_on_cuda_says_when_budgets_hold_only_to_the_tensor(tmp_path, caplog, monkeypatch, settings, expandable):
    """Decision 129: under the caching allocator's default setting a plan measured 3,145,728 B above its budget
    while its tensors asked for no more (one GPU, 2026-12-03); with expandable segments, to the byte. An install
    on CUDA says so once, where the allocator is not set to expandable segments; on the CPU it says nothing."""
    from overlapsat.torch import installing

    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.setattr(torch._C, "_accelerator_getAllocatorSettings", lambda: settings)
    assert installing.expandable_segments() is expandable
    monkeypatch.setattr(installing, "_gpu_name", lambda: "NVIDIA H200")
    for install_ in (installed, installed_fx):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="overlapsat"), install_("apply", str(tmp_path)):
            pass
        said = [r for r in caplog.records if "expandable_segments:True" in r.getMessage()]
        assert len(said) == (0 if expandable else 1)
    monkeypatch.setattr(torch._C, "_accelerator_getAllocatorSettings", lambda: "")  # an older torch: the environment
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", settings)
    assert installing.expandable_segments() is expandable
    monkeypatch.setattr(installing, "_gpu_name", lambda: None)  # no GPU: nothing to say
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="overlapsat"), installed_fx("apply", str(tmp_path)):
        pass
    assert not [r for r in caplog.records if "expandable_segments" in r.getMessage()]


def test_summary_lists_what_the_passes_did():
    reset_summary()
    note("fx", "fx graph", "abcdef0123456789", "applied", "12 nodes")
    note("scheduler", "compile 0/0 fwd", "0123456789abcdef", "no schedule", "recorded; fallback inductor")
    s = summary()
    assert s.counts() == {"applied": 1, "no schedule": 1}
    text = str(s)
    assert text.startswith("overlapsat: 2 graph(s) seen by its passes, 1 applied, 1 no schedule")
    assert "abcdef012345  applied (12 nodes)" in text
    reset_summary()


def test_install_fx_warns_when_torch_would_reorder_after_it(tmp_path, caplog):
    """torch's FX bucketing and OverlapScheduler run after the custom post-grad pass (post_grad.py)."""
    with icfg.patch({"bucket_all_gathers_fx": "all", "aten_distributed_optimizations.enable_overlap_scheduling": True}):
        with caplog.at_level(logging.WARNING, logger="overlapsat"), installed_fx("apply", str(tmp_path)):
            pass
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "bucket_all_gathers_fx" in text and "enable_overlap_scheduling" in text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="overlapsat"), installed_fx("apply", str(tmp_path)):
        pass
    assert not caplog.records


def test_a_corrupt_recorded_graph_is_recorded_again(tmp_path, caplog):
    """A `<fp>.graph.json` that does not load was never repaired: every compile fell back, every solve-cache
    reported an error row. The next record writes it again."""
    from overlapsat.examples import bundled
    from overlapsat.io import load_graph
    from overlapsat.store import graph_path
    from overlapsat.torch.apply import record_graph

    g = load_graph(bundled("tp_small"))
    fp = g.fingerprint()
    path = graph_path(str(tmp_path), fp)
    open(path, "w").write("{broken")
    with caplog.at_level(logging.WARNING, logger="overlapsat"):
        record_graph(str(tmp_path), g, fp)
    assert load_graph(path).fingerprint() == fp
    assert any("recording" in r.getMessage() and "again" in r.getMessage() for r in caplog.records)
    before = os.path.getmtime(path)
    record_graph(str(tmp_path), g, fp)  # a good file is left alone
    assert os.path.getmtime(path) == before


def test_a_checked_recorded_graph_is_not_loaded_again_until_it_changes(tmp_path, monkeypatch):
    """Every compile records its graph: a file this process has checked is not parsed again (a 36k-node graph
    takes a second to load), but one changed since is checked and, if corrupt, written again."""
    import overlapsat.io as oio
    from overlapsat.examples import bundled
    from overlapsat.store import graph_path
    from overlapsat.torch.apply import record_graph

    g = oio.load_graph(bundled("tp_small"))
    fp = g.fingerprint()
    path = graph_path(str(tmp_path), fp)
    record_graph(str(tmp_path), g, fp)  # written
    loads = []
    real = oio.load_graph
    monkeypatch.setattr(oio, "load_graph", lambda p, *a, **k: loads.append(p) or real(p, *a, **k))
    record_graph(str(tmp_path), g, fp)
    record_graph(str(tmp_path), g, fp)
    assert loads == []
    open(path, "w").write("{broken")
    record_graph(str(tmp_path), g, fp)
    assert loads == [path] and real(path).fingerprint() == fp


def test_summary_says_what_a_cache_served_graph_carries(tmp_path):
    """#52: with the FX pass installed, graphs Inductor's cache served are said to carry the schedules the
    store holds now (its digest is part of the cache key), naming the store and the digest."""
    from torch._dynamo.utils import counters

    from overlapsat.store import schedules_digest

    reset_summary()
    before = counters["inductor"].get("fxgraph_cache_hit", 0)
    counters["inductor"]["fxgraph_cache_hit"] = before + 2
    try:
        with installed_fx("apply", str(tmp_path)):
            text = str(summary())
        assert f"on the schedules {tmp_path} holds now (digest {schedules_digest(str(tmp_path))[:12]}" in text
        assert "(their code is what the pass made" in str(summary())  # no pass in place: the plain line
    finally:
        counters["inductor"]["fxgraph_cache_hit"] = before
        reset_summary()
