"""Decision 16: the ports score nodes by torch's pre-fusion ancestors when the graph carries them."""

import pytest

from overlapsat import GraphBuilder, GraphError
from overlapsat.heuristics import raise_comms
from overlapsat.heuristics.schedule_for_comm import _blocked_collective_index
from overlapsat.io import graph_from_dict, graph_to_dict


def fused_path(prefusion=True):
    """P feeds member x, member y feeds collective c, and x and y were fused into F: the fused graph has a
    path P -> F -> c that no pre-fusion node has, so P is not an ancestor of c for torch."""
    b = GraphBuilder()
    b.compute("Q", 1.0, writes={"q": 1})
    b.compute("P", 1.0, writes={"p": 1})
    b.compute("F", 1.0, reads=["p"], writes={"f": 1})
    b.collective("c", group="g", duration=4.0, reads=["f"])
    b.wait("w", "c")
    g = b.build()
    if not prefusion:
        return g
    from dataclasses import replace

    members = (("Q", "Q", ()), ("P", "P", ()), ("x", "F", ("P",)), ("y", "F", ()), ("c", "c", ("y",)), ("w", "w", ("c",)))
    return replace(g, prefusion=members)


def test_scores_follow_the_pre_fusion_ancestors():
    plain, torchlike = fused_path(False), fused_path(True)
    order = list(range(len(plain)))
    big = _blocked_collective_index(plain, order)[plain.index["Q"]]
    # fused closure: P is an ancestor of c (score 0); torch's ancestors: it is not (the same score as Q)
    assert _blocked_collective_index(plain, order)[plain.index["P"]] == 0
    s = _blocked_collective_index(torchlike, order)
    assert s[torchlike.index["P"]] == big and s[torchlike.index["F"]] == 0 and s[torchlike.index["c"]] == 0


def test_raise_comms_differs_only_through_the_scores():
    # the fused closure raises P (and F, c) ahead of Q; with torch's scores P ties with Q and keeps its place
    plain, torchlike = fused_path(False), fused_path(True)
    assert [plain.names[v] for v in raise_comms(plain).order] == ["P", "F", "c", "Q", "w"]
    assert [torchlike.names[v] for v in raise_comms(torchlike).order] == ["Q", "P", "F", "c", "w"]


def test_prefusion_round_trips_as_version_2_and_is_not_part_of_the_problem():
    g = fused_path(True)
    d = graph_to_dict(g)
    assert d["version"] == 2 and d["prefusion"][2] == ["x", "F", ["P"]]
    h = graph_from_dict(d)
    assert h.prefusion == g.prefusion and h.fingerprint() == fused_path(False).fingerprint()
    assert graph_to_dict(fused_path(False))["version"] == 1  # files without it stay readable by older readers


@pytest.mark.parametrize("members,msg", [
    ((("x", "NOPE", ()),), "not a node"),
    ((("x", "F", ("y",)), ("y", "F", ())), "not a member listed before it"),
    ((("x", "F", ()), ("x", "F", ())), "listed twice"),
])
def test_bad_prefusion_is_named(members, msg):
    from dataclasses import replace

    with pytest.raises(GraphError, match=msg):
        replace(fused_path(False), prefusion=members)


def tie_graph(with_estimates):
    """A 400 ns transfer and ready kernels of 100, 300 and 100 ns: in ns the first two cover it exactly, in
    us 0.4 - 0.1 - 0.3 leaves 5.6e-17 and the greedy hides a third kernel."""
    from dataclasses import replace

    b = GraphBuilder()
    b.collective("c", group="g", duration=0.4)
    for k, d in (("k1", 0.1), ("k2", 0.3), ("k3", 0.1)):
        b.compute(k, d)
    b.wait("w", "c")
    g = b.build()
    if not with_estimates:
        return g
    est = {"c": 400.0, "k1": 100.0, "k2": 300.0, "k3": 100.0, "w": 0.0}
    return replace(g, nodes=tuple(replace(nd, estimate=est[nd.name]) for nd in g.nodes))


def test_ports_decide_on_torchs_raw_estimates():
    from overlapsat.heuristics import reorder_compute_for_overlap

    assert reorder_compute_for_overlap(tie_graph(False)).stats["overlapped"] == {"c": ["k1", "k2", "k3"]}
    # what torch decides on its own nanoseconds: the transfer is covered after k2
    assert reorder_compute_for_overlap(tie_graph(True)).stats["overlapped"] == {"c": ["k1", "k2"]}
    g = tie_graph(True)
    assert graph_from_dict(graph_to_dict(g)).port_dur == [400.0, 100.0, 300.0, 100.0, 0.0]
    assert g.fingerprint() == tie_graph(False).fingerprint()  # the problem (durations in us) is the same
