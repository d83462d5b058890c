"""Cost model: hand-computed figures, monotonicity, interpolation, profiles, repricing, interference."""

import json
import math

import pytest

from overlapsat import GraphBuilder, GraphError, simulate
from overlapsat.cost import (
    AnalyticalCostModel,
    Table,
    builtin_calibration,
    builtin_profiles,
    cost_model,
    estimate,
    load_calibration,
    load_profile,
    reprice,
)
from overlapsat.cost.interference import Interference, simulate_contended, simulate_with_interference
from overlapsat.graph import COMPUTE, WAIT, Node, NodeKind


def test_nccl_model_hand_computed():
    hw = load_profile("h200")
    # all_reduce, 2 ranks, 1 GiB: ring/Simple; bus 370 GB/s, alg bw 370 * 2/2;
    # latency 8.4 + 2 steps * 3.4 us
    e = estimate("all_reduce", 2**30, 2, hw)
    assert (e.algo, e.proto) == ("ring", "Simple")
    assert e.time_us == pytest.approx(8.4 + 2 * 3.4 + 2**30 / (1e3 * 370), rel=1e-9)
    # all_gather, 8 ranks, 64 MiB: alg bw = 370 * 8/7; 7 steps
    e = estimate("all_gather", 64 * 2**20, 8, hw)
    assert e.time_us == pytest.approx(8.4 + 7 * 3.4 + 64 * 2**20 / (1e3 * 370 * 8 / 7), rel=1e-9)
    # tiny messages go to LL: base 6.6 + 1 step * 0.6 + bytes / (min(141, 185) * 2)
    e = estimate("all_gather", 1024, 2, hw)
    assert e.proto == "LL" and e.time_us == pytest.approx(6.6 + 0.6 + 1024 / (1e3 * 141 * 2), rel=1e-9)
    assert estimate("all_reduce", 2**20, 1, hw).time_us == 0.0


def test_roofline_hand_computed():
    m = AnalyticalCostModel(load_profile("h200"))
    # compute bound: 1e12 FLOP at 0.8 * 989 TFLOP/s, plus the 4 us floor
    assert m.compute_us(1e12, 0) == pytest.approx(1e12 / (989e12 * 0.8) * 1e6 + 4.0)
    # memory bound: 4.8e9 B at 0.85 * 4.8 TB/s
    assert m.compute_us(1e6, 4.8e9) == pytest.approx(1e3 / 0.85 + 4.0)


@pytest.mark.parametrize("name", sorted(builtin_profiles()))
@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast"])
@pytest.mark.parametrize("n", [2, 8, 16, 64])
def test_monotonic_in_size(name, op, n):
    hw = load_profile(name)
    sizes = [2**k for k in range(8, 33)]
    ts = [estimate(op, s, n, hw).time_us for s in sizes]
    assert all(a <= b + 1e-9 for a, b in zip(ts, ts[1:]))
    model = cost_model(name)
    ts = [model.duration(Node("c", NodeKind.COLLECTIVE, group="g", op=op, nbytes=s, group_size=n)) for s in sizes]
    assert all(a <= b + 1e-9 for a, b in zip(ts, ts[1:]))


def test_multi_node_slower_than_single_node():
    hw = load_profile("h100_sxm")
    assert estimate("all_reduce", 2**28, 16, hw).time_us > estimate("all_reduce", 2**28, 8, hw).time_us


def test_interpolation_exact_at_points_and_between():
    t = Table.from_points([(1e3, 10.0), (1e6, 100.0), (1e9, 1e4)])
    for x, y in zip(t.xs, t.us):
        assert t(x) == y
    assert t(math.sqrt(1e3 * 1e6)) == pytest.approx(math.sqrt(10 * 100))  # log-log midpoint
    assert t(2e9, model=lambda b: b / 1e5) == pytest.approx(2e9 / 1e5 * (1e4 / (1e9 / 1e5)))


def test_shipped_calibration_exact_at_its_points():
    cal = builtin_calibration("h200")
    model = cost_model("h200")
    for (op, n), table in cal.collectives.items():
        for b, us in zip(table.xs, table.us):
            node = Node("c", NodeKind.COLLECTIVE, group="g", op=op, nbytes=int(b), group_size=n)
            assert model.duration(node) == pytest.approx(us)


def test_calibration_tables_are_made_monotonic():
    from overlapsat.cost.calibration import _merge_points

    pts = _merge_points([(1, 8.0), (2, 6.0), (4, 7.0), (8, 9.0), (8, 11.0), (16, 20.0)])
    assert [x for x, _ in pts] == [1, 2, 4, 8, 16]
    ys = [y for _, y in pts]
    assert ys == sorted(ys) and ys[-1] == 20.0 and ys[0] == pytest.approx(7.0)


def test_table_rejects_bad_points():
    with pytest.raises(GraphError, match="positive and finite"):
        Table.from_points([(1.0, -1.0)])
    with pytest.raises(GraphError, match="strictly increasing"):
        Table((2.0, 1.0), (1.0, 1.0))


def test_profiles_load_and_reject_malformed(tmp_path):
    assert {"h100_sxm", "h100_pcie", "h200", "a100_sxm", "a100_pcie", "b200"} <= set(builtin_profiles())
    good = dict(name="mine", arch="hopper", peak_flops={"bf16": 1e15}, hbm_bw=3e12, nvlink_bw=4e11, net_bw=5e10)
    p = tmp_path / "p.json"
    p.write_text(json.dumps(good))
    assert load_profile(str(p)).name == "mine"
    cases = [
        ({**good, "arch": "pascal"}, "arch must be one of"),
        ({**good, "hbm_bw": -1}, "hbm_bw must be a finite number > 0"),
        ({**good, "flops_efficiency": 1.5}, "flops_efficiency is a fraction"),
        ({**good, "gpus_per_node": 0}, "gpus_per_node must be a positive integer"),
        ({**good, "bogus": 1}, "unknown field"),
        ({k: v for k, v in good.items() if k != "nvlink_bw"}, "misses field"),
    ]
    for d, msg in cases:
        p.write_text(json.dumps(d))
        with pytest.raises(GraphError, match=msg) as ei:
            load_profile(str(p))
        assert "p.json" in str(ei.value)
    p.write_text("{nope")
    with pytest.raises(GraphError, match="not valid JSON"):
        load_profile(str(p))
    with pytest.raises(GraphError, match="no hardware profile 'tpu'"):
        load_profile("tpu")
    with pytest.raises(GraphError, match="no peak FLOP/s for dtype 'int4'"):
        load_profile("h200").flops("int4")


def test_bad_calibration_file(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"format": "overlapsat-calibration", "version": 1, "profile": "x",
                             "collectives": [{"op": "all_reduce", "group_size": 2, "bytes": [1, 2], "us": [1]}]}))
    with pytest.raises(GraphError, match="c.json"):
        load_calibration(str(p))


def test_reprice_with_user_model():
    b = GraphBuilder()
    b.compute("a", 1.0, flops=2e12)
    b.collective("c", group="g", op="all_reduce", nbytes=2**20, group_size=2)
    b.wait("w", "c")
    g = b.build()

    class Flat:
        def duration(self, node):
            return 7.0

    h = g.reprice(Flat())
    assert [n.duration for n in h.nodes] == [7.0, 7.0, 0.0]
    h2 = reprice(g, cost_model("h200", calibrated=False))
    assert h2.node("a").duration == pytest.approx(2e12 / (989e12 * 0.8) * 1e6 + 4.0, rel=1e-4)

    class Bad:
        def duration(self, node):
            return -1.0

    with pytest.raises(GraphError, match="node 'a'"):
        g.reprice(Bad())
    with pytest.raises(GraphError, match="not a cost model"):
        reprice(g, object())


def _beside(transfer: float, compute: float):
    """A collective c, a kernel x beside it, and c's wait w."""
    b = GraphBuilder()
    b.collective("c", group="g", duration=transfer)
    b.compute("x", compute)
    b.wait("w", "c")
    return b.build()


def test_interference_hand_computed():
    g = _beside(10.0, 10.0)
    assert simulate(g).makespan == 10
    r = simulate_with_interference(g, None, Interference(compute_slowdown=1.5, comm_slowdown=1.2))
    # x overlapped the transfer for all 10 us -> 15; the transfer overlapped compute for 10 us -> 12
    assert r.makespan == pytest.approx(15.0)
    assert r.end[g.index["c"]] == pytest.approx(12.0)
    assert simulate_with_interference(g, None, Interference()).makespan == 10
    with pytest.raises(GraphError):
        Interference(compute_slowdown=0.5)


def test_contended_hand_computed():
    """Both streams at their contended rates until one finishes, then alone (figures worked by hand)."""
    g = _beside(10.0, 10.0)
    # x at 1/1.5 and c at 1/1.2: c ends at 12, when x has done 8 of 10; x's last 2 run alone -> 14
    r = simulate_contended(g, None, Interference(compute_slowdown=1.5, comm_slowdown=1.2))
    assert (r.makespan, r.exposed, r.compute_busy, r.comm_busy) == pytest.approx((14.0, 0.0, 14.0, 12.0))
    assert r.end[g.index["c"]] == pytest.approx(12.0)
    g = _beside(10.0, 4.0)
    # x at 1/2 ends at 8; c at 1/1.5 has done 16/3 by then, and its last 14/3 run alone and exposed
    r = simulate_contended(g, None, Interference(compute_slowdown=2.0, comm_slowdown=1.5))
    assert (r.makespan, r.exposed, r.compute_busy) == pytest.approx((8 + 14 / 3, 14 / 3, 8.0))
    g = _beside(1.0, 1.0)
    with pytest.raises(GraphError, match="before its collective"):
        simulate_contended(g, ["w", "c", "x"], Interference())


def test_contended_without_slowdown_is_the_plain_walk():
    """At factors of 1 the contended walk is MODEL.md's (tests/brute.py's graphs: several groups, coalesced
    collectives, launch and wait costs, unwaited collectives), node by node, with the profiler's exposure."""
    from tests.brute import random_graph

    for seed in range(300):
        g, _ = random_graph(seed, max_nodes=12)
        ref = simulate(g)
        r = simulate_contended(g, None, Interference())
        assert r.makespan == pytest.approx(ref.makespan, abs=1e-9), seed
        assert r.exposed == pytest.approx(ref.exposed, abs=1e-9), seed
        assert r.compute_busy == pytest.approx(g.compute_total, abs=1e-9), seed
        for v in range(len(g.nodes)):
            assert r.end[v] == pytest.approx(ref.end[v], abs=1e-9), (seed, v)
            if g.kind[v] != WAIT:  # the plain walk dates a wait from its issue, this one from its stall's end
                assert r.start[v] == pytest.approx(ref.start[v], abs=1e-9), (seed, v)
        slow = simulate_contended(g, None, Interference(1.4, 1.7))
        assert slow.compute_busy >= g.compute_total - 1e-9
        assert slow.compute_busy <= 1.4 * g.compute_total + 1e-9
        assert slow.makespan == pytest.approx(slow.compute_busy + slow.exposed, abs=1e-9)
        # every rate lies in [1/1.7, 1], so each event is no earlier than in the plain walk and no later
        # than in the plain walk with every duration 1.7 times longer
        assert ref.makespan - 1e-9 <= slow.makespan <= 1.7 * ref.makespan + 1e-9, seed


def _gemm_beside(transfer: float, compute: float, flops: float):
    """As _beside, with x a GEMM of `flops`."""
    b = GraphBuilder()
    b.collective("c", group="g", duration=transfer)
    b.compute("x", compute, flops=flops, gemm_like=True)
    b.wait("w", "c")
    return b.build()


def test_gemm_priced_by_size_hand_computed():
    """A GEMM's own factor from the (flops, factor) table; other compute keeps compute_slowdown."""
    table = ((1e9, 2.0), (1e12, 1.25))
    inter = Interference(1.5, 1.2, table)
    assert inter.gemm_factor(1e6) == 2.0 and inter.gemm_factor(1e15) == 1.25  # flat beyond the ends
    assert inter.gemm_factor(1e9) == 2.0 and inter.gemm_factor(1e12) == 1.25
    # log-linear: 10^10.5 is half-way in log(flops) from 1e9 to 1e12
    assert inter.gemm_factor(10 ** 10.5) == pytest.approx(2.0 - 0.5 * 0.75)
    assert inter.gemm_factor(0.0) == 1.5  # a GEMM of unknown size
    # x at 1/2 (1e9 flops): c at 1/1.2 ends at 12, x has done 6 of 10; its last 4 alone -> 16
    r = simulate_contended(_gemm_beside(10.0, 10.0, 1e9), None, inter)
    assert (r.makespan, r.exposed, r.compute_busy) == pytest.approx((16.0, 0.0, 16.0))
    # the same kernel not GEMM-like keeps 1.5 (test_contended_hand_computed: 14)
    assert simulate_contended(_beside(10.0, 10.0), None, inter).makespan == pytest.approx(14.0)
    # a large GEMM at 1.25: c ends at 12, x has done 9.6; 0.4 alone -> 12.4
    r = simulate_contended(_gemm_beside(10.0, 10.0, 1e13), None, inter)
    assert r.makespan == pytest.approx(12.4)


def test_gemm_table_of_one_factor_is_the_scalar_model():
    """A table that prices every GEMM at compute_slowdown changes nothing (random graphs; GEMM-like marks and
    sizes set on some compute nodes)."""
    import dataclasses

    from tests.brute import random_graph

    inter = Interference(1.4, 1.7)
    flat = Interference(1.4, 1.7, ((1e6, 1.4), (1e12, 1.4)))
    for seed in range(100):
        g, _ = random_graph(seed, max_nodes=12)
        nodes = tuple(dataclasses.replace(nd, flops=1e3 * (i + 1) ** 4, gemm_like=i % 2 == 0)
                      if g.kind[i] == COMPUTE else nd for i, nd in enumerate(g.nodes))
        g = dataclasses.replace(g, nodes=nodes)
        a, b = simulate_contended(g, None, inter), simulate_contended(g, None, flat)
        assert (a.makespan, a.exposed, a.compute_busy) == pytest.approx((b.makespan, b.exposed, b.compute_busy),
                                                                        abs=1e-9), seed
        # a table that varies: every rate still lies in [1/max(f), 1], so the makespan stays between the plain
        # walk's and max(f) times it
        varied = simulate_contended(g, None, Interference(1.1, 1.3, ((1e4, 2.5), (1e6, 1.2))))
        ref = simulate(g).makespan
        assert ref - 1e-9 <= varied.makespan <= 2.5 * ref + 1e-9, seed


@pytest.mark.parametrize("table, match", [
    ([(1e9, 2.0)], "tuple of"), (((1e9, 2.0, 3.0),), "tuple of"), (((0.0, 2.0),), "positive"),
    (((float("inf"), 2.0),), "positive"), (((1e9, 0.5),), r"\[1, 100\)"), (((1e9, True),), r"\[1, 100\)"),
    (((1e9, 2.0), (1e9, 1.5)), "increase"), (((1e12, 2.0), (1e9, 1.5)), "increase"),
])
def test_gemm_table_is_validated(table, match):
    with pytest.raises(GraphError, match=match):
        Interference(1.5, 1.2, table)


def test_repeats_merge_to_their_median():
    """Two repeats give their mean, three their middle value (it took the larger of two once: #13)."""
    from overlapsat.cost.calibration import _merge_points

    assert _merge_points([(8, 9.0), (8, 11.0)]) == [(8.0, 10.0)]
    assert _merge_points([(8, 9.0), (8, 30.0), (8, 11.0)]) == [(8.0, 11.0)]


def test_h200_host40_is_h200_with_the_issue_priced():
    """The built-in that torchtitan's Llama3 plans ran with (benchmarks/gpu/h200_cal_host40.json): h200's tables
    price every node as for h200, and only the issue's and the group call's latencies differ."""
    import json
    import os

    from overlapsat.cost import cost_model
    from overlapsat.examples import bundled
    from overlapsat.io import load_graph

    plain, host = cost_model("h200"), cost_model("h200_host40")
    assert type(host).__name__ == "CalibratedCostModel" and host.hw.calibrated_as == "h200"
    assert (host.hw.collective_launch_us, host.hw.group_member_us) == (40.0, 10.5)
    g = load_graph(bundled("tp_small"))
    assert [host.duration(n) for n in g.nodes] == [plain.duration(n) for n in g.nodes]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "benchmarks", "gpu", "h200_cal_host40.json"), encoding="utf-8") as f:
        ran = json.load(f)
    for k in ("collective_launch_us", "group_member_us", "hbm_bw", "nvlink_bw", "flops_efficiency",
              "link_efficiency", "kernel_floor_us", "peak_flops"):
        assert getattr(host.hw, k) == ran[k], k


def test_calibrated_as_names_a_profile():
    from overlapsat.cost.hardware import profile_from_dict

    d = {"name": "x", "arch": "hopper", "peak_flops": {"bf16": 1e15}, "hbm_bw": 1e12, "nvlink_bw": 1e11,
         "net_bw": 1e10, "calibrated_as": ""}
    with pytest.raises(GraphError, match="calibrated_as must be a profile name"):
        profile_from_dict(d)


def test_a_built_ins_twin_without_its_tables_is_said_once(tmp_path, caplog):
    """A profile file with h200's GPU figures under its own name is priced by the analytical model alone (tables go
    by name): said once, naming the built-in and the field that fixes it; with `calibrated_as`, silent and tabled."""
    import dataclasses
    import json
    import logging

    from overlapsat.cost import cost_model
    from overlapsat.cost.hardware import load_profile
    from overlapsat.cost.model import _TWINS_CHECKED

    d = dataclasses.asdict(load_profile("h200"))
    d.update(name="my_h200_twin", collective_launch_us=25.0)
    twin = tmp_path / "twin.json"
    twin.write_text(json.dumps(d))
    _TWINS_CHECKED.discard("my_h200_twin")
    with caplog.at_level(logging.WARNING, logger="overlapsat.cost.model"):
        assert type(cost_model(str(twin))).__name__ == "AnalyticalCostModel"
        cost_model(str(twin))
    said = [r.getMessage() for r in caplog.records if "my_h200_twin" in r.getMessage()]
    assert len(said) == 1 and "'h200'" in said[0] and '"calibrated_as": \'h200\'' in said[0]
    caplog.clear()
    d.update(name="my_h200_tabled", calibrated_as="h200")
    tabled = tmp_path / "tabled.json"
    tabled.write_text(json.dumps(d))
    with caplog.at_level(logging.WARNING, logger="overlapsat.cost.model"):
        assert type(cost_model(str(tabled))).__name__ == "CalibratedCostModel"
        cost_model("h100_sxm")  # no tables ship for it: nothing to miss
    assert not caplog.records


def test_calibrated_as_must_name_shipped_tables():
    """A profile that asks for tables that do not ship is refused by name, not priced silently without them."""
    from overlapsat.cost import cost_model
    from overlapsat.cost.hardware import profile_from_dict

    d = {"name": "x", "arch": "hopper", "peak_flops": {"bf16": 1e15}, "hbm_bw": 1e12, "nvlink_bw": 1e11,
         "net_bw": 1e10, "calibrated_as": "h20"}
    with pytest.raises(GraphError, match=r"calibrated_as 'h20' names no calibration tables .*ship for: h200"):
        cost_model(profile_from_dict(d))
    assert type(cost_model(profile_from_dict(d), calibrated=False)).__name__ == "AnalyticalCostModel"
