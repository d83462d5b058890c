"""The greedy bucketer against torch's own (`bucket_all_gather_by_mb`, `bucket_reduce_scatter_by_mb`)."""

import pytest

torch = pytest.importorskip("torch")


def _fsdp_step(layers: int, mixed: bool = False):
    """An FSDP-style step: gather each layer's weight, compute, reduce-scatter its gradient-like output; layer 2's
    weight is computed from layer 1's output, so its gather depends on an earlier gather."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch.fx.experimental.proxy_tensor import make_fx

    from overlapsat.torch.capture import ensure_fake_process_group

    if not dist.is_initialized():
        ensure_fake_process_group(2)

    def f(x, *ws):
        outs = []
        for i, w in enumerate(ws):
            if i == 2:
                w = w + x[: w.shape[0]].sum()  # depends on nothing gathered: still bucketable
            if i == 3:
                w = w * outs[-1].sum()  # depends on layer 2's gathered weight: not with it
            full = funcol.all_gather_tensor(w, 0, dist.group.WORLD)
            x = torch.tanh(x @ full.float().T @ full.float())
            outs.append(x)
        return sum(funcol.reduce_scatter_tensor(o, "sum", 0, dist.group.WORLD).sum() for o in outs)

    ws = [torch.randn(8, 64) for _ in range(layers)]
    if mixed:  # layer 4's weight in half precision: torch keys its gather apart (dtype is in the bucket key)
        ws[4] = ws[4].half()
    return make_fx(f, tracing_mode="fake")(torch.randn(32, 64), *ws)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("mixed", [False, True])
@pytest.mark.parametrize("cap_mb", [0.001, 0.01, 0.05, 2000.0])
def test_the_same_buckets_as_torch(cap_mb, mixed):
    from torch._inductor.fx_passes.bucketing import bucket_all_gather_by_mb, bucket_reduce_scatter_by_mb

    from overlapsat.heuristics.bucketing import greedy_buckets
    from overlapsat.torch.fx import import_fx

    gm = _fsdp_step(6, mixed)
    theirs = [tuple(n.name for n in b) for f in (bucket_all_gather_by_mb, bucket_reduce_scatter_by_mb)
              for b in f(gm, lambda _: cap_mb)]
    g = import_fx(gm)
    ours = [b.members for b in greedy_buckets(g, int(cap_mb * 1024 * 1024))]
    assert ours == theirs
    if cap_mb == 2000.0:
        assert len(ours) >= 2 and any(len(b) > 2 for b in ours)  # the check compared real buckets
    keys = {nd.op: nd.bucket_key for nd in g.nodes if nd.op in ("all_gather", "reduce_scatter")}
    assert keys == {"all_gather": "float32" if not mixed else keys["all_gather"], "reduce_scatter": "sum,float32"}
    if mixed:
        assert g.node("all_gather_into_tensor_4").bucket_key == "float16"


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_torchs_scheduler_buckets_are_recorded_as_a_plan_of_the_unbucketed_graph():
    """`fx_peer.bucketed(gm, g, out)` records torch's OverlapScheduler's buckets (FSDP pre-bucketing, then its
    overlap-preserving bucketing) by member names of `g`: every member a collective of `g`, each once, and as many
    merged collectives in torch's graph as buckets plus the collectives left alone."""
    from overlapsat.plan import bucket_problems
    from overlapsat.torch.fx import import_fx
    from overlapsat.torch.fx_peer import available, bucketed

    if not available():
        pytest.skip("this torch has no OverlapScheduler")
    g = import_fx(_fsdp_step(6))
    out: list[list[str]] = []
    h = bucketed(_fsdp_step(6), g, out)
    assert h is not None and out and any(len(b) > 2 for b in out)  # torch did bucket
    members = [m for b in out for m in b]
    assert len(members) == len(set(members)) and set(members) <= {g.names[c] for c in g.coll_seq}
    assert len(h.coll_seq) == len(out) + len(g.coll_seq) - len(members)
    from overlapsat.plan import Bucket

    assert bucket_problems(g, [Bucket(tuple(b)) for b in out]) == []  # one key, no member depends on another


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_torchs_bucketed_graph_of_a_renamed_graph_takes_its_names():
    """A graph the bridge renamed (decisions.md 48) gives torch's bucketed peer under the same structural group
    names, sized from torch's own names, so that its plan and the peer's graph compare."""
    from overlapsat.torch.fx import import_fx
    from overlapsat.torch.fx_peer import available, bucketed

    if not available():
        pytest.skip("this torch has no OverlapScheduler")
    plain = import_fx(_fsdp_step(6))
    g = plain.with_structural_groups()
    torch_name = next(iter({nd.group for nd in plain.nodes if nd.group}))
    assert g.meta["process_groups"] == {"g0": torch_name}
    h0, h = bucketed(_fsdp_step(6), plain), bucketed(_fsdp_step(6), g)
    assert h0 is not None and h is not None
    assert {nd.group for nd in h.nodes if nd.group} == {"g0"}
    assert sorted(nd.group_size for nd in h.nodes if nd.group) == sorted(nd.group_size for nd in h0.nodes if nd.group)
    assert h.fingerprint() == h0.with_group_names({torch_name: "g0"}).fingerprint()


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_an_out_collective_of_torchs_merge_allocates_nothing_of_its_own():
    """torch's all_gather merge allocates the gathered buffer with `empty` and gathers into it with the out=
    collective, which returns that buffer: the importer counts it once (decision 67; before, the out= result was
    a second buffer of the same size, and a plan's merged graph read 2 x the bucket too high)."""
    from torch._inductor.fx_passes.bucketing import bucket_all_gather_by_mb, merge_all_gather

    from overlapsat.torch.fx import import_fx

    gm = _fsdp_step(2)
    before = import_fx(gm)
    merge_all_gather(gm, bucket_all_gather_by_mb(gm, lambda _: 2000.0))
    from torch.fx.passes.tools_common import legalize_graph

    legalize_graph(gm)  # torch's merge may leave its nodes out of topological order
    outs = [n for n in gm.graph.nodes if "all_gather_into_tensor_out" in str(n.target)]
    assert len(outs) == 1
    g = import_fx(gm)
    assert not [b for b in g.buffers if b.producer == outs[0].name]  # the gathered buffer is `empty`'s
    empties = [b for b in g.buffers if b.producer is not None and b.producer.startswith("empty")]
    gathered = sum(nd.nbytes for nd in before.nodes if nd.op == "all_gather")
    assert [b.size_alloc for b in empties] == [gathered]
