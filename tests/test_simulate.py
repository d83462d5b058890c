"""Simulator figures against hand-computed small graphs and an independent re-walk."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlapsat import GraphBuilder, GraphError, simulate
from tests.helpers import graphs, naive_makespan, naive_peak, random_valid_order


def chain(extra_compute: bool = False):
    b = GraphBuilder("chain")
    b.compute("a", 10, writes={"A": 8})
    b.collective("c", group="g", duration=30, reads=["A"], writes={"C": 16})
    if extra_compute:
        b.compute("x", 20)
    b.wait("w", "c")
    b.compute("b", 5, reads=["C"], writes={"B": 4}, outputs=["B"])
    return b.build()


def test_stall_fully_exposed():
    r = simulate(chain())
    # a [0,10); c [10,40); w stalls 30 -> t=40; b [40,45)
    assert r.start[r.graph.index["c"]] == 10 and r.end[r.graph.index["c"]] == 40
    assert r.stall[r.graph.index["w"]] == 30
    assert r.makespan == 45 and r.exposed == 30
    assert r.stream("c") == "g" and r.stream("a") == "compute"


def test_stall_partly_hidden():
    r = simulate(chain(extra_compute=True))
    # x hides 20 of 30: stall 10
    assert r.stall[r.graph.index["w"]] == 10
    assert r.makespan == 45 and r.exposed == pytest.approx(10)
    assert r.collective_exposure() == {"c": 10}


def two_groups(same: bool):
    b = GraphBuilder("two")
    b.collective("c1", group="g1", duration=30)
    b.collective("c2", group="g1" if same else "g2", duration=30)
    b.wait("w1", "c1")
    b.wait("w2", "c2")
    return b.build()


def test_two_groups_overlap():
    r = simulate(two_groups(same=False))
    assert r.makespan == 30  # both run on [0, 30)
    assert r.stall[r.graph.index["w1"]] == 30 and r.stall[r.graph.index["w2"]] == 0


def test_same_group_serialises():
    r = simulate(two_groups(same=True))
    assert r.start[r.graph.index["c2"]] == 30 and r.makespan == 60


def test_collective_starts_after_compute_issued_before_it():
    b = GraphBuilder()
    b.compute("a", 7)
    b.collective("c", group="g", duration=3)
    b.wait("w", "c")
    r = simulate(b.build())
    assert r.start[1] == 7 and r.makespan == 10


def test_collective_never_waited_counts_in_makespan():
    b = GraphBuilder()
    b.collective("c", group="g", duration=50)
    b.compute("a", 10)
    r = simulate(b.build())
    assert r.makespan == 50 and r.exposed == 40


def test_memory_curve_hand_computed():
    b = GraphBuilder("mem")
    b.input("X", 100, freeable=True)
    b.compute("a", 1, reads=["X"], writes={"A": 50})
    b.compute("b", 1, reads=["X", "A"], writes={"B": 20})
    b.compute("c", 1, reads=["A", "B"], writes={"C": 10}, outputs=["C"])
    r = simulate(b.build())
    assert r.mem_post_alloc == [150, 170, 80]
    assert r.mem_post_free == [150, 70, 10]
    assert r.peak_memory == 170


def test_multi_output_buffers():
    # Inductor's MultiOutputLayout: the parent allocates 30 and frees 0; the views free 10 and 20
    b = GraphBuilder("multi")
    b.compute("m", 1, writes={"buf0": (30, 0), "buf1": (0, 10), "buf2": (0, 20)})
    b.compute("u1", 1, reads=["buf0", "buf1"], writes={"o1": 1}, outputs=["o1"])
    b.compute("u2", 1, reads=["buf2"], writes={"o2": 1}, outputs=["o2"])
    r = simulate(b.build())
    assert r.mem_post_alloc == [30, 31, 22]
    assert r.mem_post_free == [30, 21, 2]


def test_unconsumed_buffer_freed_at_producer_and_parameters_ignored():
    b = GraphBuilder()
    b.input("W", 10**9)  # parameter: constant, left out
    b.compute("a", 1, reads=["W"], writes={"tmp": 40})
    b.compute("b", 1, writes={"keep": 5}, outputs=["keep"])
    r = simulate(b.build())
    assert r.mem_post_alloc == [40, 5] and r.mem_post_free == [0, 5]


def test_freeable_input_that_is_output_is_never_freed():
    b = GraphBuilder()
    b.input("X", 7, freeable=True, output=True)
    b.compute("a", 1, reads=["X"], writes={"A": 3})
    r = simulate(b.build())
    assert r.mem_post_free == [7]


def test_collective_buffer_lives_until_wait_users():
    b = GraphBuilder()
    b.collective("c", group="g", duration=5, writes={"C": 100})
    b.compute("x", 1, writes={"X": 1}, outputs=["X"])
    b.wait("w", "c")
    b.compute("u", 1, reads=["C"], writes={"U": 1}, outputs=["U"])
    r = simulate(b.build(), ["c", "x", "w", "u"])
    assert r.mem_post_alloc == [100, 101, 101, 102]
    assert r.mem_post_free[-1] == 2


def test_rejects_non_permutation_and_wait_before_collective():
    g = chain()
    with pytest.raises(GraphError, match="misses"):
        simulate(g, ["a", "c", "w"])
    with pytest.raises(GraphError, match="repeats"):
        simulate(g, ["a", "c", "w", "b", "b"])
    with pytest.raises(GraphError, match="unknown"):
        simulate(g, ["a", "c", "w", "zz"])
    with pytest.raises(GraphError, match="'w' comes before its collective 'c'"):
        simulate(g, ["a", "w", "c", "b"])


@settings(max_examples=150, deadline=None)
@given(graphs(max_nodes=14), st.integers(0, 1000))
def test_matches_independent_rewalk(g, seed):
    import random

    order = random_valid_order(g, random.Random(seed))
    r = simulate(g, order)
    assert r.makespan == pytest.approx(naive_makespan(g, order))
    assert r.peak_memory == naive_peak(g, order)
    assert r.exposed >= -1e-9


def test_makespan_fast_path_matches_the_simulator():
    import random

    from overlapsat.simulate import makespan_of
    from tests.helpers import random_graph, random_valid_order

    for seed in range(40):
        g = random_graph(seed, 14, leave_unwaited=seed % 2 == 0)
        order = random_valid_order(g, random.Random(seed))
        assert makespan_of(g, order) == simulate(g, order).makespan


def test_vectorised_walk_matches_an_independent_step_by_step_walk():
    """The numpy simulator against tests/brute.py's own walk, written from MODEL.md, on random graphs and orders."""
    import random

    from overlapsat.simulate import makespan_of, peak_of
    from tests.brute import random_graph, sim
    from tests.helpers import random_valid_order

    checked = 0
    for seed in range(400):
        g, _ = random_graph(seed, max_nodes=14)
        rng = random.Random(seed)
        for _ in range(3):
            order = random_valid_order(g, rng, collective_order="free")
            ms, pk = sim(g, order)
            r = simulate(g, order)
            assert abs(r.makespan - ms) <= 1e-9 * max(1.0, ms) and r.peak_memory == pk
            assert makespan_of(g, order) == r.makespan and peak_of(g, order) == pk
            assert max(r.end, default=0.0) <= r.makespan + 1e-9
            checked += 1
    assert checked == 1200
