"""Turn a post-grad ATen FX graph with functional collectives into an overlapsat Graph (docs/fx.md).

This is the level where current PyTorch plans overlap (`fx_passes/overlap_scheduling.py`).
Every `call_function` node becomes a node, in graph order (the input order):

- `_c10d_functional` collectives (all_gather_into_tensor, reduce_scatter_tensor,
  all_reduce, all_to_all_single, broadcast, the coalesced forms and the `_out`
  variants) are
  collectives; the process group is the group name argument, its size the
  size argument or the registered group's size;
- `wait_tensor` is a wait; a coalesced collective's waits are found through the
  `getitem` that unpacks its result (one collective, several waits: decision 15);
- everything else is compute. Views, `getitem` and other ops that allocate
  nothing are kept (they must stay in the order) with duration 0; the rest are
  priced by the cost model from their FLOPs (torch's FLOP counter) and bytes.
  A node without `meta["val"]` is an error naming it (no silent zero sizes),
  except a `getitem`, which then unpacks an output autograd left empty.

Dependencies are the FX data edges. Memory is counted per storage, as torch's
`MemoryTracker` does: a node allocates the storages of its outputs that no
earlier node produced (a view shares its base's), and a storage is released
after its last reader. `wait_tensor` returns its input at run time, so its
output is an alias, not an allocation; and it reads its collective's inputs,
which stay allocated until the collective completes. Graph inputs: storages of
`primals_*` placeholders (parameters) are a constant, left out of the peak;
`tangents_*` (the gradients a backward graph receives) are held by autograd's
caller until the graph returns, so they count from the start and are never
released (decisions.md 23); other placeholders (saved activations) are
freeable inputs, released after their last reader. Graph outputs are never
released. A kernel that allocates and frees memory inside itself
(`kernel_workspace`) gets a buffer that nothing reads: MODEL.md counts it at
that node's step and frees it there.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.graph import Buffer, Graph, Node, NodeKind
from overlapsat.torch.importer import REDUCE_OPS, group_size_of, key_text
from overlapsat.torch.need import torch_module
from overlapsat.torch.routed import expected_sizes, priced_at, value

log = logging.getLogger(__name__)

COLLECTIVE_OPS = {
    "all_gather_into_tensor": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "all_reduce": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "all_to_all_single": "all_to_all", "broadcast": "broadcast",
}
GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_mm", "_grouped_mm")

FxDurationFn = Callable[[Any, Node], float]  # (fx node, overlapsat node without duration) -> us
WorkspaceFn = Callable[[Any], int]  # fx node -> bytes its kernel allocates and frees inside itself


def kernel_workspace(n: Any) -> int:
    """Bytes the kernel of FX node `n` allocates and frees inside itself, which the graph does not show.
    Known for one kernel: cuDNN's attention backward on CUDA keeps an fp32 accumulator of dQ and fp32 row
    statistics, 4bhsd + 4bhs bytes for a query (b, h, s, d); the allocator measured exactly that on H200s
    (benchmarks/results/gpu_runs.md, runs 36, 37 and 40). Every other op: 0 (unmeasured ones included: see docs/fx.md)."""
    import torch

    if getattr(n.target, "overloadpacket", None) is not torch.ops.aten._scaled_dot_product_cudnn_attention_backward:
        return 0
    q = n.args[1].meta.get("val") if len(n.args) > 1 and hasattr(n.args[1], "meta") else None
    if not isinstance(q, torch.Tensor) or q.device.type != "cuda" or q.dim() != 4:
        return 0
    b, h, s, d = (int(x) for x in q.shape)
    return 4 * b * h * s * d + 4 * b * h * s


def _functional_name(n: Any) -> str | None:
    """'all_gather_into_tensor' for torch.ops._c10d_functional.all_gather_into_tensor.default, else None."""
    t = n.target
    ns = getattr(t, "namespace", None)
    if ns != "_c10d_functional":
        return None
    return str(getattr(t, "_opname", "") or str(t).split(".")[1])


def is_wait(n: Any) -> bool:
    return _functional_name(n) == "wait_tensor"


def is_collective(n: Any) -> bool:
    """A functional collective (torch's merges write the `_out` variants), not its wait."""
    name = _functional_name(n)
    return name is not None and name != "wait_tensor"


def _tensors(val: Any) -> list[Any]:
    import torch

    out: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(val)
    return out


def _storage(t: Any) -> tuple[int, int]:
    """(identity, bytes) of a tensor's storage; a size that depends on the data (an all_to_all's received tokens,
    traced with unbacked symbols) is its expectation under balanced routing where the graph's all_to_alls give
    one (`routed`, decision 89), else 0 bytes, as `_tensor_bytes` counts it, and `unknown_size` says so."""
    st = t.untyped_storage()
    return st._cdata, value(st.nbytes()) or 0


def unknown_size(t: Any) -> bool:
    """Whether a tensor's size depends on the data and has no expectation either (counted 0 bytes)."""
    return value(t.untyped_storage().nbytes()) is None


def expected_size(t: Any) -> bool:
    """Whether a tensor's size depends on the data and is priced at its expectation (decision 89)."""
    nbytes = t.untyped_storage().nbytes()
    return value(nbytes, {}) is None and value(nbytes) is not None  # {}: no symbol bound, only what is known


def bind_routed_sizes(graph: Any) -> dict[Any, int]:
    """The expected value of each routed split size of an FX graph (decision 89), kept for the graphs of its
    ShapeEnv that follow (its backward graph, its nodes after fusion): what `import_fx` prices sizes with."""
    return expected_sizes(list(graph.nodes), lambda n: _functional_name(n) == "all_to_all_single")


def _bucket_key(n: Any, op: str) -> str | None:
    """What torch's bucketers key on beyond the group: the dtype, and for reductions the reduce op
    (`_ag_group_key`, `_rs_group_key`, `_ar_group_key` in fx_passes/bucketing.py)."""
    ts = _tensors(n.meta.get("val"))
    if len(ts) != 1:  # coalesced or unknown: never bucketed
        return None
    red = n.args[1] if len(n.args) > 1 and isinstance(n.args[1], str) else None
    return key_text(op, ts[0].dtype, red)


def _tensor_bytes(t: Any) -> int:
    """A tensor's bytes; a data-dependent size at its expectation (decision 89), else 0."""
    return (value(t.numel()) or 0) * t.element_size()


def _group(n: Any, name: str, group_sizes: dict[str, int] | None) -> tuple[str, int]:
    strs = [a for a in n.args if isinstance(a, str) and a not in REDUCE_OPS]
    ints = [a for a in n.args if isinstance(a, int) and not isinstance(a, bool)]
    if not strs:
        raise GraphError(f"FX node {n.name!r} ({name}): no process group name among its arguments")
    gname = strs[-1]
    size = (group_sizes or {}).get(gname)
    if size is None and ints and name not in ("all_reduce", "all_reduce_coalesced", "broadcast"):
        size = ints[-1]
    if size is None:
        size = group_size_of(gname)
    if size is None:
        raise GraphError(f"FX node {n.name!r} ({name}): the size of process group {gname!r} is unknown; "
                         f"pass group_sizes={{{gname!r}: N}}")
    return gname, int(size)


def _flops(n: Any) -> float:
    """FLOPs of an ATen op from torch's FLOP counter registry (0 when it has no formula)."""
    try:
        import torch
        from torch.utils.flop_counter import flop_registry

        packet = getattr(n.target, "overloadpacket", None)
        fn = flop_registry.get(packet)
        if fn is None:  # the CPU flash kernels (a fake-tensor trace on CPU) take the GPU flash kernels' arguments
            alias = {"_scaled_dot_product_flash_attention_for_cpu": "_scaled_dot_product_flash_attention",
                     "_scaled_dot_product_flash_attention_for_cpu_backward":
                         "_scaled_dot_product_flash_attention_backward"}.get(getattr(packet, "__name__", ""))
            fn = flop_registry.get(getattr(torch.ops.aten, alias)) if alias else None
        if fn is None:
            return 0.0

        import torch.fx as fx

        # the registry's formulas take the op's own (fake) tensors and `out_val`, and read the shapes
        # themselves; they once got shapes and `out_shape`, raised, and every GEMM was priced by bytes alone
        args, kwargs = fx.node.map_arg((n.args, n.kwargs), lambda a: a.meta.get("val"))
        return float(fn(*args, out_val=n.meta.get("val"), **kwargs))
    except Exception:  # noqa: BLE001 - a formula that does not fit these arguments: no FLOPs, bytes only
        return 0.0


def _returns_nothing(n: Any) -> bool:
    """Whether `n` calls an op whose schema declares no result (it writes into its arguments)."""
    schema = getattr(n.target, "_schema", None)
    return schema is not None and not schema.returns


def import_fx(gm: Any, *, name: str = "fx", durations: FxDurationFn | str | None = None,
              group_sizes: dict[str, int] | None = None, profile: str = "h200",
              launch_us: float | None = None, wait_us: float | None = None, fusion: bool = True,
              workspaces: WorkspaceFn | None = kernel_workspace, inline: bool = False) -> Graph:
    """The overlapsat Graph of a post-grad FX GraphModule (or fx.Graph), in its node order.

    `durations`: None prices nodes with overlapsat's cost model for `profile`;
    "inductor" uses torch's own estimators (roofline for compute, its
    analytical model for collectives, as OverlapScheduler does); a callable
    `(fx_node, node) -> us` prices each node itself. `launch_us` and
    `wait_us` are what issuing a collective and a `wait_tensor` cost the
    compute stream (decisions.md 17); None takes the profile's values.
    `fusion`: ops without FLOPs are priced as Inductor fuses them (a chain
    reads its outside inputs and writes its escaping outputs once; docs/fx.md);
    False prices each alone. `workspaces`: bytes a node's kernel allocates and
    frees inside itself (`kernel_workspace`); None counts none. `inline=True`:
    a pointwise op's output that Inductor computes inside its reader's kernel
    holds no memory (`inlined`, decision 82); off by default, since the FX
    budget it loosens let a coalesced plan allocate 8.5 % over the captured
    order on the CPU allocator, where the fused reading under-read it.
    A size the data decides (expert parallelism's routed tokens) is priced
    at balanced routing where an all_to_all's input rows give it, else 0
    bytes; `meta` counts both kinds (`overlapsat.torch.routed`, decision 89).
    """
    torch_module()
    import torch.fx as fx

    graph = gm.graph if hasattr(gm, "graph") else gm
    if not isinstance(graph, fx.Graph):
        raise GraphError(f"import_fx: expected a GraphModule or fx.Graph, got {type(gm).__name__}")
    with priced_at(bind_routed_sizes(graph)):
        return _import_fx(graph, name=name, durations=durations, group_sizes=group_sizes, profile=profile,
                          launch_us=launch_us, wait_us=wait_us, fusion=fusion, workspaces=workspaces, inline=inline)


def _import_fx(graph: Any, *, name: str, durations: FxDurationFn | str | None, group_sizes: dict[str, int] | None,
               profile: str, launch_us: float | None, wait_us: float | None, fusion: bool,
               workspaces: WorkspaceFn | None, inline: bool) -> Graph:
    """`import_fx` inside `priced_at` (data-dependent sizes at their expectation)."""
    fx_nodes = list(graph.nodes)
    calls = [n for n in fx_nodes if n.op == "call_function"]
    kind: dict[Any, NodeKind] = {}
    fields: dict[Any, dict[str, Any]] = {}
    # a getitem without one unpacks an output autograd left empty (a None gradient): nothing to count
    # and an op whose schema has no result (an in-place foreach: torch 2.11's bucket merges copy in with
    # `_foreach_copy_`, and leave it without one) has nothing to size
    missing = [n.name for n in fx_nodes if n.op in ("call_function", "placeholder") and "val" not in n.meta
               and n.target is not operator.getitem and not _returns_nothing(n)]
    if missing:  # sizes are what memory and pricing are made of: no silent zeros
        raise GraphError(f"FX nodes without meta['val'] (trace with fake tensors, or import inside Inductor's "
                         f"post-grad pass): {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    for n in calls:
        fname = _functional_name(n)
        if fname is not None and fname.endswith("_out") and fname[:-4] in COLLECTIVE_OPS:
            fname = fname[:-4]  # the out= variant (torch's bucketing writes into a preallocated buffer)
        if fname == "wait_tensor":
            kind[n] = NodeKind.WAIT
        elif fname in COLLECTIVE_OPS:
            gname, size = _group(n, fname, group_sizes)
            ins = [_tensor_bytes(t) for a in n.all_input_nodes for t in _tensors(a.meta.get("val"))]
            outs = [_tensor_bytes(t) for t in _tensors(n.meta.get("val"))]
            if fname.endswith("_coalesced"):  # one transfer of every tensor
                nbytes = max(sum(ins), sum(outs))
            else:
                nbytes = max([0, *ins, *outs])
            kind[n] = NodeKind.COLLECTIVE
            fields[n] = {"op": COLLECTIVE_OPS[fname], "group": gname, "group_size": size, "nbytes": nbytes,
                         "bucket_key": _bucket_key(n, COLLECTIVE_OPS[fname])}
        elif fname is not None:
            raise GraphError(f"FX node {n.name!r}: functional collective {fname!r} is not supported; "
                             f"supported: {', '.join(sorted(COLLECTIVE_OPS))}, wait_tensor")
        else:
            kind[n] = NodeKind.COMPUTE

    def collective_behind(a: Any) -> Any | None:
        for _ in range(3):  # the wait's input, or the getitem that unpacks a coalesced result
            if kind.get(a) is NodeKind.COLLECTIVE:
                return a
            if a.op == "call_function" and a.target is operator.getitem and a.all_input_nodes:
                a = a.all_input_nodes[0]
            else:
                return None
        return None

    coll_of: dict[Any, Any] = {}
    no_op: set[Any] = set()  # a second wait on a waited result returns its input at once: a no-op
    for n in calls:
        if kind[n] is NodeKind.WAIT:
            c = next((c for c in map(collective_behind, n.all_input_nodes) if c is not None), None)
            if c is not None:
                coll_of[n] = c
            elif n.all_input_nodes and all(kind.get(a) is NodeKind.WAIT for a in n.all_input_nodes):
                no_op.add(n)
            else:  # e.g. a collective issued in another graph: its remaining time is unknown here
                raise GraphError(f"FX node {n.name!r}: wait_tensor of {[a.name for a in n.all_input_nodes]} "
                                 "waits on no collective of this graph")
    # storages: the first node whose output holds one allocates it
    produced: dict[int, tuple[Any, int]] = {}  # storage -> (allocating fx node, bytes)
    out_storages: dict[Any, list[int]] = {}
    same: dict[int, int] = {}  # a wait's traced output storage -> its input's (the same memory at run time)
    for n in fx_nodes:
        if n.op == "output":
            continue
        sts: list[int] = []
        if kind.get(n) is NodeKind.WAIT:  # returns its input at run time
            sts = [s for a in n.all_input_nodes for s in out_storages.get(a, [])]
            outs = _tensors(n.meta.get("val"))
            for t, sid in zip(outs, sts if len(outs) == len(sts) else []):
                same[_storage(t)[0]] = sid
        elif _writes_into(n, kind) and len(out_storages.get(n.kwargs["out"], [])) == len(_tensors(n.meta.get("val"))):
            # an out= collective (torch's bucket merges) returns the buffer it was given: no allocation of its own
            sts = list(out_storages[n.kwargs["out"]])
            for t, sid in zip(_tensors(n.meta.get("val")), sts):
                same[_storage(t)[0]] = sid
        else:
            for t in _tensors(n.meta.get("val")):
                sid, nb = _storage(t)
                sid = same.get(sid, sid)  # a view of a wait's result views the collective's buffer
                sts.append(sid)
                produced.setdefault(sid, (n, nb))
        out_storages[n] = sts

    unpack = {n for n in calls if n.target is operator.getitem and n.all_input_nodes
              and kind.get(n.all_input_nodes[0]) is NodeKind.COLLECTIVE}

    gone = inlined(calls, kind) if inline else set()
    price = _pricer(durations, profile)
    launch, wait = _stream_costs(profile, launch_us, wait_us)
    flops = {n: _flops(n) for n in calls if kind[n] is NodeKind.COMPUTE}
    fused = _fused_bytes(calls, kind, flops) if fusion else {}
    nodes: list[Node] = []
    for n in calls:
        k = kind[n]
        if n in no_op:
            nodes.append(Node(n.name, NodeKind.COMPUTE, 0.0))
            continue
        if k is NodeKind.WAIT:
            nodes.append(Node(n.name, k, wait, collective=coll_of[n].name))
            continue
        if k is NodeKind.COLLECTIVE:
            nd = Node(n.name, k, 0.0, **fields[n])
        else:
            fresh = any(produced.get(s, (None,))[0] is n for s in out_storages[n])
            if _is_view(n) or not fresh:
                nodes.append(Node(n.name, k, 0.0))
                continue
            if n in fused:
                nbytes = fused[n]
                if not nbytes:  # inside a fused chain: no kernel of its own
                    nodes.append(Node(n.name, k, 0.0))
                    continue
            else:
                nbytes = sum(_tensor_bytes(t) for a in n.all_input_nodes for t in _tensors(a.meta.get("val")))
                nbytes += sum(_tensor_bytes(t) for t in _tensors(n.meta.get("val")))
            op = str(getattr(getattr(n.target, "overloadpacket", None), "__name__", n.target))
            nd = Node(n.name, k, 0.0, flops=flops[n], bytes_accessed=float(nbytes), gemm_like=op in GEMM_OPS)
        nodes.append(replace(nd, duration=round(max(0.0, float(price(n, nd))), 3),
                             launch=launch if k is NodeKind.COLLECTIVE else 0.0))

    in_graph = set(calls)
    edges = sorted({(a.name, n.name) for n in calls for a in n.all_input_nodes if a in in_graph})
    # readers of each storage (any alias of it); a size or stride query reads no data (a collective's output has
    # its shape when it is issued), so it holds no buffer and need not wait (decision 78)
    # an inlined op's inputs are read by the kernels it is computed in, its readers' (through views and chains)
    readers: dict[int, list[str]] = {}
    for n in calls:
        if _metadata_only(n):
            continue
        names = [x.name for x in _kernels_of(n, gone)] if n in gone else [n.name]
        seen: set[int] = set()
        for a in n.all_input_nodes:
            for s in out_storages.get(a, []):
                if s not in seen and not (n in unpack and kind.get(produced.get(s, (None,))[0]) is NodeKind.COLLECTIVE):
                    seen.add(s)
                    rs = readers.setdefault(s, [])
                    rs += [x for x in names if x not in rs]
    # a collective reads its inputs until it completes, and the work object holds them until the wait (as it
    # holds them from the caching allocator on NCCL): each wait reads its collective's inputs (decision 18)
    waits_of: dict[Any, list[Any]] = {}
    for w, c in coll_of.items():
        waits_of.setdefault(c, []).append(w)
    for c, ws in waits_of.items():
        for s in sorted({s for a in c.all_input_nodes for s in out_storages.get(a, [])}):
            rs = readers.setdefault(s, [])
            rs += [w.name for w in ws if w.name not in rs]
    output_storages: set[int] = set()
    out_node = next((n for n in fx_nodes if n.op == "output"), None)
    if out_node is not None:
        for a in out_node.all_input_nodes:
            output_storages.update(out_storages.get(a, []))
    buffers: list[Buffer] = []
    count: dict[str, int] = {}
    for sid, (owner, nb) in produced.items():
        if owner in gone:  # computed inside its readers' kernels: never allocated
            continue
        cons = tuple(c for c in readers.get(sid, []) if c != owner.name)
        k = count[owner.name] = count.get(owner.name, -1) + 1
        bname = f"{owner.name}#{k}"
        if owner.op == "placeholder":
            if owner.name.startswith("primals"):
                continue  # parameters: a constant, outside the peak (torch never releases them either)
            held = sid in output_storages or owner.name.startswith("tangents")  # decisions.md 23
            buffers.append(Buffer(bname, None, cons, nb, nb, output=held, freeable_input=True))
        elif owner.op == "call_function":
            buffers.append(Buffer(bname, owner.name, cons, nb, nb, output=sid in output_storages))
    for n in calls:  # read by nothing: allocated and released at the node's own step (MODEL.md, Memory)
        ws = workspaces(n) if workspaces is not None and kind[n] is NodeKind.COMPUTE and n not in no_op else 0
        if ws > 0:
            buffers.append(Buffer(f"{n.name}#workspace", n.name, (), ws, ws))
    meta = {"source": "fx", "primals_bytes": sum(nb for o, nb in produced.values()
                                                  if o.op == "placeholder" and o.name.startswith("primals")),
            # what priced it: a plan for it must price merged collectives alike (store.solve_one checks)
            "pricing": profile if durations is None else durations if isinstance(durations, str) else "your durations"}
    unknown = sum(unknown_size(t) for n in calls for t in _tensors(n.meta.get("val")))
    expected = sum(expected_size(t) for n in calls for t in _tensors(n.meta.get("val")))
    if unknown or expected:  # said, not silent: what the memory model makes of sizes the data decides
        meta["data_dependent_outputs"] = unknown + expected
        meta["data_dependent_expected"] = expected
        log.info("overlapsat: %d output(s) of graph %r have data-dependent sizes (e.g. all_to_all's received "
                 "tokens): %d priced at balanced routing (decision 89), %d counted as 0 bytes", unknown + expected,
                 name, expected, unknown)
    return Graph(nodes, buffers, edges, (), name, meta)


def inlined(calls: list[Any], kind: dict[Any, NodeKind]) -> set[Any]:
    """Ops whose output Inductor never allocates (decision 82): a pointwise op it lowers itself, whose output
    is read, through views, by ops that are all pointwise ops or reductions Inductor lowers and whose inputs it
    need not realize, and is no graph output. Inductor then computes the value inside its readers' kernels. With
    one reader, always; with more (decision 87), only while Inductor would not store the value on reuse
    (`should_realize_on_reuse`): it reads at most `realize_reads_threshold` tensors, through the ops inlined
    into it, and it and those ops are fewer than `_SMALL_INNER` ops, below Inductor's own size for a large
    inner function. What the rule misses leaves the model high; where Inductor stores a value the rule inlined,
    the check after fusion holds the plan to its budget."""
    import torch
    from torch._inductor import config as icfg
    from torch._inductor import lowering

    def complex_(x: Any) -> bool:  # Inductor generates no code for complex values: it calls eager, which stores
        return any(getattr(t, "dtype", None) is not None and t.dtype.is_complex
                   for a in (x, *x.all_input_nodes) for t in _tensors(a.meta.get("val")))

    def lowered(x: Any, tags: tuple[Any, ...]) -> bool:
        t = x.target
        pkt = getattr(t, "overloadpacket", None)
        return (kind.get(x) is NodeKind.COMPUTE and not _is_view(x) and any(tag in getattr(t, "tags", ()) for tag in tags)
                and not complex_(x)
                and (t in lowering.lowerings or pkt in lowering.lowerings)
                and t not in lowering.fallbacks and pkt not in lowering.fallbacks
                and t not in lowering.needs_realized_inputs and pkt not in lowering.needs_realized_inputs)

    pointwise = (torch.Tag.pointwise,)
    fusing = (torch.Tag.pointwise, torch.Tag.reduction)
    out: set[Any] = set()
    reads: dict[Any, set[Any]] = {}  # an inlined op's tensors read, through the ops inlined into it
    size: dict[Any, int] = {}  # an inlined op's count of ops, itself and those inlined into it
    for n in calls:
        if not lowered(n, pointwise):
            continue
        readers, stack, ok = set(), list(n.users), True
        while stack and ok:
            u = stack.pop()
            if u.op == "output":
                ok = False
            elif _is_view(u):
                stack.extend(u.users)
            elif not _metadata_only(u):
                readers.add(u)
        if not (ok and readers and all(lowered(r, fusing) for r in readers)):
            continue
        mine: set[Any] = set()
        ops = 1
        for a in n.all_input_nodes:
            while _is_view(a) and a.all_input_nodes:
                a = a.all_input_nodes[0]
            if a in out:
                mine |= reads[a]
                ops += size[a]
            elif _tensors(a.meta.get("val")):
                mine.add(a)
        heavy = any(str(getattr(x, "device", "")) == "cpu" for x in _tensors(n.meta.get("val"))) and any(
            h in str(n.target) for h in _CPU_HEAVY)  # stored on reuse on CPU whatever its size
        if len(readers) == 1 or (len(mine) <= icfg.realize_reads_threshold and ops < _SMALL_INNER and not heavy):
            out.add(n)
            reads[n], size[n] = mine, ops
    return out


_SMALL_INNER = 10  # ops: well below Inductor's `realize_opcount_threshold` (30) for a large inner function
_CPU_HEAVY = ("exp", "log", "sigmoid", "tanh")  # what Inductor's CPU heuristic stores when read twice


def _kernels_of(n: Any, gone: set[Any]) -> list[Any]:
    """The ops whose kernels compute an inlined op `n`: its readers, through views and further inlined ops."""
    out, stack, seen = [], list(n.users), set()
    while stack:
        u = stack.pop()
        if u in seen or u.op != "call_function":
            continue
        seen.add(u)
        if _is_view(u) or u in gone:
            stack.extend(u.users)
        if not _is_view(u) and not _metadata_only(u):
            out.append(u)
    return out


def _writes_into(n: Any, kind: dict[Any, NodeKind]) -> bool:
    """A collective's out= variant with its `out` buffer given as a node of the graph."""
    name = _functional_name(n)
    return (kind.get(n) is NodeKind.COLLECTIVE and name is not None and name.endswith("_out")
            and isinstance(n.kwargs.get("out"), type(n)))


def _metadata_only(n: Any) -> bool:
    """A query of a tensor's size, stride, element count or offset (`aten.sym_size.int`, ...): no data read."""
    return n.op == "call_function" and str(n.target).startswith("aten.sym_")


def _is_view(n: Any) -> bool:
    return n.op == "call_function" and (n.target is operator.getitem or getattr(n.target, "is_view", False))


def _fused_bytes(calls: list[Any], kind: dict[Any, NodeKind], flops: dict[Any, float]) -> dict[Any, float]:
    """Bytes a fused kernel moves for each op without FLOPs (pointwise, reductions): Inductor fuses chains of
    them, so a chain reads what comes from outside it once and writes what leaves it once. An op's input
    counts when its producer (through views) is not such an op; its output when a reader (through views) is
    not, or it is a graph output. An op that moves nothing is inside a chain."""
    def fusable(x: Any) -> bool:  # attention kernels without a FLOP formula are still kernels of their own
        return (kind.get(x) is NodeKind.COMPUTE and not _is_view(x) and not flops.get(x)
                and "attention" not in str(x.target))

    def source(a: Any) -> Any:
        while _is_view(a) and a.all_input_nodes:
            a = a.all_input_nodes[0]
        return a

    def escapes(x: Any) -> bool:
        stack, seen = list(x.users), set()
        while stack:
            u = stack.pop()
            if u in seen:
                continue
            seen.add(u)
            if u.op == "output" or not fusable(u) and not _is_view(u):
                return True
            if _is_view(u):
                stack.extend(u.users)
        return False

    out: dict[Any, float] = {}
    for n in calls:
        if not fusable(n):
            continue
        b = sum(_tensor_bytes(t) for a in n.all_input_nodes if not fusable(source(a))
                for t in _tensors(a.meta.get("val")))
        if escapes(n):
            b += sum(_tensor_bytes(t) for t in _tensors(n.meta.get("val")))
        out[n] = float(b)
    return out


def _stream_costs(profile: str, launch_us: float | None, wait_us: float | None) -> tuple[float, float]:
    """(launch, wait) in us: given, or the profile's (decisions.md 17)."""
    from overlapsat.cost.hardware import load_profile

    hw = load_profile(profile) if launch_us is None or wait_us is None else None
    out = []
    for what, v, default in (("launch_us", launch_us, hw and hw.collective_launch_us),
                             ("wait_us", wait_us, hw and hw.wait_us)):
        v = default if v is None else v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise GraphError(f"import_fx: {what} must be a finite number >= 0, got {v!r}")
        out.append(float(v))
    return out[0], out[1]


def _pricer(durations: FxDurationFn | str | None, profile: str) -> FxDurationFn:
    if callable(durations):
        return durations
    if durations == "inductor":
        return _inductor_estimate
    if durations is not None:
        raise GraphError(f"durations must be a callable, 'inductor' or None; got {durations!r}")
    from overlapsat.cost import cost_model

    model = cost_model(profile)
    return lambda n, nd: model.duration(nd)


def _inductor_estimate(n: Any, nd: Node) -> float:
    """torch's own analytical estimates (ms), as OverlapScheduler's deterministic mode uses them, in us."""
    from torch._inductor.fx_passes import overlap_scheduling as osched

    if nd.kind is NodeKind.COLLECTIVE:
        return 1e3 * float(osched.estimate_collective_time(n))
    return 1e3 * float(osched.estimate_roofline_runtime_ms(n)) if osched.is_compute_node(n) else 0.0


__all__ = ["COLLECTIVE_OPS", "import_fx"]
