"""The collective-order policy: what each level lets the validator and the solver accept (docs/solver.md)."""

import pytest

from overlapsat import GraphBuilder, GraphError, optimize, simulate, validate
from overlapsat.bounds import lower_bound
from tests.brute import brute_force


def two_groups():
    b = GraphBuilder()
    b.collective("c1", group="g1", duration=4.0)
    b.wait("w1", "c1")
    b.collective("d1", group="g2", duration=4.0)
    b.wait("v1", "d1")
    b.collective("c2", group="g1", duration=4.0)
    b.wait("w2", "c2")
    return b.build()


# each order, and the levels that accept it (strictest first)
ORDERS = {
    ("c1", "w1", "d1", "v1", "c2", "w2"): {"chain", "global", "group", "free"},  # the input order
    ("c1", "d1", "w1", "v1", "c2", "w2"): {"global", "group", "free"},  # two in flight: not Inductor's chain
    ("d1", "v1", "c1", "w1", "c2", "w2"): {"group", "free"},  # groups interleaved differently
    ("c2", "w2", "c1", "w1", "d1", "v1"): {"free"},  # g1's collectives swapped
}


@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("level", ["chain", "global", "group", "free"])
def test_each_level_accepts_what_it_documents(order, level):
    g = two_groups()
    vs = validate(g, list(order), collective_order=level)
    assert (not vs) == (level in ORDERS[order])
    assert all(v.kind == "collective_order" for v in vs)


def test_levels_are_nested_on_brute_force():
    """Every order a stricter level accepts, a freer one accepts too; the counts grow strictly here."""
    g = two_groups()
    counts = {}
    for level in ("chain", "global", "group", "free"):
        truth = brute_force(g, level)
        counts[level] = len(truth.orders)
        for o, _, _ in truth.orders:
            assert not validate(g, o, collective_order=level)
    assert counts["chain"] < counts["global"] < counts["group"] < counts["free"]


def test_unknown_level_is_named():
    with pytest.raises(GraphError, match="collective_order"):
        validate(two_groups(), list(range(6)), collective_order="fifo")


def reorder_pays():
    """g's second collective feeds the first compute: only free reordering can overlap the first."""
    b = GraphBuilder()
    b.collective("ag_late", group="g", duration=10.0, writes={"L": 1})
    b.collective("ag_now", group="g", duration=2.0, writes={"N": 1})
    b.wait("w_late", "ag_late")
    b.wait("w_now", "ag_now")
    b.compute("use_now", 10.0, reads=["N"], writes={"U": 1}, outputs=["U"])
    b.compute("use_late", 1.0, reads=["L"], writes={"V": 1}, outputs=["V"])
    return b.build()


def test_free_level_finds_what_group_forbids_and_its_bound_holds():
    g = reorder_pays()
    best = {lvl: brute_force(g, lvl).best(None) for lvl in ("group", "free")}
    # by hand: group: ag_now waits behind ag_late, 12 + use_now 10 (use_late hides in the stall);
    # free: ag_now first, use_now 2..12 hides ag_late, then use_late: 13
    assert best == {"group": 22.0, "free": 13.0}
    for lvl in ("group", "free"):
        r = optimize(g, time_limit=5, collective_order=lvl)
        assert r.makespan == best[lvl] and r.proven
        assert simulate(g, r.order).makespan == best[lvl]
        assert not validate(g, r.order, collective_order=lvl)
        assert lower_bound(g, lvl).makespan <= best[lvl]
    # the group-order bound is not a bound once the group may reorder: the free level needs its own
    assert lower_bound(g, "group").makespan > best["free"]
    free_order = optimize(g, time_limit=5, collective_order="free").order
    assert validate(g, free_order, collective_order="group")


def test_chain_against_the_dependencies_is_a_clear_error():
    b = GraphBuilder()
    b.collective("c1", group="g", duration=1.0, writes={"A": 1})
    b.collective("c2", group="g", duration=1.0, writes={"B": 1})
    b.wait("w2", "c2")
    b.compute("k", 1.0, reads=["B"], writes={"K": 1})
    b.wait("w1", "c1", reads=["K"])  # w1 after k after w2 after c2: c2 is issued before w1 in every order
    g = b.build()
    with pytest.raises(GraphError, match="chain"):
        optimize(g, time_limit=2, collective_order="chain")
    assert optimize(g, time_limit=2, collective_order="global").makespan > 0


def test_inductor_chain_edges_belong_to_the_chain_level():
    """A captured graph carries Inductor's chain as fake edges (wait of collective i before collective i+1):
    they bind only at the "chain" level, while a data edge of the same shape binds at every level."""
    from overlapsat import Graph

    def graph(as_data):
        b = GraphBuilder()
        b.collective("c1", group="g", duration=4.0)
        b.wait("w1", "c1")
        b.collective("c2", group="g", duration=4.0)
        b.wait("w2", "c2")
        g = b.build()
        e = (("w1", "c2"),)
        return Graph(g.nodes, g.buffers, g.edges + (e if as_data else ()), name="chain",
                     fake_edges=() if as_data else e)

    two_in_flight = ["c1", "c2", "w1", "w2"]
    fake, data = graph(False), graph(True)
    assert fake.chain_edges() == {("w1", "c2")} and data.chain_edges() == frozenset()
    for level in ("global", "group", "free"):
        assert validate(fake, two_in_flight, collective_order=level) == []
        assert [v.kind for v in validate(data, two_in_flight, collective_order=level)] == ["dependency"]
        assert optimize(fake, time_limit=2, collective_order=level).makespan == 8.0  # both transfers back to back
    assert validate(fake, two_in_flight, collective_order="chain")
    assert optimize(fake, time_limit=2, collective_order="chain").makespan == 8.0


def test_brute_force_builds_the_same_dependencies_as_the_library():
    """tests/brute.py derives dependencies from MODEL.md on its own; at the chain level they are the graph's."""
    from tests.brute import _preds, random_graph

    for seed in range(300):
        g, _ = random_graph(seed)
        assert _preds(g, "chain") == [sorted(p) for p in g.preds]
        relaxed = g.relaxed("free")
        assert _preds(g, "free") == [sorted(p) for p in relaxed.preds]
