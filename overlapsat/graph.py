"""The graph model of MODEL.md: nodes, buffers, dependencies, atomic groups.

A `Graph` is immutable once built and is validated in full on construction, so
every other module can trust it. Internally everything is indexed by integer
node/buffer ids (position in the input order) so the simulator, validator and
heuristics stay linear on 100k-node graphs.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.gc_pause import paused_gc

COMPUTE, COLLECTIVE, WAIT = 0, 1, 2

# collective-order policies, strictest first (docs/solver.md, Collective order)
COLLECTIVE_ORDERS = ("chain", "global", "group", "free")


class NodeKind(str, Enum):
    COMPUTE = "compute"
    COLLECTIVE = "collective"
    WAIT = "wait"

    @property
    def code(self) -> int:
        return _KIND_CODE[self]


_KIND_CODE = {NodeKind.COMPUTE: COMPUTE, NodeKind.COLLECTIVE: COLLECTIVE, NodeKind.WAIT: WAIT}


def natural_key(name: str) -> tuple:
    """'op9' before 'op10': numbers compare as numbers, so generated names keep their natural order."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.findall(r"\d+|\D+", name)) + ((2, 0, name),)


@dataclass(frozen=True, slots=True)
class Node:
    """One scheduler node. Collective fields are empty on other kinds."""

    name: str
    kind: NodeKind
    duration: float = 0.0
    group: str | None = None
    op: str | None = None
    nbytes: int = 0
    group_size: int = 1
    collective: str | None = None
    flops: float = 0.0
    bytes_accessed: float = 0.0
    gemm_like: bool = False
    # Inductor's own runtime estimate in its unit (ns), when the graph was priced by it: the ports decide on
    # these raw values, as torch does (us conversions can flip exact ties; docs/decisions.md 16)
    estimate: float | None = None
    # what issuing a collective costs the compute stream before its transfer can start (us; decisions.md 17).
    # A wait's own `duration` is its cost on the compute stream after its collective has ended.
    launch: float = 0.0
    # what else torch's bucketing keys a collective on besides op and group (dtype, reduce op), as text; None
    # when the graph does not record it (MODEL.md "Buckets")
    bucket_key: str | None = None


@dataclass(frozen=True, slots=True)
class Buffer:
    """A buffer; sizes follow Inductor's (size_alloc, size_free) split."""

    name: str
    producer: str | None
    consumers: tuple[str, ...] = ()
    size_alloc: int = 0
    size_free: int = 0
    output: bool = False
    freeable_input: bool = False


MAX_DURATION_US = 1e12  # 11.6 days: past it a value is a unit mistake, and sums lose precision
MAX_BYTES = 2**62  # past it a value is a mistake, and sums leave 64-bit integers

_DERIVED: ContextVar[bool] = ContextVar("overlapsat_derived_graph", default=False)


@contextmanager
def derived() -> Iterator[None]:
    """Graphs built inside are the library's own rearrangements of a checked graph (its nodes, buffers and names
    reordered, edges between its nodes added): they skip `_check_input`, a third of a 50k-node copy's cost."""
    token = _DERIVED.set(True)
    try:
        yield
    finally:
        _DERIVED.reset(token)


def _finite_nonneg(x: Any, top: float = MAX_DURATION_US) -> bool:
    t = type(x)
    if t is float or t is int:  # the common case (NaN fails the comparisons; inf fails a finite top)
        return 0 <= x <= top and (top != math.inf or math.isfinite(x))
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and 0 <= x <= top


def _int_size(x: Any) -> bool:
    if type(x) is int:  # the common case
        return 0 <= x <= MAX_BYTES
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return math.isfinite(x) and 0 <= x <= MAX_BYTES and float(x).is_integer()


@dataclass(frozen=True)
class Graph:
    """A validated scheduling graph; its node list is the input order."""

    nodes: tuple[Node, ...]
    buffers: tuple[Buffer, ...] = ()
    edges: tuple[tuple[str, str], ...] = ()
    atomic_groups: tuple[tuple[str, ...], ...] = ()
    name: str = "graph"
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    fake_edges: tuple[tuple[str, str], ...] = ()
    implied_edges: tuple[tuple[str, str], ...] = ()
    # Inductor's nodes before fusion, for the ports' scores (docs/decisions.md 16): (member, the graph node it
    # was fused into, its members before it); members in a topological order. Not part of the problem.
    prefusion: tuple[tuple[str, str, tuple[str, ...]], ...] = field(default=(), compare=False)
    # True once `relaxed` has decided which fake edges are Inductor's chain: a copy in another node order (the
    # canonical form) keeps that decision, since "the next collective" depends on the order it is read in
    chain_decided: bool = field(default=False, compare=False)

    def __repr__(self) -> str:  # the fields run to megabytes on large graphs
        c = self.counts()
        return (f"Graph({self.name!r}, nodes={c['nodes']} ({c['compute']} compute, {c['collective']} collective, "
                f"{c['wait']} wait), buffers={c['buffers']}, edges={c['edges']})")

    # -- the index, built once on construction (ids are positions in the input order) --
    names: list[str] = field(init=False, repr=False, compare=False)
    index: dict[str, int] = field(init=False, repr=False, compare=False)
    kind: list[int] = field(init=False, repr=False, compare=False)  # COMPUTE, COLLECTIVE or WAIT
    dur: list[float] = field(init=False, repr=False, compare=False)  # kernel / transfer / a wait's own time
    launch: list[float] = field(init=False, repr=False, compare=False)  # a collective's issue cost (0 otherwise)
    work: list[float] = field(init=False, repr=False, compare=False)  # time on the compute stream
    wait_of: list[int] = field(init=False, repr=False, compare=False)  # collective -> its first wait (-1: none)
    waits_of: list[list[int]] = field(init=False, repr=False, compare=False)  # collective -> all its waits
    coll_of: list[int] = field(init=False, repr=False, compare=False)  # wait -> its collective
    groups: list[str] = field(init=False, repr=False, compare=False)
    group_id: list[int] = field(init=False, repr=False, compare=False)  # collective -> group (-1 otherwise)
    group_colls: list[list[int]] = field(init=False, repr=False, compare=False)  # per group, in input order
    coll_seq: list[int] = field(init=False, repr=False, compare=False)  # every collective, in input order
    preds: list[list[int]] = field(init=False, repr=False, compare=False)  # every ordering constraint
    data_preds: list[list[int]] = field(init=False, repr=False, compare=False)  # data and explicit edges only
    direct_preds: list[list[int]] = field(init=False, repr=False, compare=False)  # before implied edges
    succs: list[list[int]] = field(init=False, repr=False, compare=False)
    buffer_index: dict[str, int] = field(init=False, repr=False, compare=False)
    b_prod: list[int] = field(init=False, repr=False, compare=False)  # -1: graph input
    b_cons: list[list[int]] = field(init=False, repr=False, compare=False)
    b_alloc: list[int] = field(init=False, repr=False, compare=False)
    b_free: list[int] = field(init=False, repr=False, compare=False)
    b_out: list[bool] = field(init=False, repr=False, compare=False)
    b_fin: list[bool] = field(init=False, repr=False, compare=False)
    produces: list[list[int]] = field(init=False, repr=False, compare=False)
    consumes: list[list[int]] = field(init=False, repr=False, compare=False)
    atomic: list[list[int]] = field(init=False, repr=False, compare=False)
    atomic_of: list[int] = field(init=False, repr=False, compare=False)
    _compute_total: float = field(init=False, repr=False, compare=False)
    _comm_total: float = field(init=False, repr=False, compare=False)
    _cache: dict[str, Any] = field(init=False, repr=False, compare=False)  # derived tables of other layers

    def __post_init__(self) -> None:
        with paused_gc():  # the index is millions of small lists at production sizes (gc_pause.py)
            self._freeze_and_index()

    def _freeze_and_index(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "buffers", tuple(self.buffers))
        object.__setattr__(self, "edges", tuple((str(u), str(v)) for u, v in self.edges))
        object.__setattr__(self, "fake_edges", tuple((str(u), str(v)) for u, v in self.fake_edges))
        object.__setattr__(self, "implied_edges", tuple((str(u), str(v)) for u, v in self.implied_edges))
        object.__setattr__(self, "atomic_groups", tuple(tuple(g) for g in self.atomic_groups))
        object.__setattr__(self, "prefusion", tuple((str(m), str(f), tuple(str(x) for x in ps))
                                                    for m, f, ps in self.prefusion))
        if not _DERIVED.get():  # a copy the library derived from a checked graph skips the input checks
            _check_input(self)
        _build_index(self)
        _check_order(self)

    # -- convenience -------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, name: str) -> Node:
        try:
            return self.nodes[self.index[name]]
        except KeyError:
            raise GraphError(f"unknown node {name!r} in graph {self.name!r}") from None

    @property
    def input_order(self) -> list[str]:
        return list(self.names)

    def order_indices(self, order: Sequence[str | int]) -> list[int]:
        """Convert an order of names (or ids) to ids; unknown names raise."""
        idx = self.index
        out: list[int] = []
        bad: list[str] = []
        n = len(self.nodes)
        for x in order:
            if isinstance(x, str):
                i = idx.get(x)
                if i is None:
                    bad.append(repr(x))
                    continue
                out.append(i)
            elif isinstance(x, int) and not isinstance(x, bool) and 0 <= x < n:
                out.append(x)
            else:
                bad.append(repr(x))
        if bad:
            raise GraphError.from_problems(
                f"schedule for graph {self.name!r} names unknown nodes",
                [f"unknown node {b}" for b in bad],
            )
        return out

    @property
    def compute_total(self) -> float:
        """Work on the compute stream: kernels, plus collectives' launches and waits' own time (decisions.md 17)."""
        return self._compute_total

    @property
    def has_stream_costs(self) -> bool:
        """Whether any wait or collective costs the compute stream time (decisions.md 17)."""
        return any(self.launch) or any(d for d, k in zip(self.dur, self.kind) if k == WAIT)

    @property
    def comm_total(self) -> float:
        return self._comm_total

    @property
    def port_dur(self) -> list[float]:
        """What the ported passes compare: Inductor's raw estimates when every node has one, else `dur`."""
        if "port_dur" not in self._cache:
            raw = [nd.estimate for nd in self.nodes]
            self._cache["port_dur"] = [float(x) for x in raw] if raw and all(x is not None for x in raw) else self.dur
        return self._cache["port_dur"]

    def counts(self) -> dict[str, int]:
        return {
            "nodes": len(self.nodes),
            "compute": self.kind.count(COMPUTE),
            "collective": self.kind.count(COLLECTIVE),
            "wait": self.kind.count(WAIT),
            "buffers": len(self.buffers),
            "edges": sum(len(s) for s in self.succs),
        }

    def with_durations(self, durations: dict[str, float]) -> Graph:
        """A copy with some node durations replaced (re-pricing)."""
        nodes = [replace(nd, duration=float(durations[nd.name])) if nd.name in durations else nd for nd in self.nodes]
        return replace(self, nodes=tuple(nodes), meta=dict(self.meta))

    def reprice(self, cost_model: Any) -> Graph:
        """A copy priced by `cost_model` (anything with `duration(node) -> us`); waits and launches keep theirs."""
        if not hasattr(cost_model, "duration"):
            raise GraphError(f"reprice: {cost_model!r} is not a cost model (it needs a duration(node) method)")
        durations = {}
        for nd in self.nodes:
            if nd.kind is NodeKind.WAIT:
                continue
            d = cost_model.duration(nd)
            if not _finite_nonneg(d):
                raise GraphError(f"reprice: cost model returned {d!r} for node {nd.name!r}; "
                                 "durations must be finite and >= 0")
            durations[nd.name] = round(float(d), 4)
        return self.with_durations(durations)

    def order_pairs(self, collective_order: str) -> list[tuple[int, int]]:
        """The pairs (a, b) a collective-order policy requires to be issued a before b (docs/solver.md).

        chain:  the global input order, and every wait of each collective before
                the next one is issued (Inductor's fake deps after renaming);
        global: every collective in its input order;
        group:  each process group's collectives in their input order;
        free:   nothing beyond the dependencies.
        """
        if collective_order not in COLLECTIVE_ORDERS:
            raise GraphError(f"collective_order must be one of {', '.join(COLLECTIVE_ORDERS)}; got {collective_order!r}")
        key = "order_pairs:" + collective_order
        if key not in self._cache:
            if collective_order == "free":
                pairs: list[tuple[int, int]] = []
            elif collective_order == "group":
                pairs = [(a, b) for cs in self.group_colls for a, b in zip(cs, cs[1:])]
            else:
                seq = self.coll_seq
                pairs = list(zip(seq, seq[1:]))
                if collective_order == "chain":
                    pairs += [(w, b) for a, b in zip(seq, seq[1:]) for w in self.waits_of[a]]
            self._cache[key] = pairs
        return self._cache[key]

    def keeps_before(self, collective_order: str) -> Callable[[int, int], bool] | None:
        """Whether collective u must stay issued before collective c, which the input lists after it, under
        `collective_order`: the pairs `order_pairs` chains, read per pair (group: the same process group; global and
        chain: every pair); None under "free", which keeps none."""
        if collective_order not in COLLECTIVE_ORDERS:
            raise GraphError(f"collective_order must be one of {', '.join(COLLECTIVE_ORDERS)}; got {collective_order!r}")
        if collective_order == "free":
            return None
        if collective_order == "group":
            group = self.group_id
            return lambda u, c: group[u] == group[c]
        return lambda u, c: True

    def chain_edges(self) -> frozenset[tuple[str, str]]:
        """Fake and implied edges that are Inductor's collective chain, not data.

        `decide_global_ordering_of_comms` adds a fake dep from each collective
        to the next, which after mutation renaming runs from the wait of
        collective i to collective i+1; captured graphs carry them as fake
        edges, and the collective-to-collective order as implied edges. They
        are the "chain" level of the collective-order policy, so a looser
        level drops them (`relaxed`); an explicit (data) edge is never dropped.
        """
        if "chain_edges" not in self._cache:
            pairs = {(self.names[a], self.names[b]) for a, b in self.order_pairs("chain")}
            data = set(self.edges)
            self._cache["chain_edges"] = frozenset(e for e in self.fake_edges + self.implied_edges
                                                   if e in pairs and e not in data)
        return self._cache["chain_edges"]

    @property
    def chain_is_decided(self) -> bool:
        """Whether `relaxed` has decided this graph's chain edges (a copy in another order must not again)."""
        return self.chain_decided or bool(self._cache.get("chain_decided"))

    def relaxed(self, collective_order: str) -> Graph:
        """This graph under a collective-order level: without Inductor's chain edges unless the level is "chain"
        (the level's own pairs then stand for them; docs/decisions.md 14)."""
        if collective_order not in COLLECTIVE_ORDERS:
            raise GraphError(f"collective_order must be one of {', '.join(COLLECTIVE_ORDERS)}; got {collective_order!r}")
        if collective_order == "chain" or self.chain_is_decided:
            return self
        if "relaxed" not in self._cache:
            drop = self.chain_edges()
            if not drop:  # nothing is Inductor's chain in this order: this graph is its own relaxation
                self._cache["chain_decided"] = True
                return self
            with derived():
                self._cache["relaxed"] = replace(
                    self, fake_edges=tuple(e for e in self.fake_edges if e not in drop),
                    implied_edges=tuple(e for e in self.implied_edges if e not in drop), meta=dict(self.meta),
                    chain_decided=True)
        return self._cache["relaxed"]

    def with_collective_chain(self, mode: str = "group") -> Graph:
        """A copy with the pairs of a collective-order policy added as fake edges.

        "chain" is what Inductor's `decide_global_ordering_of_comms` leaves after
        mutation renaming (wait of collective i before collective i+1); "group"
        and "global" chain the collectives themselves, so the ported passes see
        the constraints the result is validated against.
        """
        if mode not in COLLECTIVE_ORDERS:
            raise GraphError(f"collective chain mode must be one of {', '.join(COLLECTIVE_ORDERS)}, got {mode!r}")
        key = f"chain:{mode}"
        if key not in self._cache:
            extra = {(self.names[a], self.names[b]) for a, b in self.order_pairs(mode)}
            add = extra - set(self.fake_edges) - set(self.edges)
            # nothing to add (no collectives, or the pairs are there): this graph is its own copy, said by None, as
            # the graph in its own cache would be a reference cycle, which only the cyclic collector frees
            self._cache[key] = _with_forward_edges(self, sorted(add)) if add else None
        return self._cache[key] or self

    def structural_group_names(self) -> dict[str, str]:
        """Each process group's name -> "g0", "g1", ... in the natural order of the group's first collective's
        name: the same on every SPMD rank, whose graphs differ only in the groups' rank-local names (a
        2-D mesh's ranks sit in different groups of the same shape; decisions.md 48)."""
        first: dict[str, tuple] = {}
        for nd in self.nodes:
            if nd.kind is NodeKind.COLLECTIVE and nd.group is not None:
                k = natural_key(nd.name)
                if nd.group not in first or k < first[nd.group]:
                    first[nd.group] = k
        return {grp: f"g{i}" for i, grp in enumerate(sorted(first, key=first.__getitem__))}

    def with_group_names(self, names: dict[str, str]) -> Graph:
        """A copy whose groups are renamed by `names` (old -> new; others kept); `meta["process_groups"]`
        records new -> old, so the names torch gave stay readable in a graph file."""
        present = {nd.group for nd in self.nodes if nd.group is not None}
        kept = present - set(names)
        new = list(names.values())
        if len(set(new)) != len(new) or kept & set(new):
            raise GraphError(f"with_group_names: two groups would share a name: {names} (kept: {sorted(kept)})")
        nodes = [replace(nd, group=names[nd.group]) if nd.group in names else nd for nd in self.nodes]
        meta = dict(self.meta)
        before = dict(meta.get("process_groups", {}))
        meta["process_groups"] = {names[g]: before.get(g, g) for g in sorted(names, key=names.__getitem__)
                                  if g in present}
        return replace(self, nodes=tuple(nodes), meta=meta)

    def with_structural_groups(self) -> Graph:
        """The graph under `structural_group_names`: what the torch bridge records and looks up, so that every
        rank of an SPMD program finds one graph, one store file and one plan."""
        return self.with_group_names(self.structural_group_names())

    def with_comm_scale(self, factor: float) -> Graph:
        """A copy whose transfers take `factor` times as long: collectives priced as they run beside compute
        (interference measured in a training step, docs/gpu_results.md), for a solve that plans for it."""
        return self.with_durations({nd.name: nd.duration * factor for nd in self.nodes
                                    if nd.kind is NodeKind.COLLECTIVE})

    def with_stream_costs(self, launch_us: float, wait_us: float) -> Graph:
        """A copy where every collective's launch and every wait's own time are these (decisions.md 17)."""
        nodes = [replace(nd, launch=launch_us) if nd.kind is NodeKind.COLLECTIVE
                 else replace(nd, duration=wait_us) if nd.kind is NodeKind.WAIT else nd for nd in self.nodes]
        return replace(self, nodes=tuple(nodes), meta=dict(self.meta))

    def same_as(self, other: Graph) -> bool:
        """Whether `other` is this graph up to node order and file layout: equal fields first (a tenth of the
        fingerprint's price at 8k nodes), else equal fingerprints, which no node order changes."""
        return self == other or self.fingerprint() == other.fingerprint()

    # (files: overlapsat.io's save_graph and graph_to_dict; the graph knows no file format)
    def fingerprint(self) -> str:
        """Structural hash, independent of file layout and node order.

        The per-group collective sequence is part of the problem (MODEL.md,
        validity 3), so it is hashed; the position of other nodes is not. Kept once computed (0.3-0.8 s at 36k
        nodes; a store and a schedule file each ask for it): every field it reads is frozen.
        """
        if "fingerprint" not in self._cache:
            self._cache["fingerprint"] = self._fingerprint()
        return self._cache["fingerprint"]

    def _fingerprint(self) -> str:
        nodes = sorted(
            [
                nd.name,
                nd.kind.value,
                repr(float(nd.duration)),
                nd.group,
                nd.op,
                int(nd.nbytes),
                int(nd.group_size),
                nd.collective,
            ] + ([repr(float(nd.launch))] if nd.launch else [])  # absent when 0: earlier fingerprints stand
            + ([f"key:{nd.bucket_key}"] if nd.bucket_key is not None else [])  # absent when unknown, likewise
            for nd in self.nodes
        )
        bufs = sorted(
            [
                b.name,
                b.producer,
                sorted(set(b.consumers)),
                int(b.size_alloc),
                int(b.size_free),
                bool(b.output),
                bool(b.freeable_input),
            ]
            for b in self.buffers
        )
        edges = sorted({(u, v) for u, v in self.edges})
        fake = sorted({(u, v) for u, v in self.fake_edges + self.implied_edges} - set(edges))
        seqs = {g: [self.names[c] for c in cs] for g, cs in zip(self.groups, self.group_colls)}
        payload = {
            "v": 1,
            "nodes": nodes,
            "buffers": bufs,
            "edges": edges,
            **({"fake_edges": fake} if fake else {}),
            **({"gemm": sorted(nd.name for nd in self.nodes if nd.gemm_like)} if any(nd.gemm_like for nd in self.nodes) else {}),
            "atomic": [list(g) for g in self.atomic_groups],
            "collective_order": [self.names[c] for c in self.coll_seq],
            "group_order": dict(sorted(seqs.items())),
        }
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _check_input(g: Graph) -> None:
    """Every problem with the input itself (fields, names, references), all at once. Raises GraphError."""
    problems: list[str] = []
    index: dict[str, int] = {}
    for i, nd in enumerate(g.nodes):
        if not isinstance(nd, Node):
            raise GraphError(f"graph {g.name!r}: item {i} of nodes is not a Node")
        if not isinstance(nd.name, str) or not nd.name:
            problems.append(f"node #{i} has an empty or non-string name")
        if nd.name in index:
            problems.append(f"duplicate node name {nd.name!r}")
        index[nd.name] = i
        if not isinstance(nd.kind, NodeKind):
            problems.append(f"node {nd.name!r}: kind {nd.kind!r} is not compute, collective or wait")
            continue
        if not _finite_nonneg(nd.duration):
            problems.append(f"node {nd.name!r}: duration {nd.duration!r} must be a number of us in [0, 1e12]")
        for fld in ("flops", "bytes_accessed"):
            if not _finite_nonneg(getattr(nd, fld), math.inf):
                problems.append(f"node {nd.name!r}: {fld} {getattr(nd, fld)!r} must be finite and >= 0")
        if nd.kind is NodeKind.COLLECTIVE:
            if not isinstance(nd.group, str) or not nd.group:
                problems.append(f"collective {nd.name!r} has no process group")
            if not _int_size(nd.nbytes):
                problems.append(f"collective {nd.name!r}: nbytes {nd.nbytes!r} must be an integer in [0, 2^62]")
            if not isinstance(nd.group_size, int) or nd.group_size < 1:
                problems.append(f"collective {nd.name!r}: group_size {nd.group_size!r} must be an integer >= 1")
        if not _finite_nonneg(nd.launch):
            problems.append(f"node {nd.name!r}: launch {nd.launch!r} must be a number of us in [0, 1e12]")
        elif nd.launch and nd.kind is not NodeKind.COLLECTIVE:
            problems.append(f"{nd.kind.value} {nd.name!r}: only a collective has a launch cost, got {nd.launch!r}")
        if nd.bucket_key is not None and (nd.kind is not NodeKind.COLLECTIVE or not isinstance(nd.bucket_key, str)):
            problems.append(f"{nd.kind.value} {nd.name!r}: bucket_key {nd.bucket_key!r} belongs to a collective, as "
                            "text")
        if nd.kind is NodeKind.WAIT:
            if not nd.collective:
                problems.append(f"wait {nd.name!r} names no collective")
    if problems:
        raise GraphError.from_problems(f"invalid graph {g.name!r}", problems)
    for nd in g.nodes:  # several waits of one collective are allowed (coalesced collectives; decisions.md 15)
        if nd.kind is NodeKind.WAIT:
            c = index.get(nd.collective)  # type: ignore[arg-type]
            if c is None:
                problems.append(f"wait {nd.name!r} names unknown collective {nd.collective!r}")
            elif g.nodes[c].kind is not NodeKind.COLLECTIVE:
                problems.append(f"wait {nd.name!r} names {nd.collective!r}, which is a {g.nodes[c].kind.value}, "
                                "not a collective")
    bnames: set[str] = set()
    for j, b in enumerate(g.buffers):
        if not isinstance(b, Buffer):
            raise GraphError(f"graph {g.name!r}: item {j} of buffers is not a Buffer")
        if b.name in bnames:
            problems.append(f"duplicate buffer name {b.name!r}")
        bnames.add(b.name)
        for fld in ("size_alloc", "size_free"):
            if not _int_size(getattr(b, fld)):
                problems.append(f"buffer {b.name!r}: {fld} {getattr(b, fld)!r} must be an integer in [0, 2^62]")
        if b.producer is not None:
            if b.producer not in index:
                problems.append(f"buffer {b.name!r}: producer {b.producer!r} is not a node")
            elif b.freeable_input:
                problems.append(f"buffer {b.name!r} is a freeable graph input but has producer {b.producer!r}")
        problems += [f"buffer {b.name!r}: consumer {c!r} is not a node" for c in b.consumers if c not in index]
    for u, v in g.edges + g.fake_edges + g.implied_edges:
        if u not in index or v not in index:
            problems.append(f"edge {u!r} -> {v!r} names unknown node {(u if u not in index else v)!r}")
        elif u == v:
            problems.append(f"edge {u!r} -> {v!r} is a self-loop")
    member: dict[str, int] = {}
    for k, grp in enumerate(g.atomic_groups):
        for nm in grp:
            if nm not in index:
                problems.append(f"atomic group #{k} names unknown node {nm!r}")
            elif nm in member:
                problems.append(f"node {nm!r} is in two atomic groups (#{member[nm]} and #{k})")
            else:
                member[nm] = k
    if problems:
        raise GraphError.from_problems(f"invalid graph {g.name!r}", problems)
    _check_prefusion(g, index)


def _check_prefusion(g: Graph, index: dict[str, int]) -> None:
    """Members name graph nodes and only members listed before them (the ports sweep them in this order)."""
    if not g.prefusion:
        return
    seen: set[str] = set()
    problems = []
    for m, f, ps in g.prefusion:
        if f not in index:
            problems.append(f"prefusion member {m!r}: fused into {f!r}, which is not a node")
        if m in seen:
            problems.append(f"prefusion member {m!r} is listed twice")
        late = [p for p in ps if p not in seen]
        if late:
            problems.append(f"prefusion member {m!r}: its predecessor {late[0]!r} is not a member listed before it")
        seen.add(m)
    if problems:
        raise GraphError.from_problems(f"invalid graph {g.name!r}: prefusion", problems)


def _build_index(g: Graph) -> None:
    """The integer index of a graph whose input passed `_check_input`."""
    nodes = g.nodes
    n = len(nodes)
    names = [nd.name for nd in nodes]
    index = {nm: i for i, nm in enumerate(names)}
    kind = [nd.kind.code for nd in nodes]
    wait_of = [-1] * n
    waits_of: list[list[int]] = [[] for _ in range(n)]
    coll_of = [-1] * n
    groups: list[str] = []
    group_id_of: dict[str, int] = {}
    group_id = [-1] * n
    group_colls: list[list[int]] = []
    coll_seq: list[int] = []
    for i, nd in enumerate(nodes):
        if kind[i] == COLLECTIVE:
            gid = group_id_of.setdefault(nd.group, len(groups))  # type: ignore[arg-type]
            if gid == len(groups):
                groups.append(nd.group)  # type: ignore[arg-type]
                group_colls.append([])
            group_id[i] = gid
            group_colls[gid].append(i)
            coll_seq.append(i)
        elif kind[i] == WAIT:
            c = index[nd.collective]  # type: ignore[index]
            coll_of[i] = c
            waits_of[c].append(i)
            if wait_of[c] < 0:
                wait_of[c] = i
    preds: list[set[int]] = [set() for _ in range(n)]
    nb = len(g.buffers)
    b_prod = [-1] * nb
    b_cons: list[list[int]] = [[] for _ in range(nb)]
    produces: list[list[int]] = [[] for _ in range(n)]
    consumes: list[list[int]] = [[] for _ in range(n)]
    for j, b in enumerate(g.buffers):
        p = index[b.producer] if b.producer is not None else -1
        b_prod[j] = p
        if p >= 0:
            produces[p].append(j)
        for c in dict.fromkeys(index[nm] for nm in b.consumers):
            b_cons[j].append(c)
            consumes[c].append(j)
            if p >= 0 and c != p:
                preds[c].add(p)
    for i in range(n):
        # a wait that reads another wait of its own collective (a second wait_tensor on a waited result)
        # depends on the collective through that wait only, as Inductor's direct-dependency test sees it
        # (decisions.md 24)
        if kind[i] == WAIT and not any(kind[p] == WAIT and coll_of[p] == coll_of[i] for p in preds[i]):
            preds[i].add(coll_of[i])
    # reading a collective's output means waiting for it (MODEL.md: "read by its wait and by the
    # wait's users"), as Inductor's wait mutation edge does; with several waits, the waits that read
    # the buffer (all of them when none does)
    for j in range(nb):
        p = b_prod[j]
        if p >= 0 and kind[p] == COLLECTIVE and waits_of[p]:
            sink = [w for w in waits_of[p] if w in b_cons[j]] or waits_of[p]
            for c in b_cons[j]:
                if coll_of[c] != p:
                    preds[c].update(sink)
    data_preds = [set(p) for p in preds]  # what carries data (Inductor's non-fake deps)
    for u, v in g.edges:
        preds[index[v]].add(index[u])
        data_preds[index[v]].add(index[u])
    for u, v in g.fake_edges:
        preds[index[v]].add(index[u])
    direct = [sorted(p) for p in preds]  # Inductor's unmet dependencies, before implied edges
    for u, v in g.implied_edges:
        preds[index[v]].add(index[u])
    atomic = [[index[nm] for nm in grp] for grp in g.atomic_groups]
    atomic_of = [-1] * n
    for k, ids in enumerate(atomic):
        for i in ids:
            atomic_of[i] = k
    pred_l = [sorted(p) for p in preds]
    succ_l: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        for u in pred_l[v]:
            succ_l[u].append(v)
    dur = [float(nd.duration) for nd in nodes]
    launch = [float(nd.launch) for nd in nodes]
    # each node's cost on the compute stream (MODEL.md, Time; decisions.md 17): a kernel's duration, a
    # collective's launch, a wait's own duration after its collective has ended
    work = [lc if k == COLLECTIVE else d for d, lc, k in zip(dur, launch, kind)]
    values = dict(
        names=names, index=index, kind=kind, dur=dur, launch=launch, work=work, wait_of=wait_of, waits_of=waits_of,
        coll_of=coll_of, groups=groups,
        group_id=group_id, group_colls=group_colls, coll_seq=coll_seq, preds=pred_l,
        data_preds=[sorted(p) for p in data_preds], direct_preds=direct, succs=succ_l,
        buffer_index={b.name: j for j, b in enumerate(g.buffers)}, b_prod=b_prod, b_cons=b_cons,
        b_alloc=[int(b.size_alloc) for b in g.buffers], b_free=[int(b.size_free) for b in g.buffers],
        b_out=[bool(b.output) for b in g.buffers], b_fin=[bool(b.freeable_input) for b in g.buffers],
        produces=produces, consumes=consumes, atomic=atomic, atomic_of=atomic_of,
        _compute_total=math.fsum(work),
        _comm_total=math.fsum(d for d, k in zip(dur, kind) if k == COLLECTIVE),
        _cache={},
    )
    for k, v in values.items():
        object.__setattr__(g, k, v)


def _with_forward_edges(g: Graph, add: list[tuple[str, str]]) -> Graph:
    """`g` with the fake edges `add` (new ones): where each runs forward in the node list, a copy whose index
    shares `g`'s tables but the predecessor and successor lists (the node list stays a valid order, so no check
    is needed; a full rebuild costs 0.3 s at 36k nodes); otherwise a full rebuild, whose check names the edge."""
    ids = [(g.index[u], g.index[v]) for u, v in add]
    if any(a > b for a, b in ids):
        with derived():
            return replace(g, fake_edges=tuple(g.fake_edges) + tuple(add), meta=dict(g.meta))
    out = copy.copy(g)
    preds, direct, succs = list(g.preds), list(g.direct_preds), list(g.succs)
    new_p: dict[int, set[int]] = {}
    new_s: dict[int, set[int]] = {}
    for a, b in ids:
        new_p.setdefault(b, set()).add(a)
        new_s.setdefault(a, set()).add(b)
    for v, ps in new_p.items():
        preds[v], direct[v] = sorted(ps.union(preds[v])), sorted(ps.union(direct[v]))
    for u, ss in new_s.items():
        succs[u] = sorted(ss.union(succs[u]))
    for k, v in (("fake_edges", tuple(g.fake_edges) + tuple(add)), ("meta", dict(g.meta)), ("preds", preds),
                 ("direct_preds", direct), ("succs", succs), ("_cache", {})):
        object.__setattr__(out, k, v)
    return out


def _check_order(g: Graph) -> None:
    """No cycle, and the node list (the input order) is itself a valid schedule."""
    names = g.names
    bad = [(names[u], names[v]) for v in range(len(names)) for u in g.preds[v] if u >= v]
    # every dependency pointing forward in the list makes a cycle impossible: the cycle search (13 ms at 8k
    # nodes, paid by every bucketed graph a plan search builds) runs only to name one where some points back
    cyc = _find_cycle(g.preds, g.succs) if bad else []
    if cyc:
        raise GraphError(f"invalid graph {g.name!r}: dependency cycle through " + " -> ".join(repr(names[i]) for i in cyc))
    if bad:
        raise GraphError.from_problems(
            f"invalid graph {g.name!r}: the node list (input order) breaks dependencies",
            [f"{v!r} is listed before its dependency {u!r}" for u, v in bad],
        )
    problems = [f"atomic group #{k} ({', '.join(repr(names[i]) for i in ids)}) is not contiguous in the input order"
                for k, ids in enumerate(g.atomic) if ids and ids != list(range(ids[0], ids[0] + len(ids)))]
    if problems:
        raise GraphError.from_problems(f"invalid graph {g.name!r}", problems)


def _find_cycle(preds: list[list[int]], succs: list[list[int]]) -> list[int]:
    """Kahn's algorithm; on failure walk predecessors to name one cycle."""
    n = len(preds)
    indeg = [len(p) for p in preds]
    stack = [i for i in range(n) if indeg[i] == 0]
    done = 0
    while stack:
        u = stack.pop()
        done += 1
        for v in succs[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(v)
    if done == n:
        return []
    left = {i for i in range(n) if indeg[i] > 0}
    start = next(iter(sorted(left)))
    pos: dict[int, int] = {}
    path: list[int] = []
    u = start
    while u not in pos:
        pos[u] = len(path)
        path.append(u)
        u = next(p for p in preds[u] if p in left)
    cyc = path[pos[u]:]
    cyc.reverse()  # preds walk goes backwards; report in dependency direction
    return cyc + [cyc[0]]


class GraphBuilder:
    """Build a graph in code, in input order.

    >>> b = GraphBuilder("toy")
    >>> b.compute("mm", duration=10, writes={"y": 1024})
    >>> b.collective("ar", group="tp", op="all_reduce", duration=30, reads=["y"], writes={"y_red": 1024})
    >>> b.wait("ar_wait", "ar")
    >>> b.compute("out", duration=5, reads=["y_red"], writes={"z": 64}, outputs=["z"])
    >>> g = b.build()
    """

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self._nodes: list[Node] = []
        self._reads: dict[str, list[str]] = {}
        self._bufs: dict[str, dict[str, Any]] = {}
        self._edges: list[tuple[str, str]] = []
        self._atomic: list[tuple[str, ...]] = []
        self._outputs: set[str] = set()
        self._made_by: dict[str, list[str]] = {}

    def input(self, name: str, size: int, *, freeable: bool = False, output: bool = False) -> str:
        """A graph input; only freeable inputs count towards memory."""
        self._bufs[name] = dict(producer=None, size_alloc=size, size_free=size, freeable_input=freeable, output=output)
        return name

    def _add(self, node: Node, reads: Iterable[str], writes: dict[str, int | tuple[int, int]] | None,
             outputs: Iterable[str], after: Iterable[str]) -> str:
        self._nodes.append(node)
        for r in reads:
            self._reads.setdefault(r, []).append(node.name)
        for bname, size in (writes or {}).items():
            alloc, free = size if isinstance(size, tuple) else (size, size)
            self._bufs[bname] = dict(producer=node.name, size_alloc=alloc, size_free=free, freeable_input=False, output=False)
            self._made_by.setdefault(node.name, []).append(bname)
        for o in outputs:
            self.mark_output(o)
        for a in after:
            self._edges.append((a, node.name))
        return node.name

    def compute(self, name: str, duration: float, *, reads: Iterable[str] = (),
                writes: dict[str, int | tuple[int, int]] | None = None, outputs: Iterable[str] = (),
                after: Iterable[str] = (), flops: float = 0.0, bytes_accessed: float = 0.0,
                gemm_like: bool = False) -> str:
        node = Node(name, NodeKind.COMPUTE, duration, flops=flops, bytes_accessed=bytes_accessed, gemm_like=gemm_like)
        return self._add(node,
                         reads, writes, outputs, after)

    def collective(self, name: str, *, group: str = "default", op: str = "all_reduce", duration: float = 0.0,
                   nbytes: int = 0, group_size: int = 2, reads: Iterable[str] = (),
                   writes: dict[str, int | tuple[int, int]] | None = None, outputs: Iterable[str] = (),
                   after: Iterable[str] = (), launch: float = 0.0) -> str:
        node = Node(name, NodeKind.COLLECTIVE, duration, group=group, op=op, nbytes=nbytes, group_size=group_size,
                    launch=launch)
        return self._add(node, reads, writes, outputs, after)

    def wait(self, name: str, collective: str, *, reads: Iterable[str] = (),
             writes: dict[str, int | tuple[int, int]] | None = None, after: Iterable[str] = (),
             duration: float = 0.0) -> str:
        """A wait reads its collective's outputs, so they live until the wait.

        When `reads` names some of them (one wait per tensor of a coalesced
        collective), the wait reads only those. `duration` is its own time on
        the compute stream once the collective has ended (decisions.md 17).
        """
        coll_outs = self._made_by.get(collective, [])
        reads = list(reads)
        if any(r in coll_outs for r in reads):
            coll_outs = []
        return self._add(Node(name, NodeKind.WAIT, duration, collective=collective), [*coll_outs, *reads], writes, (),
                         after)

    def mark_output(self, buffer: str) -> None:
        self._outputs.add(buffer)

    def edge(self, before: str, after: str) -> None:
        self._edges.append((before, after))

    def atomic(self, *names: str) -> None:
        self._atomic.append(tuple(names))

    def build(self) -> Graph:
        problems = [f"node {c!r} reads unknown buffer {b!r}" for b, cs in self._reads.items()
                    if b not in self._bufs for c in cs]
        outs = self._outputs
        problems += [f"output {o!r} is not a buffer" for o in sorted(outs) if o not in self._bufs]
        if problems:
            raise GraphError.from_problems(f"invalid graph {self.name!r}", problems)
        buffers = [
            Buffer(bname, spec["producer"], tuple(self._reads.get(bname, ())), spec["size_alloc"], spec["size_free"],
                   output=spec["output"] or bname in outs, freeable_input=spec["freeable_input"])
            for bname, spec in self._bufs.items()
        ]
        return Graph(self._nodes, buffers, self._edges, self._atomic, self.name)
