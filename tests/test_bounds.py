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
