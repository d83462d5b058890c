"""Plans: which collectives merge into buckets, and the order of the graph that bucketing gives.

A plan is judged on its bucketed graph (`materialize`, MODEL.md "Buckets"),
so the simulator, the validator and the bounds stay functions of one fixed
graph; deciding buckets (a bucketer, the solver) is kept apart from applying
them (here), as torch's `fx_passes/bucketing.py` keeps them apart.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from overlapsat.canonical import canonical_order
from overlapsat.errors import GraphError
from overlapsat.graph import Buffer, Graph, Node, NodeKind, _find_cycle, derived

BUCKET_OPS = ("all_gather", "reduce_scatter", "all_reduce")  # what torch's bucketing merges (merge_*_bucket)
Pricing = Callable[[Node], float]  # a cost model's `duration`: prices the merged collective and its copies
BUCKET_LAYOUTS = ("copy", "coalesced")  # how a bucket is issued (MODEL.md "Buckets", decision 55)


@dataclass(frozen=True)
class Bucket:
    """Collectives merged into one, by name, in their group's input order."""

    members: tuple[str, ...]

    # kept once read (a bucketed graph's build reads them for every edge that touches a member)
    @cached_property
    def name(self) -> str:
        return "bucket(" + "+".join(self.members) + ")"

    @cached_property
    def nodes(self) -> tuple[str, str, str, str]:
        """The four nodes it becomes: copy-in, the merged collective, its wait, copy-out."""
        return (f"{self.name}.copy_in", self.name, f"{self.name}.wait", f"{self.name}.copy_out")


@dataclass(frozen=True)
class Plan:
    """Buckets and an order (names of the bucketed graph's nodes), for the graph of `fingerprint`;
    `transports`: the bucketed graph's collectives that move their data by copy engine (MODEL.md "Transport"),
    the rest by NCCL; `layout`: how every bucket is issued, "copy" (one buffer) or "coalesced" (one group call,
    no copies; decision 55)."""

    order: tuple[str, ...]
    buckets: tuple[Bucket, ...] = ()
    fingerprint: str = ""
    transports: tuple[str, ...] = ()
    layout: str = "copy"


def check_layout(layout: str, what: str = "bucket layout") -> str:
    """`layout` when it is one of `BUCKET_LAYOUTS`; else GraphError naming `what` and the layouts there are."""
    if layout not in BUCKET_LAYOUTS:
        raise GraphError(f"{what} must be one of {', '.join(BUCKET_LAYOUTS)}; got {layout!r}")
    return layout


class LaidOut:
    """A pricing that also says the bucket layout (`layout_of`): the layout travels with the prices through the
    search, as the transport's pricing does, so every bucketed graph a search builds is the plan's own."""

    def __init__(self, price: Pricing, layout: str) -> None:
        self.price, self.layout = price, check_layout(layout)

    def __call__(self, nd: Node) -> float:
        return self.price(nd)

    def __getattr__(self, name: str):  # the wrapped pricing's own attributes (a transport's `base`, `floor`)
        if name in ("price", "layout"):
            raise AttributeError(name)
        return getattr(self.price, name)


def laid_out(price: Pricing, layout: str) -> Pricing:
    """`price` with bucket layout `layout` ("copy": `price` itself)."""
    if layout == "copy" and layout_of(price) == "copy":
        return price
    return LaidOut(price.price if isinstance(price, LaidOut) else price, layout)


def layout_of(price: Pricing) -> str:
    """The bucket layout a pricing carries ("copy" unless made by `laid_out`)."""
    return price.layout if isinstance(price, LaidOut) else "copy"


def group_member_us(price: Pricing) -> float:
    """What a coalesced bucket's group call costs per member beyond the first, above one flat collective of the
    summed bytes (decision 56): the pricing's own `group_member_us`, else its cost model's hardware profile's,
    else 0."""
    inner = price.price if isinstance(price, LaidOut) else price
    own = getattr(inner, "group_member_us", None)
    if own is None:
        hw = getattr(getattr(inner, "__self__", None), "hw", None)  # a cost model's bound `duration`
        own = getattr(hw, "group_member_us", 0.0)
    if isinstance(own, bool) or not isinstance(own, (int, float)) or not 0.0 <= own < float("inf"):
        raise GraphError(f"group_member_us must be a finite number >= 0, got {own!r}")
    return float(own)


def bucket_key(nd: Node) -> tuple[str | None, str | None, int, str | None]:
    """torch's bucket key, as far as a graph records it: operation, process group, group size, and the node's
    `bucket_key` (dtype, reduce op) (MODEL.md)."""
    return (nd.op, nd.group, nd.group_size, nd.bucket_key)


def member_problems(graph: Graph, c: int) -> list[str]:
    """Why collective `c` may not be in any bucket (MODEL.md rule 3); [] when it may."""
    out = []
    op = graph.nodes[c].op
    if op not in BUCKET_OPS:
        out.append(f"is {op!r}; torch merges only {', '.join(BUCKET_OPS)}")
    if len(graph.waits_of[c]) != 1:
        out.append(f"has {len(graph.waits_of[c])} waits (a bucket member has one)")
    if graph.atomic_of[c] >= 0 or any(graph.atomic_of[w] >= 0 for w in graph.waits_of[c]):
        out.append("or its wait is in an atomic group")
    return out


def bucketable_by_key(graph: Graph) -> dict[tuple, list[int]]:
    """The collectives that may be bucket members, by torch's key, in input order; only keys with two or more
    (a bucket needs a partner)."""
    by_key: dict[tuple, list[int]] = {}
    for c in graph.coll_seq:
        if not member_problems(graph, c):
            by_key.setdefault(bucket_key(graph.nodes[c]), []).append(c)
    return {k: cs for k, cs in by_key.items() if len(cs) >= 2}


def transport_problems(graph: Graph, copy_engine: Sequence[str]) -> list[str]:
    """Every way `copy_engine` (collectives of `graph`, a bucketed graph, moved by copy engine) breaks MODEL.md's
    transport rules; [] means legal: each names one all_gather, once, and all share one process group."""
    problems: list[str] = []
    groups: dict[str, str] = {}
    for nm in dict.fromkeys(copy_engine):
        v = graph.index.get(nm)
        nd = graph.nodes[v] if v is not None else None
        if nd is None or nd.kind is not NodeKind.COLLECTIVE:
            problems.append(f"{nm!r} is no collective of the graph")
        elif nd.op != "all_gather":
            problems.append(f"{nm!r} is {nd.op!r}; the copy engine moves only all_gathers")
        else:
            groups.setdefault(str(nd.group), nm)
    if len(copy_engine) != len(set(copy_engine)):
        problems.append("a collective is named twice")
    if len(groups) > 1:
        problems.append("copy-engine collectives of more than one process group ("
                        + ", ".join(f"{g!r} ({nm!r})" for g, nm in groups.items())
                        + "): they share one stream per rank, so their groups' sequences would interleave")
    return problems


def bucket_problems(graph: Graph, buckets: Sequence[Bucket], crossing: bool = True) -> list[str]:
    """Every way `buckets` breaks MODEL.md's bucket rules on `graph`; [] means legal. `crossing=False` leaves out
    the buckets that depend on each other both ways (`crossing_buckets`), for a caller whose build finds them."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    for b in buckets:
        if len(b.members) < 2:
            problems.append(f"{b.name}: a bucket merges two or more collectives")
        ids = []
        for m in b.members:
            i = graph.index.get(m)
            if i is None or graph.nodes[i].kind is not NodeKind.COLLECTIVE:
                problems.append(f"{b.name}: {m!r} is not a collective of the graph")
                continue
            if m in seen:
                problems.append(f"{b.name}: {m!r} is already in {seen[m]}")
            seen[m] = b.name
            problems += [f"{b.name}: {m!r} {why}" for why in member_problems(graph, i)]
            ids.append(i)
        keys = {bucket_key(graph.nodes[i]) for i in ids}
        if len(keys) > 1:
            problems.append(f"{b.name}: members differ in (op, group, group size, bucket key): "
                            f"{sorted(map(str, keys))}")
        pos = sorted(ids, key=lambda i: bisect_left(graph.group_colls[graph.group_id[i]], i))  # ids ascend there
        if ids and pos != ids:
            problems.append(f"{b.name}: members are not listed in their group's input order")
        dep = _dependent_pair(graph, ids)
        if dep is not None:
            problems.append(f"{b.name}: {graph.names[dep[1]]!r} depends on {graph.names[dep[0]]!r}")
    if crossing and not problems and len(buckets) >= 2:
        problems += _crossing_problems(graph, buckets)
    return problems


def _crossing_problems(graph: Graph, buckets: Sequence[Bucket]) -> list[str]:
    cyc = crossing_buckets(graph, buckets)
    return ["buckets depend on each other both ways (merging them all makes a cycle): " + ", ".join(cyc)] if cyc \
        else []


def crossing_buckets(graph: Graph, buckets: Sequence[Bucket]) -> list[str]:
    """The buckets on a dependency cycle of the bucketed graph, or [] (each bucket alone is acyclic).

    Each bucket's members contract to one node and their waits to another, after it: the bucketed graph's
    dependencies between nodes of different buckets are those of the contracted graph (MODEL.md "Buckets"),
    so a cycle there (the graph's own cycle finder, linear) is what `materialize` would refuse.
    """
    n = len(graph.nodes)
    rep = list(range(n))  # node -> its contracted node
    for b in buckets:
        ids = [graph.index[m] for m in b.members]
        waits = [graph.waits_of[i][0] for i in ids]
        for i in ids:
            rep[i] = ids[0]
        for w in waits:
            rep[w] = waits[0]
    keep = sorted(set(rep))
    at = {v: k for k, v in enumerate(keep)}
    preds: list[set[int]] = [set() for _ in keep]
    for v in range(n):
        for u in graph.preds[v]:
            a, b = at[rep[u]], at[rep[v]]
            if a != b:
                preds[b].add(a)
    succs: list[list[int]] = [[] for _ in keep]
    for b, ps in enumerate(preds):
        for a in ps:
            succs[a].append(b)
    on = {keep[k] for k in _find_cycle([sorted(p) for p in preds], succs)}
    return [b.name for b in buckets if graph.index[b.members[0]] in on
            or graph.waits_of[graph.index[b.members[0]]][0] in on]


def _dependent_pair(graph: Graph, ids: list[int]) -> tuple[int, int] | None:
    """Two members one of which reaches the other through any edge, or None.

    Node ids are a topological order, so a path between two members stays between their ids: one sweep over
    that range, marking what some member reaches, finds any such pair.
    """
    if len(ids) < 2:
        return None
    members = set(ids)
    hi = max(ids)
    src: dict[int, int] = {}  # node -> a member that reaches it
    for v in range(min(ids), hi + 1):
        s = src.get(v)
        if v in members:
            if s is not None:
                return (s, v)
            s = v
        if s is None:
            continue
        for w in graph.succs[v]:
            if w <= hi and w not in src:
                src[w] = s
    return None


def materialize(graph: Graph, buckets: Sequence[Bucket], price: Pricing) -> Graph:
    """The bucketed graph of MODEL.md "Buckets" (the graph itself when there are none). Raises GraphError
    naming every illegal bucket."""
    if not buckets:
        return graph
    problems = bucket_problems(graph, buckets, crossing=False)
    if problems:
        raise GraphError.from_problems(f"illegal buckets for graph {graph.name!r}", problems)
    try:  # buckets that depend on each other both ways leave `_placed` no order: named only then (a third of a build)
        new_nodes, new_bufs, edges, fake, implied, order = _bucketed(graph, buckets, price)
    except GraphError:
        problems = _crossing_problems(graph, buckets)
        if problems:
            raise GraphError.from_problems(f"illegal buckets for graph {graph.name!r}", problems) from None
        raise
    with derived():  # its inputs came from a checked graph and checked buckets
        return Graph(tuple(new_nodes[nm] for nm in order), tuple(new_bufs), edges, graph.atomic_groups,
                     graph.name, {**graph.meta, "buckets": [list(b.members) for b in buckets]}, fake, implied,
                     (), graph.chain_is_decided)


def collective_sequence(graph: Graph, buckets: Sequence[Bucket], price: Pricing) -> list[Node]:
    """The collectives of `materialize(graph, buckets, price)` in its node order (each group's collective
    sequence, MODEL.md "Buckets"), without building that graph: a search confirms a plan's collective order
    with it. The buckets' legality is the caller's to vouch for (a cycle among them raises GraphError)."""
    new_nodes, _, _, _, _, order = _bucketed(graph, buckets, price)
    return [nd for nm in order if (nd := new_nodes[nm]).kind is NodeKind.COLLECTIVE]


_Edges = tuple[tuple[str, str], ...]
_Parts = tuple[dict[str, Node], list[Buffer], _Edges, _Edges, _Edges, list[str]]


def _bucketed(graph: Graph, buckets: Sequence[Bucket], price: Pricing) -> _Parts:
    """The bucketed graph's nodes by name, buffers, edges, fake edges and implied edges (MODEL.md "Buckets"),
    and its node order (`_placed`)."""
    of: dict[str, Bucket] = {}  # member or member's wait -> its bucket
    for b in buckets:
        for m in b.members:
            of[m] = b
            of[graph.names[graph.waits_of[graph.index[m]][0]]] = b

    def src(u: str) -> str:  # where an edge out of u now starts
        b = of.get(u)
        return u if b is None else b.nodes[1] if u in b.members else b.nodes[3]

    def dst(v: str) -> str:  # where an edge into v now ends
        b = of.get(v)
        return v if b is None else b.nodes[0] if v in b.members else b.nodes[2]

    def mapped(edges: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        out = {}
        for u, v in edges:
            bu = of.get(u)
            if bu is not None and bu is of.get(v):
                continue  # inside one bucket
            e = (src(u), dst(v))
            out[e] = None
        return tuple(out)

    coalesced = layout_of(price) == "coalesced"
    new_nodes: dict[str, Node] = {nd.name: nd for nd in graph.nodes if nd.name not in of}
    new_bufs: list[Buffer] = []
    for b in buckets:
        four = bucket_nodes(graph, b, price)
        for nd in four:
            new_nodes[nd.name] = nd
        if coalesced:  # no bucket buffers: the group call reads and writes the members' own
            continue
        c_in, coll, wait, c_out = b.nodes
        in_bytes, out_bytes = int(four[0].bytes_accessed) // 2, int(four[3].bytes_accessed) // 2
        if four[1].op == "all_gather":  # torch's merge allocates the gathered buffer at the copy-in and copies the
            # inputs into its own rank's slice of it (decision 67): one buffer, from the copy-in to the copy-out
            size = max(in_bytes, out_bytes)
            new_bufs.append(Buffer(f"{coll}.out", c_in, (coll, wait, c_out), size, size))
            # and concatenates the inputs first: a transient the copy-in frees at once (Inductor fuses it away,
            # graph_trainer's FX execution does not; counted, it keeps the budget on the safe side)
            new_bufs.append(Buffer(f"{coll}.cat", c_in, (), in_bytes, in_bytes))
        else:
            new_bufs.append(Buffer(f"{coll}.in", c_in, (coll,), in_bytes, in_bytes))
            new_bufs.append(Buffer(f"{coll}.out", coll, (wait, c_out), out_bytes, out_bytes))

    def reader(c: str) -> str:  # who reads a buffer c read: coalesced, a member's reads are the group call's
        b = of.get(c)
        return b.nodes[1] if coalesced and b is not None and c in b.members else dst(c)

    for buf in graph.buffers:
        # copy layout: a member's output is written by the copy-out and no longer read by the member's wait; a
        # member's input is read by the copy-in. Coalesced: the group call writes the outputs, which the wait
        # reads, and reads the inputs
        p = buf.producer
        written_by_member = p is not None and p in of and p in of[p].members
        cons = tuple(dict.fromkeys(reader(c) for c in buf.consumers
                                   if coalesced or not (written_by_member and of.get(c) is of[p]
                                                        and c not in of[p].members)))
        prod = None if p is None else of[p].nodes[1 if coalesced and written_by_member else 3] if p in of else p
        new_bufs.append(Buffer(buf.name, prod, cons, buf.size_alloc, buf.size_free, buf.output, buf.freeable_input))
    # the copy-out follows the wait in every layout: where the gathered buffer comes from the copy-in (decision
    # 67) or the group call writes the members' own (coalesced), no buffer of the collective's says so
    edges = mapped(graph.edges) + tuple((b.nodes[0], b.nodes[1]) for b in buckets) + tuple(
        (b.nodes[2], b.nodes[3]) for b in buckets)
    fake, implied = mapped(graph.fake_edges), mapped(graph.implied_edges)
    return new_nodes, new_bufs, edges, fake, implied, _placed(graph, buckets, new_nodes, new_bufs,
                                                              edges + fake + implied)


def constant_input_bytes(nd: Node) -> int:
    """What a collective copies in when it reads no buffer: its input is a constant graph input (a parameter's
    shard, left out of memory), which its payload still sizes: `nbytes` is the whole tensor, so an all_gather's
    input is one rank's share of it (decision 54)."""
    return nd.nbytes // max(1, nd.group_size) if nd.op == "all_gather" else nd.nbytes


def bucket_nodes(graph: Graph, b: Bucket, price: Pricing) -> tuple[Node, Node, Node, Node]:
    """The four nodes bucket `b` becomes (MODEL.md "Buckets"), priced: copy-in, merged collective, wait,
    copy-out. A function of the bucket alone, so a search can price a bucket without building its graph."""
    ms = [graph.node(m) for m in b.members]
    waits = [graph.nodes[graph.waits_of[graph.index[m]][0]] for m in b.members]
    ins = dict.fromkeys(j for m in b.members for j in graph.consumes[graph.index[m]])
    in_bytes = sum(graph.buffers[j].size_alloc for j in ins) + sum(
        constant_input_bytes(m) for m in ms if not graph.consumes[graph.index[m.name]])
    out_bytes = sum(graph.buffers[j].size_alloc for m in b.members for j in graph.produces[graph.index[m]])
    c_in, coll, wait, c_out = b.nodes
    merged = Node(coll, NodeKind.COLLECTIVE, 0.0, group=ms[0].group, op=ms[0].op, nbytes=sum(m.nbytes for m in ms),
                  group_size=ms[0].group_size, launch=max(m.launch for m in ms), bucket_key=ms[0].bucket_key)
    the_wait = Node(wait, NodeKind.WAIT, max(w.duration for w in waits), collective=coll)
    if layout_of(price) == "coalesced":  # one group call on the members' own buffers: nothing is copied, and
        # the two copy nodes stay as empty markers so that every layout has the same four places (decision 55);
        # the call costs a measured time per member beyond the first above a flat collective (decision 56)
        call = _priced(merged, price)
        call = replace(call, duration=call.duration + group_member_us(price) * (len(ms) - 1))
        return (Node(c_in, NodeKind.COMPUTE, 0.0, op="bucket_coalesced_in"), call, the_wait,
                Node(c_out, NodeKind.COMPUTE, 0.0, op="bucket_coalesced_out"))
    copy_in = Node(c_in, NodeKind.COMPUTE, 0.0, op="bucket_copy_in", bytes_accessed=2.0 * in_bytes)
    copy_out = Node(c_out, NodeKind.COMPUTE, 0.0, op="bucket_copy_out", bytes_accessed=2.0 * out_bytes)
    return (_priced(copy_in, price), _priced(merged, price), the_wait, _priced(copy_out, price))


KEPT_APART = ("the budget keeps some collectives out of one bucket: a bucket of both would hold an output or an "
              "input through a step with no room for it (decision 106)")
RATE_STEPS = 128  # the sizes at which `any_bucketing_relaxation` reads the price: each 1/128 above the last


def any_bucketing_relaxation(graph: Graph, price: Pricing, bucket_cap: int | None = None,
                             apart: Callable[[list[int]], np.ndarray] | None = None) -> tuple[Graph, list[str]]:
    """A graph no schedule of which is longer than the best plan's, over every legal bucketing within
    `bucket_cap` (MODEL.md "Bounds over every bucketing"), and the notes on how it was built.

    Each collective that could share a bucket keeps its edges and buffers but costs only its bytes at the
    cheapest per-byte price any bucket it could be in could reach (a bucket of S bytes costs `price(S)` >=
    S * rate), with no launch and no wait time; copies cost nothing. The buckets it could be in hold it and
    collectives of its key that neither reach it nor are reached from it (a bucket's members are independent),
    within the cap: between it with its smallest such partner and it with all of them. One with no partner is
    never merged and keeps its price, launch and wait. The rate is read from `price` on a grid of sizes, assuming
    the price does not fall as the bytes grow: at a grid point where it falls the key's collectives cost 0.
    `apart(cs)`, where given, names for a key's collectives (node ids) the pairs no plan within the budget buckets
    together (decision 106, a boolean matrix over `cs`): each leaves the other out of its partners, and where that
    shuts a pair that would otherwise be partners, the notes say `KEPT_APART`.
    """
    nodes = list(graph.nodes)
    notes: list[str] = []
    for cs in bucketable_by_key(graph).values():
        like = graph.nodes[cs[0]]
        ranges, shut = _bucket_ranges(graph, cs, bucket_cap, apart)
        if shut and KEPT_APART not in notes:
            notes.append(KEPT_APART)
        if not any(ranges):
            continue
        base, floor = getattr(price, "base", None), getattr(price, "floor", None)
        if base is not None and floor is not None:  # a transport's pricing: NCCL's rate times its least share
            rate_of, scale = _rates(like, [r for r in ranges if r], base, notes), float(floor(like))
        else:
            rate_of, scale = _rates(like, [r for r in ranges if r], price, notes), 1.0
        for c, r in zip(cs, ranges):
            if r is None:  # never merged: its own price, launch and wait
                continue
            nd = nodes[c]
            nodes[c] = replace(nd, duration=min(nd.duration, nd.nbytes * rate_of(*r) * scale), launch=0.0)
            w = graph.waits_of[c][0]
            nodes[w] = replace(nodes[w], duration=0.0)
    with derived():
        return Graph(tuple(nodes), graph.buffers, graph.edges, graph.atomic_groups, graph.name, graph.meta,
                     graph.fake_edges, graph.implied_edges, (), graph.chain_is_decided), notes


def _bucket_ranges(graph: Graph, cs: list[int], cap: int | None,
                   apart: Callable[[list[int]], np.ndarray] | None = None) -> tuple[list[tuple[int, int] | None], bool]:
    """Per collective of `cs` (one key): the least and the most bytes of a legal bucket within `cap` that holds
    it, or None where it has no partner (every other reaches it or is reached from it, is kept `apart` from it,
    or the cap leaves none). Reachability through any edge, as `bucket_problems` checks it, in one sweep of the
    ids between them. And whether `apart` shut a pair that would otherwise be partners (independent, within the
    cap together)."""
    k = len(cs)
    at = {c: i for i, c in enumerate(cs)}
    lo_id = min(cs)
    reach: dict[int, int] = {}  # node -> the members of cs that reach it (itself included)
    dep = [0] * k  # member -> the members it depends on or that depend on it
    for v in range(lo_id, max(cs) + 1):
        r = 0
        for p in graph.preds[v]:
            r |= reach.get(p, 0)
        i = at.get(v)
        if i is not None:
            dep[i] |= r
            for j in _bits(r):  # the other direction
                dep[j] |= 1 << i
            r |= 1 << i
        if r:
            reach[v] = r
    sizes = [int(graph.nodes[c].nbytes) for c in cs]
    total = sum(sizes)
    # each row's dependents as a bool array: their sizes summed in int64 (at most 2^50 B each, a few thousand of
    # them: exact), the smallest partner found at once (thousands of members with thousands of pairs at 36k nodes)
    nbytes = (k + 7) // 8
    sz = np.asarray(sizes, dtype=np.int64)
    rows = np.unpackbits(np.frombuffer(b"".join(d.to_bytes(nbytes, "little") for d in dep), dtype=np.uint8)
                         .reshape(k, nbytes), axis=1, bitorder="little")[:, :k].astype(bool)
    shut = False
    if apart is not None:  # a pair the budget keeps apart is as good as dependent here
        kept = apart(cs)
        i, j = np.nonzero(kept & ~rows)  # pairs only the budget shuts: partners unless the cap parts them too
        shut = bool(len(i)) and (cap is None or bool((sz[i] + sz[j] <= cap).any()))
        rows |= kept
    np.fill_diagonal(rows, False)  # a member is not its own dependent
    out: list[tuple[int, int] | None] = []
    for i in range(k):
        free = ~rows[i]
        free[i] = False
        if not free.any():
            out.append(None)
            continue
        most = total - int(sz[rows[i]].sum())
        least = sizes[i] + int(sz[free].min())
        if cap is not None:
            if least > cap:
                out.append(None)
                continue
            most = min(most, cap)
        out.append((least, most))
    return out, shut


def _bits(mask: int) -> Iterable[int]:
    """The positions of the bits set in `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _rates(like: Node, ranges: list[tuple[int, int]], price: Pricing,
           notes: list[str]) -> Callable[[int, int], float]:
    """A per-byte price no bucket of `like`'s key of between lo and hi bytes can beat, as a function of (lo, hi):
    integer sizes S_0 < S_1 < ... (each 1/128 above the one before, rounded up) cover every range; with the price
    nondecreasing, price(S) / S >= price(S_j) / min(S_{j+1}, b) for S in [S_j, S_{j+1}] up to b, so the least
    of those over the cells a range meets. The rate is lowered by 1e-12, below the rounding of a sum."""
    lo = max(1, min(a for a, _ in ranges))
    hi = max(lo, max(b for _, b in ranges))
    grid: list[int] = []
    prices: list[float] = []
    s, last = lo, -1.0
    while True:
        t = float(price(replace(like, nbytes=s)))
        if not (t >= last):  # falls (or is nan): no rate can be read
            notes.append(f"the price of {like.op} on group {like.group!r} falls as its bytes grow "
                         f"(at {s} B): its collectives count as free")
            return lambda a, b: 0.0
        last = t
        grid.append(s)
        prices.append(t)
        if s >= hi:
            break
        s = min(hi, s + -(-s // RATE_STEPS))
    # price(S_j) / S_{j+1}: what a bucket in [S_j, S_{j+1}] costs per byte at the least
    cells = np.asarray(prices[:-1]) / np.asarray(grid[1:], dtype=np.float64)

    def rate(a: int, b: int) -> float:
        """The least of the cells [S_j, S_{j+1}] that [a, b] meets, the last one read up to b only."""
        j0 = max(0, bisect_right(grid, max(1, a)) - 1)
        j1 = max(j0, bisect_right(grid, b) - 1)
        least = prices[j1] / b
        if j1 > j0:
            least = min(least, float(cells[j0:j1].min()))
        return least * (1.0 - 1e-12)

    return rate


def _priced(nd: Node, price: Pricing) -> Node:
    d = float(price(nd))
    if not (d >= 0.0 and d < float("inf")):
        raise GraphError(f"pricing gave {nd.name!r} the duration {d!r}: expected a finite number >= 0")
    return replace(nd, duration=d)


def placing(graph: Graph) -> list[int]:
    """Each node's position in the graph's canonical order under "global" (canonical.py: a topological order
    that keeps the collective sequence, smallest name first among the ready): where the bucketed graph places
    what it keeps. A function of the graph, not of how its file lists the nodes, so neither is a bucket's place in
    the collective sequences (MODEL.md "Buckets")."""
    got = graph._cache.get("placing")
    if got is None:
        got = [0] * len(graph.nodes)
        for k, v in enumerate(canonical_order(graph, "global")):
            got[v] = k
        graph._cache["placing"] = got
    return got


def _placed(graph: Graph, buckets: Sequence[Bucket], nodes: dict[str, Node], bufs: list[Buffer],
            edges: tuple[tuple[str, str], ...]) -> list[str]:
    """A deterministic topological order: each node at its place in the graph's canonical order (`placing`), a
    bucket's nodes at their first member's (and its first member wait's), each as early as its inputs allow after
    that. The same for every file layout of the graph (decision 61). Worked on local ids (every bucketed graph a
    plan search builds passes here: 50 ms at 8k nodes on names)."""
    pos = placing(graph)
    names = list(nodes)
    at = {nm: k for k, nm in enumerate(names)}
    gi = graph.index
    key: list[tuple[float, int, str]] = [(pos[gi[nm]], 0, nm) if nm in gi else (0, 0, nm) for nm in names]
    for b in buckets:
        first = min(pos[gi[m]] for m in b.members)
        first_wait = min(pos[graph.waits_of[gi[m]][0]] for m in b.members)
        c_in, coll, wait, c_out = b.nodes
        key[at[c_in]], key[at[coll]] = (first, 0, c_in), (first, 1, coll)
        key[at[wait]], key[at[c_out]] = (first_wait, 0, wait), (first_wait, 1, c_out)
    preds: list[set[int]] = [set() for _ in names]
    for u, v in edges:
        preds[at[v]].add(at[u])
    for buf in bufs:
        if buf.producer is not None:
            pb = at[buf.producer]
            for c in buf.consumers:
                if c != buf.producer:
                    preds[at[c]].add(pb)
    waits: dict[str, list[int]] = {}
    for k, nd in enumerate(nodes.values()):
        if nd.kind is NodeKind.WAIT:
            preds[k].add(at[nd.collective])  # type: ignore[index]
            waits.setdefault(nd.collective, []).append(k)  # type: ignore[arg-type]
    # reading a collective's output means waiting for it, as the graph's own index has it (a bucket's copy-out
    # after its wait even when that wait is held back by a dependency of one of its members' waits)
    for buf in bufs:
        ws = waits.get(buf.producer or "")
        if ws:
            cons = {at[c] for c in buf.consumers}
            sink = [w for w in ws if w in cons] or ws
            for c in cons:
                if c not in ws:
                    preds[c].update(sink)
    # an atomic group is placed whole, at its first member's key: a bucket placed by its own key must never land
    # inside one (its members' input positions are contiguous, the bucketed graph's must be too)
    unit = list(range(len(names)))
    members: dict[int, list[int]] = {}
    for grp in graph.atomic_groups:
        ids = [at[nm] for nm in grp]
        for i in ids:
            unit[i] = ids[0]
        members[ids[0]] = ids
    usuccs: list[set[int]] = [set() for _ in names]
    indeg = [0] * len(names)
    for v, ps in enumerate(preds):
        b = unit[v]
        for p in ps:
            a = unit[p]
            if a != b and b not in usuccs[a]:
                usuccs[a].add(b)
                indeg[b] += 1
    heap = [(key[u], u) for u in range(len(names)) if unit[u] == u and indeg[u] == 0]
    heapq.heapify(heap)
    out: list[str] = []
    while heap:
        u = heapq.heappop(heap)[1]
        out.extend(names[i] for i in members.get(u, (u,)))
        for s in usuccs[u]:  # the heap's keys are unique: the order of pushes does not matter
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (key[s], s))
    if len(out) != len(nodes):  # a cycle through the buckets, or through a bucket and an atomic group
        raise GraphError(f"the buckets of graph {graph.name!r} make a dependency cycle, or leave no place outside an "
                         "atomic group")
    return out


__all__ = ["BUCKET_LAYOUTS", "Bucket", "LaidOut", "Plan", "Pricing", "any_bucketing_relaxation", "bucket_key",
           "bucket_nodes", "bucketable_by_key", "bucket_problems", "check_layout", "collective_sequence", "crossing_buckets",
           "group_member_us",
           "laid_out", "layout_of", "materialize", "member_problems", "transport_problems"]
