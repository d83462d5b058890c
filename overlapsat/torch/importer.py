"""Turn the Inductor scheduler nodes a reorder pass receives into an overlapsat Graph.

Call `import_snodes(snodes)` from inside a `reorder_for_compute_comm_overlap_passes`
callable (V.graph must be set). Node names are the scheduler nodes' names,
so a schedule maps straight back to them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.graph import Buffer, Graph, Node, NodeKind
from overlapsat.torch.need import torch_module

_OPS = {
    "all_gather": "all_gather", "reduce_scatter": "reduce_scatter", "all_reduce": "all_reduce",
    "all_to_all": "all_to_all", "broadcast": "broadcast", "alltoall": "all_to_all",
}

DurationFn = Callable[[Node], float]


def _op_name(node: Any) -> str:
    raw = str(getattr(node, "op_overload", "") or getattr(node, "python_kernel_name", "") or "")
    for key, op in _OPS.items():
        if key in raw:
            return op
    return raw.split(".")[-2] if raw.count(".") >= 2 else (raw or "collective")


def _tensor_bytes(x: Any) -> int:
    try:
        from torch._inductor.virtualized import V

        numel = V.graph.sizevars.optimization_hint(x.get_numel(), fallback=0)
        return int(numel) * x.get_dtype().itemsize
    except Exception:  # symbolic or opaque: unknown size
        return 0


REDUCE_OPS = ("sum", "avg", "max", "min", "product")  # string arguments of collectives that are not group names


def group_size_of(name: str) -> int | None:
    """Size of the process group registered under `name` (functional collectives name their group), if any."""
    try:
        from torch.distributed.distributed_c10d import _resolve_process_group

        return int(_resolve_process_group(name).size())
    except Exception:  # noqa: BLE001 - unknown name, no process group, older torch: fall back to the arguments
        return None


def _collective_fields(snode: Any) -> dict[str, Any]:
    node = snode.node
    op = _op_name(node)
    ins = [_tensor_bytes(i) for i in getattr(node, "inputs", []) or []]
    out = 0
    layout = getattr(node, "layout", None)
    if layout is not None and hasattr(layout, "size"):
        try:
            out = int(math.prod(int(s) for s in layout.size)) * layout.dtype.itemsize
        except (TypeError, ValueError, AttributeError):  # NoneLayout (in-place) or symbolic
            out = 0
    args = list(getattr(node, "constant_args", ()) or ())
    ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    strs = [a for a in args if isinstance(a, str) and a not in REDUCE_OPS]
    # the group's size from its name: all_reduce carries no size argument (read as 1, priced 0 us before)
    group_size = group_size_of(strs[-1]) if strs else None
    if group_size is None:
        group_size = ints[-1] if ints else 1
    group = f"pg{strs[-1]}" if strs else "default"
    return {"op": op, "nbytes": max([out, *ins]), "group_size": max(1, group_size), "group": group,
            "bucket_key": _bucket_key(node, op, args)}


def _bucket_key(node: Any, op: str, args: list[Any]) -> str | None:
    """What torch's bucketers key on beyond the group, as the FX importer writes it (`fx._bucket_key`): the
    dtype, and for reductions the reduce op; None where it is not one tensor (coalesced) or not known."""
    ins = list(getattr(node, "inputs", []) or [])
    if len(ins) != 1:  # coalesced, or no input: never bucketed
        return None
    try:
        dtype = ins[0].get_dtype()
    except Exception:  # noqa: BLE001 - an input without a dtype: unknown
        return None
    return key_text(op, dtype, next((a for a in args if isinstance(a, str) and a in REDUCE_OPS), None))


def key_text(op: str, dtype: Any, reduce_op: str | None) -> str | None:
    """A collective's `bucket_key` as both importers write it: the dtype ("bfloat16"); for reductions
    "reduce_op,dtype", and None where the reduce op is unknown."""
    dt = str(dtype).removeprefix("torch.")
    if op in ("reduce_scatter", "all_reduce"):
        return f"{reduce_op},{dt}" if reduce_op is not None else None
    return dt


def _is_multi_output(snode: Any) -> bool:
    """An Inductor MultiOutput: a view into its parent's outputs; no kernel, no time."""
    return type(getattr(snode, "node", None)).__name__ == "MultiOutput"


def default_durations(node: Node) -> float:
    """Inductor's own estimates are 0 on CPU: price with the calibrated H200 model."""
    from overlapsat.cost import cost_model

    global _DEFAULT_MODEL
    if _DEFAULT_MODEL is None:
        _DEFAULT_MODEL = cost_model("h200")
    return round(_DEFAULT_MODEL.duration(node), 3)


_DEFAULT_MODEL: Any = None


INDUCTOR = "inductor"  # durations=INDUCTOR: Inductor's own runtime estimates (ns), kept raw for the ports


def import_snodes(snodes: Sequence[Any], *, name: str = "inductor", durations: DurationFn | str | None = None,
                  held_gradients: bool = False) -> Graph:
    """The graph of `snodes`, in their order (the input order).

    `durations`: a callable pricing each node in us, "inductor" for Inductor's
    own estimates (0 on CPU), or None for the calibrated H200 model.
    `held_gradients`: count a backward graph's incoming gradients (`tangents_*`), which autograd holds until the
    graph returns, as held from the start (decision 93): what the allocator holds, for the budget check after
    fusion. Off, the graph's memory is Inductor's own estimate's, as the ports of its passes need.
    """
    torch_module()
    from torch._inductor import comms
    from torch._inductor.dependencies import WeakDep
    from torch._inductor.memory import get_freeable_input_buf
    from torch._inductor.utils import OrderedSet
    from torch._inductor.virtualized import V

    if isinstance(durations, str) and durations != INDUCTOR:
        raise GraphError(f"durations must be a callable, {INDUCTOR!r} or None; got {durations!r}")
    raw: dict[str, float] = {}
    if durations == INDUCTOR:
        raw = {s.get_name(): float(comms.estimate_op_runtime(s)) for s in snodes}

        def price(nd: Node) -> float:
            return raw[nd.name] / 1e3
    else:
        price = durations or default_durations  # type: ignore[assignment]
    by_name = {s.get_name(): s for s in snodes}
    in_graph = set(by_name)
    sched = V.graph.scheduler
    outputs = set(V.graph.get_output_names())
    nodes: list[Node] = []
    for s in snodes:
        nm = s.get_name()
        if comms.contains_collective(s):
            node = Node(nm, NodeKind.COLLECTIVE, 0.0, **_collective_fields(s))
        elif comms.contains_wait(s):
            node = Node(nm, NodeKind.WAIT, 0.0, collective="")
        else:
            flops = s.estimate_flops() or 0
            try:
                nbytes = s.get_read_write_buffers_sizes() or 0
            except Exception:
                nbytes = 0
            node = Node(nm, NodeKind.COMPUTE, 0.0, flops=float(flops), bytes_accessed=float(nbytes),
                        gemm_like=bool(comms.contains_gemm_like(s)))
        nodes.append(node)

    def producer_of(dep_name: str) -> str | None:
        buf = sched.name_to_buf.get(dep_name)
        if buf is None:
            return None
        fused = sched.name_to_fused_node.get(buf.defining_op_name())
        return fused.get_name() if fused is not None and fused.get_name() in in_graph else None

    edges: list[tuple[str, str]] = []
    fake: list[tuple[str, str]] = []
    coll_of_wait: dict[str, str] = {}
    direct: dict[str, list[str]] = {}  # non-fake producers of each node
    for s in snodes:
        v = s.get_name()
        for dep in s.unmet_dependencies:
            u = producer_of(dep.name)
            if u is None or u == v:
                continue
            is_fake = isinstance(dep, WeakDep) and dep.is_fake
            (fake if is_fake else edges).append((u, v))
            if not is_fake:
                direct.setdefault(v, []).append(u)

    def collective_behind(u: str) -> str | None:
        """u itself, or the collective whose output u unpacks (a coalesced all_gather's MultiOutput)."""
        for _ in range(4):
            if comms.contains_collective(by_name[u]):
                return u
            if not _is_multi_output(by_name[u]) or not direct.get(u):
                return None
            u = direct[u][0]
        return None

    for s in snodes:  # a coalesced collective has one wait per tensor (docs/decisions.md 15)
        if comms.contains_wait(s):
            v = s.get_name()
            for u in direct.get(v, []):
                # a second wait_tensor on a waited result (tensor parallelism's all_reduce): another wait of
                # the same collective, as Inductor's passes see it (decisions.md 24)
                c = collective_behind(u) or coll_of_wait.get(u)
                if c is not None:
                    coll_of_wait.setdefault(v, c)
                    break
    # ordering successors include those Inductor transfers from a mutated buffer to the real one
    implied: list[tuple[str, str]] = []
    for s in snodes:
        for b in s.get_outputs():
            for succ in b.mpi_buffer.succ_nodes_for_ordering:
                v = succ.get_name()
                if v in in_graph and v != s.get_name() and succ not in b.mpi_buffer.succ_nodes:
                    implied.append((s.get_name(), v))
    nodes = [replace(nd, collective=coll_of_wait.get(nd.name)) if nd.kind is NodeKind.WAIT
             else nd if _is_multi_output(by_name[nd.name]) and not raw else replace(nd, duration=price(nd)) for nd in nodes]
    if raw:  # every node, waits included, carries torch's value: the ports decide on exactly what torch sees
        nodes = [replace(nd, estimate=raw[nd.name]) for nd in nodes]

    buffers: list[Buffer] = []
    for s in snodes:
        for b in s.get_outputs():
            mpi = b.mpi_buffer
            cons = tuple(x.get_name() for x in mpi.succ_nodes if x.get_name() in in_graph)
            if comms.contains_collective(s) and int(mpi.size_free) == 0:
                # a coalesced all_gather's MultiOutputs only view this parent (which frees nothing): an
                # ordering edge, not a read that must follow the waits (MODEL.md's reader rule would loop)
                views = tuple(c for c in cons if _is_multi_output(by_name[c]))
                cons = tuple(c for c in cons if c not in views)
                edges += [(s.get_name(), c) for c in views]
            buffers.append(Buffer(b.get_name(), s.get_name(), cons, int(mpi.size_alloc), int(mpi.size_free),
                                  output=b.get_name() in outputs))
    freeable = get_freeable_input_buf(list(snodes), OrderedSet(V.graph.graph_inputs.keys()))
    for bname, fb in freeable.items():
        cons = tuple(x.get_name() for x in fb.mpi_buffer.succ_nodes if x.get_name() in in_graph)
        # with held_gradients, a backward graph's incoming gradients are held by autograd until the graph
        # returns, whatever the code frees: from the start, never released, as the FX importer has them (23, 93)
        held = bname in outputs or (held_gradients and bname.startswith("tangents"))
        buffers.append(Buffer(bname, None, cons, int(fb.mpi_buffer.size_free), int(fb.mpi_buffer.size_free),
                              output=held, freeable_input=True))
    for bname, inp in V.graph.graph_inputs.items() if held_gradients else ():  # gradients Inductor leaves out
        size = _held_input_bytes(bname, inp) if bname not in freeable else 0
        if size:
            readers = tuple(s.get_name() for s in snodes if bname in {d.name for d in s.read_writes.reads})
            buffers.append(Buffer(bname, None, readers, size, size, output=True, freeable_input=True))
    data_edges = sorted(set(edges))  # (includes the view edges added with the buffers)
    prefusion = _prefusion(snodes, sched)
    fake_edges = sorted(set(fake) - set(data_edges))
    implied_edges = sorted(set(implied) - set(data_edges) - set(fake_edges))
    return Graph(nodes, buffers, data_edges, (), name, {"source": "inductor"}, fake_edges=fake_edges,
                 implied_edges=implied_edges, prefusion=prefusion)


def _held_input_bytes(name: str, inp: Any) -> int:
    """The bytes of a backward graph's incoming gradient (`tangents_*`), which autograd holds until the graph
    returns (decision 23) and Inductor leaves out of its freeable inputs: what the allocator holds for it on the
    CPU (2026-11-30: 524,288 B at a plan's peak that the reading after fusion did not count, decision 93). 0 for
    any other input, or one whose size is not known."""
    if not name.startswith("tangents"):
        return 0
    try:
        from torch._inductor.virtualized import V

        sv = V.graph.sizevars
        hint = getattr(sv, "size_hint", None) or sv.optimization_hint  # torch 2.11 / 2.13
        layout = inp.get_layout()
        sizes = [int(hint(x, fallback=0)) for x in layout.size]
        strides = [int(hint(x, fallback=0)) for x in layout.stride]
        if not sizes or min(sizes) <= 0:
            return 0
        return (1 + sum((n - 1) * st for n, st in zip(sizes, strides))) * layout.dtype.itemsize
    except Exception:  # noqa: BLE001 - a symbolic input: not counted, as before
        return 0


def _prefusion(snodes: Sequence[Any], sched: Any) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """Each pre-fusion member, its fused node and the members it depends on (what torch's `ancestors` are
    built from), in the scheduler's order; () when torch's ancestors cannot be reproduced this way."""
    members: list[tuple[str, str, tuple[str, ...]]] = []
    seen: set[str] = set()
    for s in snodes:
        for m in s.get_nodes():
            preds = []
            for dep in m.unmet_dependencies:
                buf = sched.name_to_buf.get(dep.name)
                op = buf.defining_op_name() if buf is not None else None
                if op in seen and op not in preds:
                    preds.append(op)
            members.append((m.get_name(), s.get_name(), tuple(preds)))
            seen.add(m.get_name())
    # the closure of these edges must be torch's own ancestor sets; if a torch version builds them otherwise,
    # the ports fall back to the fused graph's closure rather than use a relation that is not torch's
    # (checked one step at a time against torch's sets, as torch built them: no second copy of the closure)
    by_name = {m.get_name(): m for s in snodes for m in s.get_nodes()}

    def theirs(name: str) -> set[str] | None:
        a = getattr(by_name[name], "ancestors", None)
        return None if a is None else {x for x in a if x in by_name}

    for name, _, preds in members:
        mine = theirs(name)
        if mine is None:
            return ()
        union = set(preds)
        for p in preds:
            union |= theirs(p) or set()
        if union != mine:
            return ()
    return tuple(members)
