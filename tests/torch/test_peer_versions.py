"""torch's OverlapScheduler as a peer on the torch the GPU machines have (2.11) as on 2.13: the estimator it reads,
the keywords it takes, and the 0-byte latency it asserts. Checked against real torch 2.11 on 2026-11-30 (the
peer tests of test_fx.py and test_bucketing.py pass there); here the 2.11 module is imitated on this torch."""

import types

import pytest

pytest.importorskip("torch")


def _older_torch(calls: list) -> types.SimpleNamespace:
    """A module shaped like torch 2.11's overlap_scheduling: no roofline estimator, compute benchmarked, estimates
    aligned across ranks, and no compute_estimator or pre-bucketing keyword."""

    class OverlapScheduler:
        def _align_compute_nodes_runtime_estimations_across_all_distributed_ranks(self):
            calls.append("all_gather_object")  # what would hang a solve that runs on one rank

    def schedule_overlap_bucketing(gm, collective_bucketing=False, custom_runtime_estimation=None):
        OverlapScheduler()._align_compute_nodes_runtime_estimations_across_all_distributed_ranks()
        calls.append(("scheduled", collective_bucketing, mod.benchmark_node_with_cache_key(gm)))
        return gm

    mod = types.SimpleNamespace(MemoryTracker=object, OverlapScheduler=OverlapScheduler,
                                benchmark_node_with_cache_key=lambda n, *_: (99.0, "key"),
                                schedule_overlap_bucketing=schedule_overlap_bucketing)
    return mod


def test_an_older_torch_gets_overlapsats_durations_and_no_rank_alignment(monkeypatch):
    import torch._inductor.fx_passes as fx_passes

    from overlapsat.torch import fx_peer

    calls: list = []
    old = _older_torch(calls)
    monkeypatch.setattr(fx_passes, "overlap_scheduling", old, raising=False)
    monkeypatch.setitem(__import__("sys").modules, "torch._inductor.fx_passes.overlap_scheduling", old)
    monkeypatch.setitem(__import__("sys").modules, "torch._inductor.fx_passes.memory_estimator",
                        types.SimpleNamespace(MemoryTracker=object))
    node = types.SimpleNamespace(name="mm_1")
    with fx_peer.on_overlapsat_terms({"mm_1": 2.5}):
        fx_peer._schedule(node, collective_bucketing=True, pre_bucketing_fsdp_collectives=True,
                          compute_estimator="analytical", custom_runtime_estimation=None)
    assert calls == [("scheduled", True, (2.5, None))]  # no all_gather, overlapsat's duration, unknown keys left out
    assert old.benchmark_node_with_cache_key(node) == (99.0, "key")  # put back afterwards
    old.OverlapScheduler()._align_compute_nodes_runtime_estimations_across_all_distributed_ranks()
    assert calls[-1] == "all_gather_object"


def test_the_zero_byte_latency_is_at_most_the_collectives_duration():
    """torch 2.11 asserts a bucketed collective's 0-byte latency is at most its exposed time (2.13 clamps): the
    estimate gives torch's latency, capped by overlapsat's duration; other sizes stay torch's own (None)."""
    from overlapsat.torch.fx_peer import _bucketed_estimate

    osched = types.SimpleNamespace(estimate_collective_time=lambda n, size: 0.040)
    n = types.SimpleNamespace(name="ag")
    assert _bucketed_estimate(osched, {"ag": 0.010}, n, 0) == 0.010
    assert _bucketed_estimate(osched, {"ag": 0.500}, n, 0) == 0.040
    assert _bucketed_estimate(osched, {"ag": 0.500}, n, None) == 0.500
    assert _bucketed_estimate(osched, {"ag": 0.500}, n, 1 << 20) is None
    assert _bucketed_estimate(osched, {}, n, 0) is None
