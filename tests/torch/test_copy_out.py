"""A bucket of all_gathers is copied out at once, where the plan puts its copy-out (decision 81).

The reference for the op is built by hand: each rank's members laid out one after another, the ranks one after
another, as NCCL gathers them; member i of the result is every rank's member i, rank by rank. The graph tests read
the merged FX graph and MODEL.md's reading of it; tests/torch/test_allocator.py holds the allocator to it, and
tests/torch/test_fx_plan.py runs a merged plan on two gloo ranks against eager.
"""

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("group_size", [1, 2, 4])
def test_copy_out_gives_each_member_every_ranks_rows_in_rank_order(group_size):
    from overlapsat.torch.copy_out import bucket_copy_out

    gen = torch.Generator().manual_seed(group_size)
    shapes = [(3, 5), (7,), (2, 2, 2)]
    per_rank = [[torch.randn(s, generator=gen) for s in shapes] for _ in range(group_size)]
    gathered = torch.cat([t.reshape(-1) for rank in per_rank for t in rank])
    sizes = [torch.Size(s).numel() for s in shapes]
    outs = bucket_copy_out(gathered, sizes, group_size)
    for i in range(len(shapes)):
        want = torch.cat([per_rank[r][i] for r in range(group_size)])  # (group_size * shape[0], *shape[1:])
        assert outs[i].is_contiguous() and outs[i].shape == (group_size, sizes[i])
        assert torch.equal(outs[i].view(want.shape), want)
        assert outs[i].untyped_storage().data_ptr() != gathered.untyped_storage().data_ptr()


def _merged(layout="copy"):
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from overlapsat import Problem, optimize
    from overlapsat.cost import cost_model
    from overlapsat.plan import Bucket, Plan, laid_out, materialize
    from overlapsat.torch.fx import import_fx
    from overlapsat.torch.fx_plan import merge_plan
    from tests.torch.test_fx import _trace

    def f(w1, w2, x):
        h = torch.relu(x @ funcol.all_gather_tensor(w1, 0, dist.group.WORLD).T)
        return h @ funcol.all_gather_tensor(w2, 0, dist.group.WORLD).T

    gm = _trace(f, torch.randn(8, 16), torch.randn(4, 16), torch.randn(4, 16))
    g = import_fx(gm)
    bs = (Bucket(tuple(g.names[c] for c in g.coll_seq)),)
    h = materialize(g.relaxed("group"), bs, laid_out(cost_model("h200").duration, layout))
    order = optimize(Problem.of(h, "none", "group"), time_limit=1, deterministic=True).names
    merged, placed, _ = merge_plan(gm.graph, g, Plan(tuple(order), bs, g.fingerprint(), layout=layout), import_fx)
    return gm, merged, placed


def test_a_merged_gather_bucket_copies_out_in_one_op_that_the_plans_copy_out_places():
    """Two gathers of different shapes, one bucket: one `bucket_copy_out` reads the bucket's wait, each member's
    readers read a view of its output, and nothing else reads the gathered buffer; in MODEL.md's reading of the
    merged graph, the copy-out allocates both members (16 x 16 and 8 x 16 floats from 2 ranks) and is the gathered
    buffer's last reader, so the buffer is freed there."""
    from overlapsat.torch.fx_plan import is_wait
    from overlapsat.validate import validate

    gm, merged, placed = _merged()
    (co,) = [n for n in gm.graph.nodes if n.target is torch.ops.overlapsat.bucket_copy_out.default]
    (wait,) = [n for n in gm.graph.nodes if is_wait(n)]
    assert co.args[0] is wait and list(wait.users) == [co] and co.args[1:] == ([128, 64], 2)
    assert [tuple(v.shape) for v in co.meta["val"]] == [(2, 128), (2, 64)]
    assert validate(merged, placed, collective_order="free") == []
    assert sorted(b.size_alloc for b in merged.buffers if b.producer == co.name) == [2 * 64 * 4, 2 * 128 * 4]
    (gathered,) = [b for b in merged.buffers if b.size_alloc == 2 * (128 + 64) * 4]
    pos = {n: i for i, n in enumerate(placed)}
    assert max(gathered.consumers, key=pos.__getitem__) == co.name


def test_a_coalesced_bucket_is_left_without_copy_out():
    gm, _, _ = _merged("coalesced")
    assert not any(n.target is torch.ops.overlapsat.bucket_copy_out.default for n in gm.graph.nodes)


def test_a_bucket_the_copy_out_cannot_read_is_left_as_torch_made_it():
    """A member of another dtype than the gathered buffer (torch's merge converts it): nothing is replaced."""
    from overlapsat.torch.copy_out import copy_out_at_once

    class N:  # the fields copy_out_at_once reads
        def __init__(self, target, val, args=()):
            self.op, self.target, self.meta, self.args = "call_function", target, {"val": val}, args

    coll = N(torch.ops._c10d_functional.all_gather_into_tensor_out.default, None, (None, 2, "0"))
    wait = N(torch.ops._c10d_functional.wait_tensor.default, torch.empty(8))
    out = N(torch.ops.aten.reshape.default, torch.empty(8, dtype=torch.float16))
    nodes = [coll, wait, out]
    assert copy_out_at_once(None, nodes, [out]) is nodes
    assert copy_out_at_once(None, [coll, out], [out]) == [coll, out]  # no wait: nothing read, nothing replaced


def test_a_bucket_left_as_torch_made_it_is_named_in_a_warning(monkeypatch, caplog):
    """Nothing silent: where the copy-outs stay torch's, Inductor computes them at their readers and the graph may
    peak above MODEL.md's reading; the bucket is named."""
    import logging

    import overlapsat.torch.copy_out as co

    monkeypatch.setattr(co, "copy_out_at_once", lambda _g, nodes, _outs: nodes)
    with caplog.at_level(logging.WARNING, logger="overlapsat.torch.fx_plan"):
        gm, _, _ = _merged()
    assert not any(n.target is torch.ops.overlapsat.bucket_copy_out.default for n in gm.graph.nodes)
    (msg,) = [r.getMessage() for r in caplog.records]
    assert "copy-outs this pass cannot replace" in msg and "decision 81" in msg


def test_a_merged_reduce_scatter_bucket_copies_in_with_one_op_inductor_cannot_inline():
    """torch's merge concatenates a reduce_scatter bucket's inputs with `aten.cat`, which Inductor lowers by having
    each input's producer write into the bucket buffer (allocated at the first of them); the merged graph has one
    `bucket_cat` of the same inputs instead, read by the collective, and no `aten.cat`; the op is torch.cat."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from overlapsat import Problem, optimize
    from overlapsat.cost import cost_model
    from overlapsat.plan import Bucket, Plan, laid_out, materialize
    from overlapsat.torch.copy_out import bucket_cat
    from overlapsat.torch.fx import import_fx
    from overlapsat.torch.fx_plan import is_collective, merge_plan
    from overlapsat.validate import validate
    from tests.torch.test_fx import _trace

    def f(a, b):
        return (funcol.reduce_scatter_tensor(torch.relu(a), "sum", 0, dist.group.WORLD),
                funcol.reduce_scatter_tensor(b * 2, "sum", 0, dist.group.WORLD))

    gm = _trace(f, torch.randn(8, 16), torch.randn(4, 6))
    g = import_fx(gm)
    bs = (Bucket(tuple(g.names[c] for c in g.coll_seq)),)
    h = materialize(g.relaxed("group"), bs, laid_out(cost_model("h200").duration, "copy"))
    order = optimize(Problem.of(h, "none", "group"), time_limit=1, deterministic=True).names
    merged, placed, _ = merge_plan(gm.graph, g, Plan(tuple(order), bs, g.fingerprint()), import_fx)
    assert not any(n.target is torch.ops.aten.cat.default for n in gm.graph.nodes)
    (cat,) = [n for n in gm.graph.nodes if n.target is torch.ops.overlapsat.bucket_cat.default]
    (coll,) = [n for n in gm.graph.nodes if is_collective(n)]
    assert cat in coll.all_input_nodes or any(cat in a.all_input_nodes for a in coll.all_input_nodes)
    assert tuple(cat.meta["val"].shape) == (2, 64 + 12) and validate(merged, placed, collective_order="free") == []
    parts = [torch.randn(2, 64), torch.randn(2, 12)]
    assert torch.equal(bucket_cat(parts, 1), torch.cat(parts, 1))


def test_install_fx_registers_the_bucket_ops_before_any_graph_is_merged():
    """Generated code calls the bucket ops by name; plans skip Inductor's caches, but code loaded any other way must
    find them too, so installing the bridge registers them before any graph is merged (a fresh interpreter)."""
    import subprocess
    import sys

    code = ("import tempfile, torch\n"
            "assert not hasattr(torch.ops.overlapsat, 'bucket_copy_out')\n"
            "from overlapsat.torch.fx_apply import install_fx\n"
            "install_fx('apply', tempfile.mkdtemp(), plans=True)\n"
            "print(torch.ops.overlapsat.bucket_copy_out.default, torch.ops.overlapsat.bucket_cat.default)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "overlapsat.bucket_copy_out.default" in out.stdout and "overlapsat.bucket_cat.default" in out.stdout
