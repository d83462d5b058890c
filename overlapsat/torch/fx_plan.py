"""Apply a plan's buckets to a post-grad FX graph with torch's own merge utilities (`install_fx(plans=True)`),
or, for a plan of coalesced buckets, as one coalesced functional collective each (`coalesce`, decision 55).

A bucket becomes what torch's bucketing makes of it (`merge_all_gather_bucket`,
`merge_reduce_scatter_bucket`, `merge_all_reduce_bucket` in
`fx_passes/bucketing.py`): the members' inputs copied into one buffer in the
members' order (so FSDP2's parameter order, and the bitwise result of a
reduction, are torch's own), one collective, one wait, and the views or
copies out. The plan's order names the bucketed graph's four nodes per bucket
(MODEL.md "Buckets"); each expands into the FX nodes torch made for it:
everything before the merged collective for the copy-in, everything after its
wait for the copy-out.

Merging cannot be undone in place, so the pass first merges and orders a copy
of the graph; only when that copy validates, and every rank agrees on the
collective sequence it would issue (`overlapsat.torch.agree`), is the graph
itself changed, by the same deterministic steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.graph import Graph, NodeKind
from overlapsat.plan import Plan
from overlapsat.torch.fx import _functional_name, is_collective, is_wait

log = logging.getLogger(__name__)

MERGERS = {"all_gather": "merge_all_gather_bucket", "reduce_scatter": "merge_reduce_scatter_bucket",
           "all_reduce": "merge_all_reduce_bucket"}


def merge_plan(fx_graph: Any, g: Graph, plan: Plan,
               importer: Callable[[Any], Graph]) -> tuple[Graph, list[str], list[str]]:
    """Merge `plan`'s buckets in `fx_graph` (in place), then: the graph `importer` makes of the merged FX graph,
    the plan's order in its node names, and the names of the all_gathers its transports move by copy engine
    (`transport_nodes` finds them, `apply_transports` moves them once the order is applied). Raises GraphError
    where the merged graph and the plan disagree (the order is then not valid on the merged graph, or misses
    one of its nodes)."""
    import torch._inductor.fx_passes.bucketing as tb

    by_name = {n.name: n for n in fx_graph.nodes if n.op == "call_function"}
    expand: dict[str, list[Any]] = {}
    coll_of: dict[str, str] = {}  # a bucket's collective (model name) -> the merged FX collective's name
    for b in plan.buckets:
        op = g.node(b.members[0]).op
        if op not in MERGERS:
            raise GraphError(f"{b.name}: torch has no merge for {op!r} collectives")
        missing = [m for m in b.members if m not in by_name]
        if missing:
            raise GraphError(f"{b.name}: the FX graph has no collective {missing[0]!r}")
        members = [by_name[m] for m in b.members]
        if plan.layout == "coalesced":
            new_nodes = coalesce(fx_graph, members, b.name)
        else:
            waits = [next((u for u in m.users if is_wait(u)), None) for m in members]
            new_nodes, outs = getattr(tb, MERGERS[op])(fx_graph, members)
            if op != "all_gather":  # copied in at once, where the plan puts the copy-in (decision 81)
                from overlapsat.torch.copy_out import cat_at_once

                new_nodes = cat_at_once(fx_graph, new_nodes)
            else:  # copied out at once, where the plan puts the copy-out (decision 81)
                from overlapsat.torch.copy_out import copy_out_at_once

                made = new_nodes
                if all(w in outs for w in waits):
                    made = copy_out_at_once(fx_graph, new_nodes, [outs[w] for w in waits])
                if made is new_nodes:
                    log.warning("overlapsat: %s: torch's merge left copy-outs this pass cannot replace; Inductor "
                                "computes them at their readers, and the graph may peak above its model "
                                "(decision 81)", b.name)
                new_nodes = made
        ci = next((i for i, n in enumerate(new_nodes) if is_collective(n)), None)
        wi = next((i for i, n in enumerate(new_nodes) if is_wait(n)), None)
        if ci is None or wi is None or wi < ci:
            raise GraphError(f"{b.name}: torch's merge made no collective followed by its wait")
        c_in, coll, wait, c_out = b.nodes
        if plan.layout == "coalesced":  # the collective and its getitems; every wait; nothing copied
            expand[c_in], expand[coll], expand[c_out] = [], new_nodes[:wi], []
            expand[wait] = new_nodes[wi:]
        else:
            expand[c_in], expand[coll] = new_nodes[:ci], [new_nodes[ci]]
            expand[wait], expand[c_out] = new_nodes[ci + 1:wi + 1], new_nodes[wi + 1:]
        coll_of[coll] = new_nodes[ci].name
    if plan.buckets:  # torch's merge puts a bucket after its last member, before which users of the first
        # member's wait may stand; torch 2.11 leaves them there (2.13 sorts the region), so the node list is
        # sorted again, keeping its order where it can (the plan's order then places every node)
        from torch._inductor.pattern_matcher import stable_topological_sort

        stable_topological_sort(fx_graph)
    live = {n.name: n for n in fx_graph.nodes if n.op == "call_function"}
    pos = {n: i for i, n in enumerate(fx_graph.nodes)}
    order: list[str] = []
    for nm in plan.order:
        if nm in expand:
            order += [n.name for n in sorted((n for n in expand[nm] if n.name in live), key=pos.__getitem__)]
        elif nm in live:
            order.append(nm)
        # else: a node torch's merge folded in (a dtype conversion before a gather)
    h = importer(fx_graph)
    left = sorted(set(h.names) - set(order))
    if left or len(order) != len(set(order)):
        raise GraphError(f"the merged FX graph and the plan differ: nodes the plan does not place: {left[:5]}")
    from overlapsat.validate import validate

    vs = validate(h, order, collective_order="free", limit=1)
    if vs:
        raise GraphError(f"the plan's order is not valid on the merged FX graph ({vs[0]})")
    # the collective sequence each group issues is the plan's (validated on the bucketed model graph)
    want = [coll_of.get(nm, nm) for nm in plan.order
            if nm in coll_of or (nm in g.index and g.node(nm).kind is NodeKind.COLLECTIVE)]
    got = [nm for nm in order if h.node(nm).kind is NodeKind.COLLECTIVE]
    if got != want:
        raise GraphError("the merged FX graph issues its collectives in another sequence than the plan's")
    ce = [coll_of.get(nm, nm) for nm in plan.transports]  # the FX names of the copy-engine all_gathers
    return h, order, ce


COALESCED = {"all_gather_into_tensor": "all_gather_into_tensor_coalesced",
             "reduce_scatter_tensor": "reduce_scatter_tensor_coalesced", "all_reduce": "all_reduce_coalesced"}


def coalesce(fx_graph: Any, members: list[Any], name: str) -> list[Any]:
    """Replace `members` (functional collectives of one key, each with one wait) by one coalesced collective of
    their inputs, in their order (decision 55): NCCL runs it as one group call into each member's own output, so
    nothing is copied. Returns the new nodes in graph order: the collective, a getitem per member, a wait per
    member; every user of a member's wait reads its new wait. Raises GraphError before any change where a member
    is not a plain functional collective of the same operation with one wait."""
    import operator

    import torch

    fnames = {_functional_name(m) for m in members}
    fname = next(iter(fnames)) if len(fnames) == 1 else None
    if fname not in COALESCED:
        raise GraphError(f"{name}: coalesced buckets merge one of {', '.join(COALESCED)} (out= variants excepted); "
                         f"its members are {sorted(map(str, fnames))}")
    waits = []
    for m in members:
        ws = [u for u in m.users if is_wait(u)]
        if len(ws) != 1 or len(m.users) != 1 or m.kwargs:
            raise GraphError(f"{name}: member {m.name!r} must have exactly one user, its wait, and no keyword "
                             f"arguments (it has users {[u.name for u in m.users]})")
        waits.append(ws[0])
    if len({tuple(map(str, m.args[1:])) for m in members}) != 1:
        raise GraphError(f"{name}: members differ in their group or reduce op: {[m.args[1:] for m in members]}")
    target = getattr(torch.ops._c10d_functional, COALESCED[fname]).default
    pos = {n: i for i, n in enumerate(fx_graph.nodes)}
    last = max(members, key=pos.__getitem__)
    with fx_graph.inserting_after(last):
        coll = fx_graph.call_function(target, ([m.args[0] for m in members], *members[0].args[1:]))
    coll.meta["val"] = [m.meta.get("val") for m in members]
    new = [coll]
    at = coll
    for i, m in enumerate(members):
        with fx_graph.inserting_after(at):
            at = fx_graph.call_function(operator.getitem, (coll, i))
        at.meta["val"] = m.meta.get("val")
        new.append(at)
    for w, item in zip(waits, new[1:]):
        with fx_graph.inserting_after(new[-1]):
            nw = fx_graph.call_function(w.target, (item, *w.args[1:]), dict(w.kwargs))
        nw.meta.update(w.meta)
        w.replace_all_uses_with(nw)
        new.append(nw)
    for w, m in zip(waits, members):
        fx_graph.erase_node(w)
        fx_graph.erase_node(m)
    return new


GATHERS = ("all_gather_into_tensor", "all_gather_into_tensor_out")


def transport_nodes(fx_graph: Any, names: list[str]) -> list[Any]:
    """The FX all_gathers of `names` (`merge_plan`'s third answer). Raises GraphError naming one that is missing,
    is no all_gather, or whose output is not on a CUDA device (the copy engine moves CUDA memory only)."""
    by_name = {n.name: n for n in fx_graph.nodes if n.op == "call_function"}
    out = []
    for nm in names:
        n = by_name.get(nm)
        if n is None or _functional_name(n) not in GATHERS:
            raise GraphError(f"transport of {nm!r}: the FX graph has no all_gather of that name")
        val = n.meta.get("val")
        if getattr(getattr(val, "device", None), "type", None) != "cuda":
            raise GraphError(f"transport of {nm!r}: its output is not on a CUDA device "
                             f"({getattr(val, 'device', 'unknown')}); the copy engine moves CUDA memory only")
        out.append(n)
    return out


def apply_transports(fx_graph: Any, nodes: list[Any]) -> list[Any]:
    """Replace each all_gather of `nodes` by torch's copy-engine all_gather (symmetric memory's
    `_low_contention_all_gather`, which torch's Inductor lowers as a collective with its wait), in its place: its
    input and group stay, its wait and every other user read the new node. Enables symmetric memory for the
    groups first, so that a group that cannot be enabled raises before anything changes. The new nodes."""
    if not nodes:
        return []
    import torch
    import torch.distributed._symmetric_memory as symm  # registers the op

    for g in dict.fromkeys(n.args[2] for n in nodes):
        if not symm.is_symm_mem_enabled_for_group(g):
            symm.enable_symm_mem_for_group(g)
    target = torch.ops.symm_mem._low_contention_all_gather.default
    new_nodes = []
    for n in nodes:
        with fx_graph.inserting_before(n):
            new = fx_graph.call_function(target, (n.args[0], n.args[2]))
        new.meta.update(n.meta)
        n.replace_all_uses_with(new)
        fx_graph.erase_node(n)
        new_nodes.append(new)
    fx_graph.lint()
    return new_nodes


__all__ = ["COALESCED", "GATHERS", "MERGERS", "apply_transports", "coalesce", "is_collective", "is_wait", "merge_plan",
           "transport_nodes"]
