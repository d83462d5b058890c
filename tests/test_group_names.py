"""Process groups named by structure (decisions.md 48): SPMD ranks whose graphs differ only in their groups'
rank-local names get one fingerprint, so one store file and one plan."""

import pytest

from overlapsat import GraphBuilder, GraphError


def _graph(dp: str, tp: str, gather: str = "all_gather_into_tensor", reduce: str = "all_reduce",
           reverse: bool = False):
    """A gather on the data-parallel group beside a matmul whose result is all_reduced on the tensor-parallel
    group; groups named as torch names them (rank-local numbers). `reverse` lists the two independent parts the
    other way round."""
    b = GraphBuilder("step")

    def gather_part():
        b.collective(gather, group=dp, op="all_gather", duration=40, nbytes=1 << 20, writes={"ag": 1 << 20})
        b.wait("wait_tensor", gather)

    def reduce_part():
        b.compute("mm", 100, reads=["xb"], writes={"h": 1 << 19})
        b.collective(reduce, group=tp, op="all_reduce", duration=30, nbytes=1 << 19, reads=["h"],
                     writes={"r": 1 << 19})
        b.wait("wait_tensor_1", reduce)

    b.compute("x", 5, writes={"xb": 64})
    for part in (reduce_part, gather_part) if reverse else (gather_part, reduce_part):
        part()
    b.compute("out", 1, reads=["r", "ag"], writes={"o": 8}, outputs=["o"])
    return b.build()


def test_ranks_of_a_2d_mesh_share_one_fingerprint_only_once_renamed():
    r0, r1 = _graph("3", "1"), _graph("4", "1")  # FSDP peers in other groups, one TP group
    assert r0.fingerprint() != r1.fingerprint()  # what the bridge recorded before: one graph per rank
    s0, s1 = r0.with_structural_groups(), r1.with_structural_groups()
    assert s0.fingerprint() == s1.fingerprint()
    # named in the natural order of each group's first collective: 'all_gather...' < 'all_reduce'
    assert r0.structural_group_names() == {"3": "g0", "1": "g1"}
    assert s0.meta["process_groups"] == {"g0": "3", "g1": "1"} and s1.meta["process_groups"] == {"g0": "4", "g1": "1"}
    assert {nd.group for nd in s0.nodes if nd.group} == {"g0", "g1"}


def test_structural_names_do_not_depend_on_node_order():
    a, b = _graph("7", "5"), _graph("7", "5", reverse=True)
    assert [nd.name for nd in a.nodes] != [nd.name for nd in b.nodes]
    assert a.structural_group_names() == b.structural_group_names() == {"7": "g0", "5": "g1"}


def test_names_compare_naturally_not_as_text():
    g = _graph("x", "y", gather="c10", reduce="c9")
    assert g.structural_group_names() == {"y": "g0", "x": "g1"}  # c9 before c10, though "c10" < "c9" as text


def test_a_rename_onto_a_kept_name_is_refused():
    g = _graph("3", "1")
    with pytest.raises(GraphError, match="share a name"):
        g.with_group_names({"3": "1"})
    with pytest.raises(GraphError, match="share a name"):
        g.with_group_names({"3": "a", "1": "a"})
    assert g.with_group_names({"3": "a"}).structural_group_names() == {"a": "g0", "1": "g1"}
