"""A wait's own time and a collective's launch on the compute stream (docs/decisions.md 17).

Figures are worked out by hand from the rule:
  collective: t += launch, then its transfer starts at max(t, free[g]);
  wait:       t = max(t, end(c)) + its own duration.
"""

import pytest
from ortools.sat.python import cp_model

import overlapsat as osat
from overlapsat import GraphBuilder, GraphError, Problem, simulate
from overlapsat.bounds import comm_load, comm_runs, critical_path, lower_bound
from overlapsat.io import graph_from_dict, graph_to_dict
from overlapsat.solver import build, choose_scale, model_units
from overlapsat.solver.units import safe_horizon
from tests.brute import brute_force


def one_collective():
    """k1 (2) -> c (launch 1, transfer 5) ; k2 (3) ; w (own 2) ; k3 (1) reads c's output."""
    b = GraphBuilder()
    b.compute("k1", 2.0, writes={"A": 4})
    b.collective("c", group="g", duration=5.0, launch=1.0, reads=["A"], writes={"C": 8})
    b.compute("k2", 3.0, writes={"X": 2})
    b.wait("w", "c", duration=2.0)
    b.compute("k3", 1.0, reads=["C", "X"], writes={"O": 1}, outputs=["O"])
    return b.build()


def two_in_one_group():
    b = GraphBuilder()
    b.collective("c1", group="g", duration=4.0, launch=1.0)
    b.collective("c2", group="g", duration=4.0, launch=1.0)
    b.wait("w1", "c1")
    b.wait("w2", "c2", duration=1.0)
    return b.build()


def test_hand_computed_walk():
    g = one_collective()
    r = simulate(g)
    # k1 [0,2); c launched [2,3), transfer [3,8); k2 [3,6); w stalls 2 then runs [8,10); k3 [10,11)
    assert r.makespan == 11.0
    assert g.compute_total == 2 + 1 + 3 + 2 + 1
    assert r.exposed == 2.0
    c, w = g.index["c"], g.index["w"]
    assert (r.start[c], r.end[c]) == (3.0, 8.0)
    assert r.stall[w] == 2.0 and r.end[w] == 10.0


def test_a_group_stream_queues_after_launches():
    g = two_in_one_group()
    r = simulate(g)
    # c1 launched [0,1), transfer [1,5); c2 launched [1,2), queued: transfer [5,9); w1 at 5; w2 at 9, own 1 -> 10
    assert [r.start[g.index[c]] for c in ("c1", "c2")] == [1.0, 5.0]
    assert r.makespan == 10.0


def test_a_graph_without_costs_is_unchanged():
    b = GraphBuilder()
    b.compute("k", 2.0)
    b.collective("c", group="g", duration=5.0)
    b.wait("w", "c")
    g = b.build()
    assert not g.has_stream_costs and simulate(g).makespan == 7.0 and g.compute_total == 2.0


def test_bounds_count_launches_and_waits():
    g = one_collective()
    lb = lower_bound(g)
    assert lb.compute == 9.0
    # k1 -> launch -> transfer (ends 8) -> w's own time (10) -> k3 (11): every order takes 11
    assert critical_path(g) == 11.0
    # before c's transfer: k1 and its launch (3); transfer 5; after it: w's own 2 and k3's 1
    assert comm_runs(g) == 11.0
    assert comm_load(g) == 11.0
    truth = brute_force(g, "group")
    assert lb.makespan <= truth.best(None) == 11.0


def test_optimize_proves_the_hand_optimum():
    """Two layers: the best order issues both collectives first; the launches and the waits' time are paid
    either way, so the optimum is compute-stream work plus what no order can hide."""
    b = GraphBuilder()
    b.compute("p1", 1.0, writes={"P1": 1})
    b.collective("ag1", group="g", duration=4.0, launch=1.0, reads=["P1"], writes={"G1": 1})
    b.wait("w1", "ag1", duration=1.0)
    b.compute("f1", 3.0, reads=["G1"], writes={"F1": 1})
    b.compute("p2", 1.0, writes={"P2": 1})
    b.collective("ag2", group="g", duration=4.0, launch=1.0, reads=["P2"], writes={"G2": 1})
    b.wait("w2", "ag2", duration=1.0)
    b.compute("f2", 3.0, reads=["G2", "F1"], writes={"F2": 1}, outputs=["F2"])
    g = b.build()
    # input order: p1 1, launch 2, stall to 6, w1 7, f1 10, p2 11, launch 12, stall to 16, w2 17, f2 20
    assert simulate(g).makespan == 20.0
    truth = brute_force(g, "group")
    best = truth.best(None)
    # p1, ag1, p2, ag2: launches end at 4; ag1 [2,6), ag2 [6,10); w1 [6,7); f1 [7,10); w2 [10,11); f2 [11,14).
    # No order does better: p1 and ag1's launch (2) + both transfers (8) + w2's own time and f2 (4) = 14.
    assert best == 14.0 and lower_bound(g).comm_runs == 14.0
    r = osat.optimize(g, time_limit=10, workers=1)
    assert r.proven and r.makespan == 14.0 and simulate(g, r.order).makespan == 14.0


def test_model_units_bracket_the_simulation():
    g = one_collective()
    ts = choose_scale(g)
    for order in ([0, 1, 2, 3, 4], [0, 2, 1, 3, 4]):
        units = model_units(g, order, ts)
        sim = simulate(g, order).makespan
        assert ts.k * sim * ts.steps_per_us <= units <= ts.k * sim * ts.steps_per_us + ts.unit_slots


def _solve(g, extra):
    ts = choose_scale(g)
    md = build(Problem(g), ts, list(range(len(g))), horizon=safe_horizon(g, ts))
    md.m.clear_hints()
    extra(md, ts)
    s = cp_model.CpSolver()
    s.parameters.catch_sigint_signal = False  # OR-Tools' handler would outlive the solve
    s.parameters.num_workers = 1
    return s.solve(md.m) != cp_model.INFEASIBLE


def test_model_transfer_starts_after_the_launch():
    g = one_collective()
    c = g.index["c"]
    assert _solve(g, lambda md, ts: md.m.add(md.comm_start[c] == md.issue[c] + ts.work(g, c)))
    assert not _solve(g, lambda md, ts: md.m.add(md.comm_start[c] < md.issue[c] + ts.work(g, c)))


def test_model_wait_runs_its_own_time_after_the_transfer():
    g = one_collective()
    c, w = g.index["c"], g.index["w"]
    end = lambda md, ts: md.comm_start[c] + ts.transfer(g, c) + ts.work(g, w)  # noqa: E731
    assert _solve(g, lambda md, ts: md.m.add(md.wait_end[w] == end(md, ts)))
    assert not _solve(g, lambda md, ts: md.m.add(md.wait_end[w] < end(md, ts)))


def test_model_launch_occupies_the_compute_stream():
    g = one_collective()
    c, k2 = g.index["c"], g.index["k2"]
    assert _solve(g, lambda md, ts: md.m.add(md.issue[k2] == md.issue[c] + ts.work(g, c)))
    assert not _solve(g, lambda md, ts: md.m.add(md.issue[k2] == md.issue[c] + ts.work(g, c) - 1))


def test_format_version_3_round_trip_and_older_versions_refuse_costs():
    g = one_collective()
    d = graph_to_dict(g)
    assert d["version"] == 3
    h = graph_from_dict(d)
    assert h.fingerprint() == g.fingerprint() and simulate(h).makespan == 11.0
    old = dict(d, version=2)
    with pytest.raises(GraphError, match="launch costs need graph format version 3"):
        graph_from_dict(old)
    nodes = [dict(n) for n in d["nodes"]]
    for n in nodes:
        n.pop("launch", None)
    with pytest.raises(GraphError, match="a wait costs nothing before graph format version 3"):
        graph_from_dict(dict(d, version=1, nodes=nodes))


def test_fingerprint_sees_costs():
    b = GraphBuilder()
    b.collective("c", group="g", duration=5.0, launch=1.0)
    b.wait("w", "c")
    with_launch = b.build()
    b = GraphBuilder()
    b.collective("c", group="g", duration=5.0)
    b.wait("w", "c")
    assert with_launch.fingerprint() != b.build().fingerprint()


def test_with_stream_costs_prices_every_collective_and_wait():
    b = GraphBuilder()
    b.compute("k", 2.0)
    b.collective("c", group="g", duration=5.0)
    b.wait("w", "c")
    g = b.build().with_stream_costs(1.0, 0.5)
    assert g.node("c").launch == 1.0 and g.node("w").duration == 0.5 and g.node("k").launch == 0.0
    assert simulate(g).makespan == 2 + 1 + 5 + 0.5


def test_with_comm_scale_stretches_transfers_only():
    g = one_collective().with_comm_scale(1.5)
    assert g.node("c").duration == 7.5 and g.node("k1").duration == 2.0 and g.node("c").launch == 1.0
    assert simulate(g).makespan == 2 + 1 + 7.5 + 2 + 1  # the transfer ends at 10.5, then w and k3
