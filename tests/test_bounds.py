"""Lower bounds: hand-computed cases, never above any valid order, tight vs brute force."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlapsat import GraphBuilder, lower_bound, simulate
from tests.helpers import all_valid_orders, graphs, random_graph, random_valid_order


def test_hand_computed():
    b = GraphBuilder()
    b.compute("a", 10, writes={"A": 1})
    b.collective("c", group="g", duration=30, reads=["A"], writes={"C": 1})
    b.compute("x", 20)
    b.wait("w", "c")
    b.compute("b", 5, reads=["C"])
    lb = lower_bound(b.build())
    assert lb.compute == 35
    assert lb.critical_path == 45  # a -> c -> w -> b
    assert lb.comm_runs == 45  # before(c)=10 + 30 + after(w)=5
    assert lb.makespan == 45 and lb.exposed == 10


def test_collective_duration_only_counts_through_its_wait():
    # x is ordered after c but does not wait for it: the path bound must not add c's 100
    b = GraphBuilder()
    b.collective("c", group="g", duration=100)
    b.compute("x", 10, after=["c"])
    b.wait("w", "c")
    g = b.build()
    assert lower_bound(g).critical_path == 100
    assert simulate(g, ["c", "x", "w"]).makespan == 100


def test_runs_of_one_group():
    b = GraphBuilder()
    b.compute("pre", 4, writes={"P": 1})
    b.collective("c1", group="g", duration=10, reads=["P"])
    b.collective("c2", group="g", duration=10)
    b.compute("free_work", 50)
    b.wait("w1", "c1")
    b.wait("w2", "c2")
    b.compute("post", 6, after=["w2"])
    lb = lower_bound(b.build())
    assert lb.comm_runs == 4 + 20 + 6


@settings(max_examples=200, deadline=None)
@given(graphs(max_nodes=16), st.integers(0, 10**6))
def test_never_above_any_valid_order(g, seed):
    lb = lower_bound(g)
    rng = random.Random(seed)
    for _ in range(5):
        assert lb.makespan <= simulate(g, random_valid_order(g, rng)).makespan + 1e-9


@pytest.mark.parametrize("seed", range(40))
def test_never_above_brute_force_optimum(seed):
    g = random_graph(seed, 8, groups=2, p_coll=0.35)
    best = min(simulate(g, o).makespan for o in all_valid_orders(g))
    assert lower_bound(g).makespan <= best + 1e-9


def test_comm_chain_sees_compute_between_collectives():
    # c1 -> w1 -> k (50 us) -> c2: the stream must idle while k runs
    b = GraphBuilder()
    b.collective("c1", group="g", duration=10, writes={"C1": 1})
    b.wait("w1", "c1")
    b.compute("k", 50, reads=["C1"], writes={"K": 1})
    b.collective("c2", group="g", duration=10, reads=["K"])
    b.wait("w2", "c2")
    g = b.build()
    lb = lower_bound(g)
    assert lb.comm_runs == 50 + 10  # before(c2) + d(c2)
    assert lb.comm_chain == 10 + 50 + 10  # end(c1) + lag + d(c2)
    assert lb.makespan == simulate(g).makespan == 70


@settings(max_examples=400, deadline=None)
@given(graphs(max_nodes=18, p_coll=0.4, groups=1), st.integers(0, 10**6))
def test_comm_chain_valid_single_group(g, seed):
    rng = random.Random(seed)
    lb = lower_bound(g)
    for _ in range(5):
        assert lb.comm_chain <= simulate(g, random_valid_order(g, rng)).makespan + 1e-9


@pytest.mark.parametrize("seed", range(40, 100))
def test_chain_bound_never_above_brute_force(seed):
    g = random_graph(seed, 8, groups=1, p_coll=0.45)
    best = min(simulate(g, o).makespan for o in all_valid_orders(g))
    assert lower_bound(g).makespan <= best + 1e-9


def _lags_graph(first: bool):
    """Two transfers of 10 us that a kernel of 5 us needs, then a third that needs the kernel (first=True), or
    the mirror image: one transfer, the kernel, then two (first=False). One group, so one stream."""
    b = GraphBuilder()
    if first:
        b.collective("a1", group="g", duration=10, writes={"A1": 1})
        b.collective("a2", group="g", duration=10, writes={"A2": 1})
        b.wait("w1", "a1")
        b.wait("w2", "a2")
        b.compute("k", 5, reads=["A1", "A2"], writes={"K": 1})
        b.collective("c", group="g", duration=10, reads=["K"], writes={"C": 1})
        b.wait("wc", "c")
    else:
        b.collective("c", group="g", duration=10, writes={"C": 1})
        b.wait("wc", "c")
        b.compute("k", 5, reads=["C"], writes={"K": 1, "L": 1})
        b.collective("d1", group="g", duration=10, reads=["K"], writes={"D1": 1})
        b.collective("d2", group="g", duration=10, reads=["L"], writes={"D2": 1})
        b.wait("w1", "d1")
        b.wait("w2", "d2")
    return b.build()


@pytest.mark.parametrize("first", [True, False])
def test_comm_lags_hand_computed(first):
    # the stream carries 30 us, but k must run between the two transfers it needs and the one that needs it:
    # 10 + 10 + 5 + 10 = 35 however they are ordered; the bounds before decision 53 stop at 30 at level free
    g = _lags_graph(first)
    lb = lower_bound(g, "free")
    assert max(lb.compute, lb.critical_path, lb.comm_runs, lb.comm_chain) == 30
    assert lb.comm_lags == pytest.approx(35, rel=1e-9) and lb.comm_lags <= 35
    best = min(simulate(g, o).makespan for o in all_valid_orders(g, "free"))
    assert best == 35


LEVELS = ("free", "group", "global", "chain")


def _lags_checked(seeds, make):
    """(graphs compared, graphs where comm_lags is above every other bound), asserting it is never above the
    brute-force optimum at level free, the least of every level's."""
    from overlapsat import Problem
    from overlapsat.bounds import comm_lags
    from tests.brute import brute_force

    compared = sharper = 0
    for seed in seeds:
        g, _ = make(seed)
        truth = brute_force(g, "free", limit=50_000)
        if truth is None:
            continue
        best = truth.best(None)
        p = Problem.of(g, "none", "free")
        lags = comm_lags(p.relaxed)
        assert lags <= best + 1e-9 * max(1.0, best), (seed, lags, best)
        old = lower_bound(p)
        compared += 1
        sharper += lags > max(old.compute, old.critical_path, old.comm_runs, old.comm_chain) * (1 + 1e-9)
    return compared, sharper


def test_comm_lags_never_above_brute_force():
    """Random graphs of every kind tests/brute.py makes (several groups and waits, launch and wait costs, atomic
    groups, fake edges), and the same moved to the edges (durations 1e-6 to 1e7 us)."""
    from tests.brute import edge_graph
    from tests.brute import random_graph as brute_graph

    compared, sharper = _lags_checked(range(400), brute_graph)
    assert compared > 250 and sharper > 10, (compared, sharper)
    compared, sharper = _lags_checked(range(1000, 1200), edge_graph)
    assert compared > 100 and sharper > 3, (compared, sharper)


def test_comm_lags_check_can_fail(monkeypatch):
    """The brute-force comparison catches a bound 5 % too high."""
    import overlapsat.bounds as bounds
    from tests.brute import random_graph as brute_graph

    monkeypatch.setattr(bounds, "LAG_SAFETY", -0.05)
    with pytest.raises(AssertionError):
        _lags_checked(range(400), brute_graph)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seed", range(0, 400, 7))
def test_every_level_bound_never_above_brute_force(level, seed):
    from overlapsat import Problem
    from tests.brute import brute_force
    from tests.brute import random_graph as brute_graph

    g, _ = brute_graph(seed)
    truth = brute_force(g, level, limit=50_000)
    if truth is None or truth.best(None) is None:
        pytest.skip("too many orders, or none at this level")
    best = truth.best(None)
    assert lower_bound(Problem.of(g, "none", level)).makespan <= best + 1e-9 * max(1.0, best)
