"""A bucket copies its members in and out where the plan puts its copy-in and copy-out (decision 81).

torch's merge (`merge_all_gather_bucket`) ends a bucket with views of the
gathered buffer, one reshape per member; each reshape of a strided view is a
copy that Inductor computes lazily, inside or just before its first reader.
The gathered buffer then lives until the last member's first reader, not
until the copy-out MODEL.md prices: a plan packed to its budget went 31 %
over it on CPU (tests/torch/test_allocator.py). Here the reshapes are
replaced by one op that Inductor cannot inline: it copies every member out
of the gathered buffer in one call (ATen's `split_with_sizes_copy`, the
kernel FSDP2 copies out with), so the buffer is freed at the copy-out and
each member is a fresh tensor, as MODEL.md reads them.

The copy-in of a bucket of reduce_scatters (or all_reduces) is torch's
`cat` of the members' inputs. Inductor lowers a `cat` by having each
input's producer write into its slice of the output, so the whole bucket
buffer is allocated when the first member's input is computed: on 2 H200s a
951 MB gradient bucket lived across the backward graph's peak, 1 GB above
MODEL.md's reading (benchmarks/results/gpu_2026-11-29, snapshot). Here the
`cat` is one op Inductor cannot inline (`bucket_cat`): the members are
computed into their own buffers and copied in where the plan puts the
copy-in, as MODEL.md prices it.
"""

from __future__ import annotations

import operator
from typing import Any

import torch

from overlapsat.torch.fx import _functional_name, is_collective, is_wait

OP_NAME = "overlapsat::bucket_copy_out"
CAT_NAME = "overlapsat::bucket_cat"


@torch.library.custom_op(CAT_NAME, mutates_args=())
def bucket_cat(parts: list[torch.Tensor], dim: int) -> torch.Tensor:
    """torch.cat, as one kernel Inductor calls where the node stands (its inputs are not written in place)."""
    return torch.cat(parts, dim)


@bucket_cat.register_fake
def _(parts: list[torch.Tensor], dim: int) -> torch.Tensor:
    return torch.cat(parts, dim)


def cat_at_once(fx_graph: Any, new_nodes: list[Any]) -> list[Any]:
    """Replace each `aten.cat` torch's merge made before a bucket's collective by `bucket_cat` of the same
    inputs; returns the bucket's nodes in graph order (`new_nodes` itself where there is no cat)."""
    ci = next((i for i, n in enumerate(new_nodes) if is_collective(n)), None)
    cats = [n for n in new_nodes[:ci] if n.op == "call_function" and n.target is torch.ops.aten.cat.default]
    if ci is None or not cats:
        return new_nodes
    made = {}
    for c in cats:
        parts, dim = c.args[0], (c.args[1] if len(c.args) > 1 else c.kwargs.get("dim", 0))
        with fx_graph.inserting_before(c):
            n = fx_graph.call_function(torch.ops.overlapsat.bucket_cat.default, (list(parts), dim))
        n.meta.update(c.meta)
        c.replace_all_uses_with(n)
        fx_graph.erase_node(c)
        made[c] = n
    return [made.get(n, n) for n in new_nodes]


@torch.library.custom_op(OP_NAME, mutates_args=())
def bucket_copy_out(gathered: torch.Tensor, sizes: list[int], group_size: int) -> list[torch.Tensor]:
    """Each member's (group_size, size) rows of a bucket gathered rank by rank, as fresh contiguous tensors."""
    rows = gathered.view(group_size, -1)
    outs = [rows.new_empty((group_size, n)) for n in sizes]
    torch.split_with_sizes_copy(rows, sizes, dim=1, out=outs)
    return outs


@bucket_copy_out.register_fake
def _(gathered: torch.Tensor, sizes: list[int], group_size: int) -> list[torch.Tensor]:
    return [gathered.new_empty((group_size, n)) for n in sizes]


def copy_out_at_once(fx_graph: Any, new_nodes: list[Any], outs: list[Any]) -> list[Any]:
    """Replace what torch's merge made after a bucket's wait (`new_nodes`, in graph order; `outs`, each member's
    output node in the members' order) by one `bucket_copy_out` and a view per member; every user of a member's
    output reads its view. Returns the bucket's nodes in graph order. A bucket it cannot read this way (members of
    another dtype than the gathered buffer, or sizes that do not add up) is returned as torch made it."""
    wi = next((i for i, n in enumerate(new_nodes) if is_wait(n)), None)
    coll = None if wi is None else next((n for n in new_nodes[:wi]
                                         if is_collective(n) and "all_gather" in _functional_name(n)), None)
    if coll is None:
        return new_nodes
    wait = new_nodes[wi]
    gathered = wait.meta.get("val")
    vals = [o.meta.get("val") for o in outs]
    group_size = coll.args[1]
    if gathered is None or any(v is None or v.dtype != gathered.dtype for v in vals) or not isinstance(group_size, int):
        return new_nodes
    sizes = [v.numel() // group_size for v in vals]
    if sum(sizes) * group_size != gathered.numel() or any(n * group_size != v.numel() for n, v in zip(sizes, vals)):
        return new_nodes
    with fx_graph.inserting_after(wait):
        co = fx_graph.call_function(torch.ops.overlapsat.bucket_copy_out.default, (wait, sizes, group_size))
    with _fake_mode(gathered):
        co.meta["val"] = [gathered.new_empty((group_size, n)) for n in sizes]
    made = [co]
    at = co
    for i in range(len(outs)):
        with fx_graph.inserting_after(at):
            at = fx_graph.call_function(operator.getitem, (co, i))
        at.meta["val"] = co.meta["val"][i]
        made.append(at)
    views = []
    for o, item in zip(outs, made[1:]):
        with fx_graph.inserting_after(made[-1] if not views else views[-1]):
            v = fx_graph.call_function(torch.ops.aten.view.default, (item, list(o.meta["val"].shape)))
        with _fake_mode(gathered):
            v.meta["val"] = item.meta["val"].view(o.meta["val"].shape)
        o.replace_all_uses_with(v)
        views.append(v)
    gone = set()
    for n in reversed(new_nodes[wi + 1:]):  # torch's reshapes and splits, now read by nobody
        if not n.users:
            fx_graph.erase_node(n)
            gone.add(n)
    return [n for n in new_nodes if n not in gone][:wi + 1] + made + views + \
        [n for n in new_nodes[wi + 1:] if n not in gone]


def _fake_mode(val: Any) -> Any:
    import contextlib

    from torch._guards import detect_fake_mode

    mode = detect_fake_mode([val])
    return mode if mode is not None else contextlib.nullcontext()


__all__ = ["CAT_NAME", "OP_NAME", "bucket_cat", "bucket_copy_out", "cat_at_once", "copy_out_at_once"]
