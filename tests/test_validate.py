"""The validator finds every kind of violation, all of them, with node names."""

import pytest

from overlapsat import GraphBuilder, GraphError, MemoryBudget, is_valid, validate


def graph():
    b = GraphBuilder("v")
    b.compute("a", 1, writes={"A": 10})
    b.collective("c1", group="g1", duration=5, reads=["A"], writes={"C1": 10})
    b.collective("c2", group="g2", duration=5, writes={"C2": 10})
    b.wait("w1", "c1")
    b.wait("w2", "c2")
    b.compute("x", 1, writes={"X": 1})
    b.compute("y", 1, reads=["X", "C1", "C2"], writes={"Y": 1}, outputs=["Y"])
    b.atomic("x", "y")
    return b.build()


def kinds(vs):
    return sorted({v.kind for v in vs})


def test_input_order_valid():
    g = graph()
    assert validate(g, g.input_order) == []
    assert is_valid(g, g.input_order, collective_order="global")


def test_permutation():
    g = graph()
    vs = validate(g, ["a", "c1"])
    assert kinds(vs) == ["permutation"] and "misses" in vs[0].message


def test_every_dependency_violation_reported():
    g = graph()
    vs = validate(g, ["w1", "w2", "c1", "c2", "a", "x", "y"])
    deps = [v for v in vs if v.kind == "dependency"]
    assert {v.nodes for v in deps} == {("c1", "w1"), ("c2", "w2"), ("a", "c1")}


def test_group_vs_global_collective_order():
    g = graph()
    order = ["c2", "a", "c1", "w1", "w2", "x", "y"]
    assert validate(g, order) == []  # different groups: free to swap
    vs = validate(g, order, collective_order="global")
    assert kinds(vs) == ["collective_order"] and set(vs[0].nodes) == {"c1", "c2"}

    b = GraphBuilder()
    b.collective("p", group="g", duration=1)
    b.collective("q", group="g", duration=1)
    b.wait("wp", "p")
    b.wait("wq", "q")
    g2 = b.build()
    vs = validate(g2, ["q", "p", "wp", "wq"])
    assert kinds(vs) == ["collective_order"] and "'q' is issued before 'p'" in vs[0].message
    assert validate(g2, ["q", "p", "wp", "wq"], collective_order="free") == []


def test_atomic_group_split():
    g = graph()
    vs = validate(g, ["a", "c1", "c2", "w1", "x", "w2", "y"])
    assert kinds(vs) == ["atomic"] and vs[0].nodes == ("x", "y")


def test_memory_budget_bytes_and_ratio():
    g = graph()
    # post-alloc: a 10, c1 20 (then A freed), c2 20, w1 20, w2 20, x 21, y 22
    from overlapsat import simulate

    peak = simulate(g).peak_memory
    assert peak == 22
    assert validate(g, g.input_order, memory_budget="22B") == []
    vs = validate(g, g.input_order, memory_budget="21B")
    assert kinds(vs) == ["memory"] and "22 B" in vs[0].message and "budget of 21 B" in vs[0].message
    assert validate(g, g.input_order, memory_budget="1.0x") == []
    assert kinds(validate(g, g.input_order, memory_budget=MemoryBudget(ratio=0.9))) == ["memory"]
    assert validate(g, g.input_order, memory_budget="22B") == []


def test_all_kinds_at_once():
    g = graph()
    vs = validate(g, ["y", "w1", "c2", "c1", "x", "w2", "a"], memory_budget="0B", collective_order="global")
    assert kinds(vs) == ["atomic", "collective_order", "dependency", "memory"]


def test_bad_options():
    g = graph()
    with pytest.raises(GraphError, match="collective_order"):
        validate(g, g.input_order, collective_order="sideways")
    with pytest.raises(GraphError, match="ratio"):
        validate(g, g.input_order, memory_budget=-1.0)
    with pytest.raises(GraphError, match="memory budget"):
        validate(g, g.input_order, memory_budget="lots")
