"""Graph construction: every bad-input case raises GraphError naming the culprit."""

import math

import pytest

from overlapsat import Buffer, Graph, GraphBuilder, GraphError, Node, NodeKind

C, K, W = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT


def test_builder_derives_dependencies():
    b = GraphBuilder("toy")
    b.compute("mm", 10, writes={"y": 1024})
    b.collective("ar", group="tp", op="all_reduce", duration=30, reads=["y"], writes={"y_red": 1024})
    b.wait("ar_wait", "ar")
    b.compute("out", 5, reads=["y_red"], writes={"z": 64}, outputs=["z"])
    b.edge("mm", "out")
    g = b.build()
    ix = g.index
    assert g.preds[ix["ar"]] == [ix["mm"]]
    assert g.preds[ix["ar_wait"]] == [ix["ar"]]  # coll -> wait, and the wait reads y_red
    # y_red's producer, the wait of that collective (reading its output means waiting), the extra edge
    assert set(g.preds[ix["out"]]) == {ix["ar"], ix["ar_wait"], ix["mm"]}
    assert g.counts() == {"nodes": 4, "compute": 2, "collective": 1, "wait": 1, "buffers": 3, "edges": 5}
    assert g.compute_total == 15 and g.comm_total == 30


def test_cycle_names_the_nodes():
    nodes = [Node("a", C, 1), Node("b", C, 1), Node("c", C, 1)]
    with pytest.raises(GraphError, match=r"cycle through 'a' -> 'b' -> 'c' -> 'a'|cycle through 'b' -> 'c' -> 'a' -> 'b'|"
                       r"cycle through 'c' -> 'a' -> 'b' -> 'c'"):
        Graph(nodes, edges=[("a", "b"), ("b", "c"), ("c", "a")])


@pytest.mark.parametrize(
    "nodes,buffers,edges,match",
    [
        ([Node("a", C, 1), Node("a", C, 2)], [], [], "duplicate node name 'a'"),
        ([Node("a", C, 1)], [Buffer("x", "a"), Buffer("x", "a")], [], "duplicate buffer name 'x'"),
        ([Node("a", C, -1)], [], [], "node 'a': duration -1"),
        ([Node("a", C, math.nan)], [], [], "node 'a': duration nan"),
        ([Node("a", C, math.inf)], [], [], "node 'a': duration inf"),
        ([Node("a", C, 1)], [Buffer("x", "a", (), -5, -5)], [], "buffer 'x': size_alloc -5"),
        ([Node("a", C, 1)], [Buffer("x", "a", (), math.inf, 1)], [], "buffer 'x': size_alloc inf"),
        ([Node("w", W, collective="nope")], [], [], "wait 'w' names unknown collective 'nope'"),
        ([Node("a", C, 1), Node("w", W, collective="a")], [], [], "names 'a', which is a compute"),
        ([Node("w", W)], [], [], "wait 'w' names no collective"),
        ([Node("c", K, 1)], [], [], "collective 'c' has no process group"),
        ([Node("a", C, 1)], [Buffer("x", "ghost")], [], "buffer 'x': producer 'ghost' is not a node"),
        ([Node("a", C, 1)], [Buffer("x", "a", ("ghost",))], [], "buffer 'x': consumer 'ghost' is not a node"),
        ([Node("a", C, 1)], [], [("a", "ghost")], "edge 'a' -> 'ghost' names unknown node 'ghost'"),
        ([Node("a", C, 1)], [], [("a", "a")], "self-loop"),
        ([Node("a", C, 1), Node("b", C, 1)], [], [("b", "a")], "'a' is listed before its dependency 'b'"),
        ([Node("c", K, 1, group="g", nbytes=-3)], [], [], "nbytes -3"),
        ([Node("k", C, 1.0, launch=2.0)], [], [], "compute 'k': only a collective has a launch cost"),
        ([Node("c", K, 1, group="g", launch=-1.0)], [], [], r"node 'c': launch -1.0 must be a number of us in \[0, 1e12\]"),
    ],
)
def test_bad_graphs(nodes, buffers, edges, match):
    with pytest.raises(GraphError, match=match):
        Graph(nodes, buffers, edges)


def test_all_problems_listed_at_once():
    with pytest.raises(GraphError) as ei:
        Graph([Node("a", C, -1), Node("b", C, math.nan), Node("a", C, 1)])
    assert len(ei.value.problems) == 3
    assert "3 problem(s)" in str(ei.value)


def test_atomic_groups_checked():
    nodes = [Node("a", C, 1), Node("b", C, 1), Node("c", C, 1)]
    with pytest.raises(GraphError, match="not contiguous"):
        Graph(nodes, atomic_groups=[("a", "c")])
    with pytest.raises(GraphError, match="unknown node 'z'"):
        Graph(nodes, atomic_groups=[("a", "z")])
    with pytest.raises(GraphError, match="two atomic groups"):
        Graph(nodes, atomic_groups=[("a", "b"), ("b", "c")])
    assert Graph(nodes, atomic_groups=[("b", "c")]).atomic == [[1, 2]]


def test_builder_unknown_buffer():
    b = GraphBuilder("t")
    b.compute("a", 1, reads=["nothing"])
    with pytest.raises(GraphError, match="node 'a' reads unknown buffer 'nothing'"):
        b.build()


def test_freeable_input_cannot_have_producer():
    with pytest.raises(GraphError, match="freeable graph input but has producer 'a'"):
        Graph([Node("a", C, 1)], [Buffer("x", "a", freeable_input=True)])


def test_node_lookup_error_names_node():
    g = Graph([Node("a", C, 1)])
    with pytest.raises(GraphError, match="unknown node 'q'"):
        g.node("q")
    with pytest.raises(GraphError, match="unknown node 'q'"):
        g.order_indices(["q"])


def test_with_durations_reprices():
    g = Graph([Node("a", C, 1), Node("b", C, 2)])
    assert g.with_durations({"b": 5}).compute_total == 6


def test_the_collector_is_paused_in_the_block_and_restored_as_found():
    """`paused_gc` turns the cyclic collector off inside its block and leaves it as it found it: on stays on,
    off stays off, also after an error inside; as `run_all`'s decorator it keeps the signature."""
    import gc
    import inspect

    from overlapsat.gc_pause import paused_gc
    from overlapsat.heuristics import run_all

    seen = []
    with paused_gc():
        seen.append(gc.isenabled())
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # a caller's own setting is kept
    finally:
        gc.enable()
    with pytest.raises(ValueError), paused_gc():
        raise ValueError("inside")
    assert gc.isenabled()
    assert "memory_budget" in inspect.signature(run_all).parameters  # the decorator keeps the signature


def test_building_a_large_graph_starts_at_most_one_collection(monkeypatch):
    """The pause is in place where it matters: rebuilding a 5,000-node graph's index starts about 70
    collections without it; with it, only the one young-generation pass that follows re-enabling."""
    import contextlib
    import dataclasses
    import gc

    import overlapsat.graph as graph_mod
    from overlapsat.examples import generate

    g = generate("fsdp", nodes=5000)
    starts = []

    def count(phase, info):
        starts.append(phase)

    def collections_while_rebuilding() -> int:
        gc.collect()
        starts.clear()
        gc.callbacks.append(count)
        try:
            dataclasses.replace(g)  # __post_init__: the index rebuilt
        finally:
            gc.callbacks.remove(count)
        return starts.count("start")

    assert collections_while_rebuilding() <= 1
    monkeypatch.setattr(graph_mod, "paused_gc", contextlib.nullcontext)  # the same build, unpaused
    assert collections_while_rebuilding() > 10


VALUES = [0, 1, -1, 0.0, 1.5, -0.0, 1e12, 1e12 + 1, 2**62, 2**62 + 1, float(2**62), math.nan, math.inf, -math.inf,
          True, False, None, "1", 10**30]


@pytest.mark.parametrize("x", VALUES, ids=repr)
def test_the_range_checks_fast_paths_agree_with_their_definitions(x):
    """`_finite_nonneg` and `_int_size` take a shortcut for exact ints and floats; these are their definitions."""
    from overlapsat.graph import MAX_BYTES, MAX_DURATION_US, _finite_nonneg, _int_size

    def finite_nonneg(v, top):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= top

    def int_size(v):
        return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= MAX_BYTES
                and float(v).is_integer())

    assert _finite_nonneg(x) == finite_nonneg(x, MAX_DURATION_US)
    assert _finite_nonneg(x, math.inf) == finite_nonneg(x, math.inf)
    assert _int_size(x) == int_size(x)


@pytest.mark.parametrize(("field", "value", "said"), [
    ("duration", True, "expected int or float, got True"), ("duration", "1", "expected int or float, got str"),
    ("bytes", 1.0, "expected int, got float"), ("bytes", False, "expected int, got False"),
    ("group", None, "expected str, got NoneType"), ("gemm_like", 1, "expected bool, got int"),
])
def test_a_file_field_of_the_wrong_type_is_named(field, value, said):
    from overlapsat.io import graph_from_dict

    node = {"name": "c", "kind": "collective", "duration": 1.0, "group": "g", "bytes": 8, field: value}
    with pytest.raises(GraphError, match=f"node 'c'.{field}: {said}"):
        graph_from_dict({"format": "overlapsat-graph", "version": 1, "nodes": [node]})
