"""A bound that reads the memory budget: a transfer can overlap a kernel only where memory leaves it room
(MODEL.md "Lower bounds", the overlap capacity under a budget; decision 71).

In any valid order within budget B, a collective c's transfer overlaps a kernel v only if c is issued before v
and every wait of c comes after v, so at v's step c's output is live beside everything v's step must hold. Each
group's transfers are serial, and the compute stream is serial, so the time both run is at most the maximum flow
of a bipartite network: each collective supplies its duration, each kernel absorbs its own, along the pairs that
can overlap. The makespan is then at least the compute-stream work plus, for any group, its transfer time less
that flow. With no budget every pair that the dependencies allow is open and the bound is the work alone, so it
is computed only under a budget.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from overlapsat.graph import COLLECTIVE, COMPUTE, WAIT, Graph

TRACKED = 4096  # buffers whose liveness the per-kernel memory floor follows (the largest; the rest count 0)
MAX_ARCS = 2_000_000  # beyond this the kernels' classes are merged (a coarser network: a larger flow, still a bound)
MAX_BITS = 4_000_000_000  # nodes x (collectives + tracked buffers) past which the bound is left out (the work)
# what the bound costs a node, measured on this 2-core machine: 2.1e-5 s at 7,928 nodes, 5.7e-5 at 13,403 and 4.7e-5 at
# 36,401 (2026-12-02; its network grows faster than the graph): the search keeps it, and pays for it only where it is
# at most SHARE of its time limit
S_PER_NODE = 6e-5
SHARE = 0.25
SCALE = 1000.0  # durations in integer nanoseconds for the flow (capacities rounded up: the flow can only grow)


def overlap_capacity_bound(graph: Graph, budget: int, through: bool = True) -> float:
    """A lower bound on the makespan of every order of `graph` whose peak is at most `budget` bytes (level
    `free`, so every level: Inductor's chain edges are left out). Not smaller than the compute-stream work;
    equal to it where memory shuts no pair. `through=False` leaves out decision 106's check of the steps after
    the kernel (the bound before it, for comparison)."""
    graph = graph.relaxed("free")
    n = len(graph.nodes)
    work = sum(graph.work)
    colls = [v for v in range(n) if graph.kind[v] == COLLECTIVE]
    if not colls or n * (len(colls) + TRACKED) > MAX_BITS:
        return work
    floor = _memory_floor(graph)
    cid = {c: i for i, c in enumerate(colls)}
    held = [_held_bytes(graph, c) for c in colls]
    desc_c, after_wait, anc_c = _collective_sets(graph)
    by_size = sorted(range(len(colls)), key=held.__getitem__)
    prefix, acc = [0], 0
    for i in by_size:  # prefix[j]: the j smallest held sizes
        acc |= 1 << i
        prefix.append(acc)
    sizes = [held[i] for i in by_size]  # ascending: the held sizes at most `room` are a prefix
    everyone = (1 << len(colls)) - 1
    held_on = _held_on(graph, budget, floor, anc_c) if through else [0] * n
    other = sum(graph.work[v] for v in range(n) if graph.kind[v] != COMPUTE)  # launches, waits: any may overlap
    best = 0.0
    for cs in graph.group_colls:
        gmask = 0
        for c in cs:
            gmask |= 1 << cid[c]
        classes: dict[int, float] = {}
        for v in range(n):
            if graph.kind[v] != COMPUTE or graph.dur[v] <= 0.0:
                continue
            room = budget - floor[v]
            ok = prefix[bisect_right(sizes, room)]  # c's output fits beside what v's step must hold
            sig = everyone & ~desc_c[v] & ~after_wait[v] & (anc_c[v] | ok) & ~held_on[v] & gmask
            if sig:
                classes[sig] = classes.get(sig, 0.0) + graph.dur[v]
        supply = sum(graph.dur[c] for c in cs)
        flow = _max_flow([graph.dur[c] for c in cs], [cid[c] for c in cs], classes, other)
        best = max(best, supply - flow)
    return work + max(0.0, best)


def peak_floor(graph: Graph) -> tuple[int, str]:
    """A lower bound on the peak of every order of `graph` (level `free`, so every level), and the node whose
    step holds it: the largest memory floor. A budget below it is unreachable (proven), for every plan too
    (decision 65: a plan's order read on the unbucketed graph peaks no higher)."""
    graph = graph.relaxed("free")
    if not graph.nodes or len(graph.nodes) * TRACKED > MAX_BITS:
        return 0, ""
    floor = _memory_floor(graph)
    v = max(range(len(floor)), key=floor.__getitem__)
    return floor[v], graph.names[v]


@dataclass(frozen=True)
class Apart:
    """Pairs of collectives that share no bucket in any plan within a budget (`kept_apart`), by node id: a pair
    is apart where either one's bits name the other."""

    ordinal: dict[int, int]  # collective node id -> its bit in `shut`
    shut: dict[int, int]  # collective node id -> bits of collectives it cannot share a bucket with (or they with it)

    def pair(self, c: int, p: int) -> bool:
        """Whether collectives c and p (node ids) are kept apart by the budget."""
        return bool(self.shut.get(c, 0) >> self.ordinal[p] & 1 or self.shut.get(p, 0) >> self.ordinal[c] & 1)

    def __call__(self, cs: list[int]) -> np.ndarray:
        """For collectives `cs` (node ids), a symmetric boolean matrix over `cs`: [i, j] where cs[i] and cs[j] are
        kept apart. The pairs are read out of the bitsets at once (numpy), not one by one (millions of pairs at 36k
        nodes), in the form the relaxation reads them (`plan._bucket_ranges`)."""
        k, width = len(cs), len(self.ordinal)
        rows = np.zeros((k, k), dtype=bool)
        if not self.shut or k < 2:
            return rows
        nbytes = (width + 7) // 8
        at = np.asarray([self.ordinal[c] for c in cs])
        for i, c in enumerate(cs):
            bits = self.shut.get(c)
            if bits:
                row = np.unpackbits(np.frombuffer(bits.to_bytes(nbytes, "little"), dtype=np.uint8), bitorder="little")
                rows[i] = row[at]
        rows |= rows.T
        np.fill_diagonal(rows, False)
        return rows

    def __len__(self) -> int:
        """How many collectives lose a partner."""
        return len(self.shut)


def kept_apart(graph: Graph, budget: int) -> Apart:
    """The pairs of collectives no plan within `budget` bytes buckets together (MODEL.md "Bounds over every
    bucketing", decision 106). A plan within the budget reads as an order of the unbucketed graph within it, each
    bucket's members one after another (decision 65), so if c and p share a bucket:

    - p's largest output is live at every node v that must follow c and precede a reader of that output (or is
      one), and where v does not follow p, the memory floor at v leaves it out;
    - c's largest input (a buffer a node makes) is live at every node v that must precede p and follow the input's
      maker, and where neither v nor a node after it reads the input, the floor at v leaves it out.

    Either way the plan peaks at least at the floor at v plus those bytes; where that passes the budget for some
    v, c and p are apart."""
    graph = graph.relaxed("free")
    n = len(graph.nodes)
    colls = [v for v in range(n) if graph.kind[v] == COLLECTIVE]
    if not colls or n * (len(colls) + TRACKED) > MAX_BITS:
        return Apart({}, {})
    floor = _memory_floor(graph)
    desc, _, anc = _collective_sets(graph)
    out_size, later = _outputs_read_later(graph)
    in_size, made, read_later = _inputs_made_before(graph)
    # per node: (the collectives one side, the other side, the bytes each of the first would hold) -> the floor
    hottest: dict[tuple[int, int, int], int] = {}
    cid = {c: i for i, c in enumerate(colls)}
    for v in range(n):
        own = 1 << cid[v] if v in cid else 0  # a collective's own output is in its floor
        for key in ((later[v] & ~anc[v] & ~own, anc[v], 0), (made[v] & ~read_later[v], desc[v], 1)):
            if key[0] and key[1] and hottest.get(key, -1) < floor[v]:
                hottest[key] = floor[v]
    above = (_above(out_size), _above(in_size))
    shut_by: dict[int, int] = {}
    for (held, other, side), f in hottest.items():
        over = held & above[side](budget - f)  # the collectives whose bytes pass the room at v
        if over and over.bit_count() > other.bit_count():  # the pairs are the same read from either side
            over, other = other, over
        while over:
            low = over & -over
            i = low.bit_length() - 1
            shut_by[i] = shut_by.get(i, 0) | other
            over ^= low
    return Apart(cid, {colls[i]: bits for i, bits in shut_by.items()})


def _above(size: list[int]) -> Callable[[int], int]:
    """A function of a room: the bitset of the indices whose size passes it."""
    order = sorted(range(len(size)), key=size.__getitem__, reverse=True)
    neg = [-size[i] for i in order]  # ascending: the sizes above a room are a prefix
    prefix, acc = [0], 0
    for i in order:
        acc |= 1 << i
        prefix.append(acc)
    return lambda room: prefix[bisect_left(neg, -room)]


def _inputs_made_before(graph: Graph) -> tuple[list[int], list[int], list[int]]:
    """Per collective (in id order), the bytes of its largest input that a node makes (not a graph output); per
    node v, bitsets of the collectives whose such input a node before v made, and whose input v or a node after
    it reads."""
    n = len(graph.nodes)
    colls = [v for v in range(n) if graph.kind[v] == COLLECTIVE]
    size, makes, reads = [0] * len(colls), [0] * n, [0] * n
    for i, c in enumerate(colls):
        ins = [j for j in graph.consumes[c] if graph.b_prod[j] >= 0 and not graph.b_out[j]]
        if not ins:
            continue
        j = max(ins, key=graph.b_alloc.__getitem__)
        size[i] = graph.b_alloc[j]
        makes[graph.b_prod[j]] |= 1 << i
        for u in graph.b_cons[j]:
            reads[u] |= 1 << i
    return size, _made_before(graph, makes), _at_or_after(graph, reads)


def _held_on(graph: Graph, budget: int, floor: list[int], anc: list[int]) -> list[int]:
    """Per node v, a bitset of the collectives whose transfer cannot overlap v within `budget` (decision 106):
    one issued before v keeps its largest output live through every node u that v reaches (or v itself) and that
    reaches a reader of it; where c does not reach u, the floor at u leaves the output out, and the floor plus
    its bytes passes the budget."""
    size, later = _outputs_read_later(graph)
    above = _above(size)
    n = len(graph.nodes)
    out = [0] * n
    for v in range(n - 1, -1, -1):
        acc = later[v] & ~anc[v] & above(budget - floor[v])
        for s in graph.succs[v]:
            acc |= out[s]
        out[v] = acc
    return out


def _outputs_read_later(graph: Graph) -> tuple[list[int], list[int]]:
    """Per collective (in id order), the bytes of its largest output; per node, a bitset of the collectives whose
    largest output it or a node after it reads (a graph output: every node), so where the collective runs before
    it, that output is live at its step. Kept on the graph: the pairs kept apart and the overlap bound both read
    it, on the graph and on its relaxation (`share_tables`)."""
    if "outputs_read_later" not in graph._cache:
        graph._cache["outputs_read_later"] = _outputs_of(graph)
    return graph._cache["outputs_read_later"]


def _outputs_of(graph: Graph) -> tuple[list[int], list[int]]:
    n = len(graph.nodes)
    colls = [v for v in range(n) if graph.kind[v] == COLLECTIVE]
    size, reads, forever = [0] * len(colls), [0] * n, 0
    for i, c in enumerate(colls):
        outs = [j for j in graph.produces[c] if graph.b_prod[j] >= 0]
        if not outs:
            continue
        j = max(outs, key=graph.b_alloc.__getitem__)
        size[i] = graph.b_alloc[j]
        if graph.b_out[j]:  # a graph output is never freed
            forever |= 1 << i
        for u in graph.b_cons[j]:
            reads[u] |= 1 << i
    return size, _at_or_after(graph, reads, forever)


def share_tables(source: Graph, target: Graph) -> None:
    """Hand `target` the memory floor, collective sets and outputs' readers `source` has computed: for a graph with
    the same nodes, buffers and edges (a relaxation that changes only prices), they are the same tables."""
    src, dst = source.relaxed("free"), target.relaxed("free")
    for key in ("memory_floor", "collective_sets", "outputs_read_later"):
        if key in src._cache and key not in dst._cache:
            dst._cache[key] = src._cache[key]


def _made_before(graph: Graph, marks: list[int]) -> list[int]:
    """Per node, the union of `marks` over the nodes before it (its ancestors, not itself)."""
    out = [0] * len(graph.nodes)
    for v in range(len(graph.nodes)):  # ids are a topological order
        acc = 0
        for p in graph.preds[v]:
            acc |= out[p] | marks[p]
        out[v] = acc
    return out


def _at_or_after(graph: Graph, marks: list[int], always: int = 0) -> list[int]:
    """Per node, the union of `marks` over it and the nodes after it (its descendants), and `always`."""
    out = [0] * len(graph.nodes)
    for v in range(len(graph.nodes) - 1, -1, -1):
        acc = marks[v] | always
        for s in graph.succs[v]:
            acc |= out[s]
        out[v] = acc
    return out


def _held_bytes(graph: Graph, c: int) -> int:
    """Bytes of c's outputs still live while any kernel between c and its waits runs: each one that is a graph
    output or that a wait of c (or a node after one) reads. Counted only where c is not an ancestor of the
    kernel (there the floor may hold them already)."""
    waits = set(graph.waits_of[c])
    total = 0
    for j in graph.produces[c]:
        if graph.b_out[j] or any(u in waits for u in graph.b_cons[j]) or _after_waits(graph, waits, graph.b_cons[j]):
            total += graph.b_alloc[j]
    return total


def _after_waits(graph: Graph, waits: set[int], readers: list[int]) -> bool:
    """Whether a reader follows one of `waits` (a direct successor is enough for MODEL.md's buffers)."""
    return any(any(p in waits for p in graph.preds[u]) for u in readers)


def _collective_sets(graph: Graph) -> tuple[list[int], list[int], list[int]]:
    """Per node, bitsets over the collectives (bit i: the i-th in id order): those after it (it must precede
    their issue), those one of whose waits precedes it (their transfer has ended when it starts), and those
    before it. Kept on the graph: the overlap bound and the partners a budget keeps apart share them."""
    if "collective_sets" not in graph._cache:
        graph._cache["collective_sets"] = _sets_of(graph)
    return graph._cache["collective_sets"]


def _sets_of(graph: Graph) -> tuple[list[int], list[int], list[int]]:
    n = len(graph.nodes)
    cid = {c: i for i, c in enumerate(v for v in range(n) if graph.kind[v] == COLLECTIVE)}
    desc = [0] * n
    for v in range(n - 1, -1, -1):  # ids are a topological order
        acc = 0
        for s in graph.succs[v]:
            acc |= desc[s] | (1 << cid[s] if graph.kind[s] == COLLECTIVE else 0)
        desc[v] = acc
    after, anc = [0] * n, [0] * n
    for v in range(n):
        aw = an = 0
        for p in graph.preds[v]:
            aw |= after[p] | (1 << cid[graph.coll_of[p]] if graph.kind[p] == WAIT else 0)
            an |= anc[p] | (1 << cid[p] if graph.kind[p] == COLLECTIVE else 0)
        after[v], anc[v] = aw, an
    return desc, after, anc


def _memory_floor(graph: Graph) -> list[int]:
    """Per node v, bytes live at v's step (post-alloc) in every order: v's own outputs, graph outputs made
    before it, and the largest `TRACKED` buffers that something before it made (or the graph brought) and that v
    or something after it reads; every other buffer at its least (0, or allocated less freed where a kernel
    frees more than it allocated). Kept on the graph: the bound and the infeasibility proof share it."""
    if "memory_floor" not in graph._cache:
        graph._cache["memory_floor"] = _floor_of(graph)
    return graph._cache["memory_floor"]


def _floor_of(graph: Graph) -> list[int]:
    n, nb = len(graph.nodes), len(graph.b_prod)
    counted = [j for j in range(nb) if graph.b_prod[j] >= 0 or graph.b_fin[j]]
    low = 0  # each buffer's least contribution: freed ones may leave allocated - freed
    for j in counted:
        if graph.b_prod[j] >= 0 and not graph.b_out[j]:
            low += min(0, graph.b_alloc[j] - graph.b_free[j])

    def live_size(j: int) -> int:  # what a live buffer adds over its least contribution
        if graph.b_prod[j] < 0:
            return graph.b_free[j]
        return graph.b_alloc[j] - (0 if graph.b_out[j] else min(0, graph.b_alloc[j] - graph.b_free[j]))

    track = sorted(counted, key=live_size, reverse=True)[:TRACKED]
    bit = {j: k for k, j in enumerate(track)}
    sizes = [live_size(j) for j in track]  # exact: two 32-bit halves, so sums of 2^50-byte buffers stay integers
    weights = (np.asarray([w >> 32 for w in sizes], dtype=np.int64), np.asarray([w & 0xFFFFFFFF for w in sizes],
                                                                                   dtype=np.int64))
    inputs = outputs = 0
    for j in track:
        if graph.b_prod[j] < 0:
            inputs |= 1 << bit[j]
        elif graph.b_out[j]:
            outputs |= 1 << bit[j]
    reads = [0] * n
    made = [0] * n
    for j in track:
        for u in graph.b_cons[j]:
            reads[u] |= 1 << bit[j]
        if graph.b_prod[j] >= 0:
            made[graph.b_prod[j]] |= 1 << bit[j]
    later = _at_or_after(graph, reads)  # read by v or a node after it
    before = _made_before(graph, made)  # made by a node before v
    own = [sum(live_size(j) for j in graph.produces[v] if graph.b_prod[j] >= 0) for v in range(n)]
    lives = [((before[v] | inputs) & later[v] | before[v] & outputs) & ~made[v] for v in range(n)]
    held = _weighted(lives, len(track), weights)
    return [low + own[v] + held[v] for v in range(n)]


ROWS = 512  # bit sets summed at once by `_weighted` (512 x 4,096 tracked buffers: 16 MB of float64)


def _weighted(sets: list[int], width: int, weights: tuple[np.ndarray, np.ndarray]) -> list[int]:
    """Per bit set, the sum of the weights over its set bits (bit k: weight k, given as its high and low 32 bits),
    exactly: the halves are summed apart, each sum at most 4,096 x 2^32 = 2^44, so a float64 product (BLAS) adds
    them without rounding. In blocks of `ROWS` sets, one matrix product each."""
    halves = np.stack([w.astype(np.float64) for w in weights], axis=1)  # (width, 2)
    nbytes = (width + 7) // 8
    out: list[int] = []
    for start in range(0, len(sets), ROWS):
        block = sets[start:start + ROWS]
        raw = np.frombuffer(b"".join(x.to_bytes(nbytes, "little") for x in block), dtype=np.uint8)
        bits = np.unpackbits(raw.reshape(len(block), nbytes), axis=1, bitorder="little")[:, :width]
        sums = (bits.astype(np.float64) @ halves).astype(np.int64)
        out += [(int(h) << 32) + int(lo) for h, lo in sums.tolist()]
    return out


def _max_flow(supply: list[float], ids: list[int], classes: dict[int, float], other: float) -> float:
    """The maximum flow from the collectives (`supply`, bit `ids[i]` in a class's signature) to the kernels'
    classes (capacity: their summed durations) and to `other` (launches and waits, open to every collective),
    capacities rounded up to `SCALE`, so never below the true flow."""
    from ortools.graph.python import max_flow

    sigs = _coarsen(classes)
    k = len(ids)
    src, sink, oth = k + len(sigs), k + len(sigs) + 1, k + len(sigs) + 2
    tails, heads, caps = [], [], []
    big = int(math.ceil(sum(supply) * SCALE)) + 1
    for i, d in enumerate(supply):
        tails.append(src), heads.append(i), caps.append(int(math.ceil(d * SCALE)))
        tails.append(i), heads.append(oth), caps.append(big)
    tails.append(oth), heads.append(sink), caps.append(int(math.ceil(other * SCALE)))
    for m, (sig, cap) in enumerate(sigs):
        for i, b in enumerate(ids):
            if sig >> b & 1:
                tails.append(i), heads.append(k + m), caps.append(big)
        tails.append(k + m), heads.append(sink), caps.append(int(math.ceil(cap * SCALE)))
    mf = max_flow.SimpleMaxFlow()
    mf.add_arcs_with_capacity(np.asarray(tails, dtype=np.int32), np.asarray(heads, dtype=np.int32),
                              np.asarray(caps, dtype=np.int64))
    if mf.solve(src, sink) != mf.OPTIMAL:
        return math.fsum(supply)  # no flow known: every transfer may be hidden
    return mf.optimal_flow() / SCALE


def _coarsen(classes: dict[int, float]) -> list[tuple[int, float]]:
    """The classes as (signature, capacity); where their arcs would pass `MAX_ARCS`, neighbours (in the order
    they were first met) are merged into one with the union of their signatures: every flow of the finer
    network is one of the coarser, so its maximum can only grow."""
    sigs = list(classes.items())
    while len(sigs) > 1 and sum(s.bit_count() for s, _ in sigs) > MAX_ARCS:
        sigs = [(sigs[i][0] | (sigs[i + 1][0] if i + 1 < len(sigs) else 0),
                 sigs[i][1] + (sigs[i + 1][1] if i + 1 < len(sigs) else 0.0)) for i in range(0, len(sigs), 2)]
    return sigs


__all__ = ["S_PER_NODE", "SHARE", "Apart", "kept_apart", "overlap_capacity_bound", "peak_floor", "share_tables"]
