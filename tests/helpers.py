"""Independent test helpers: random graphs, random valid orders, brute force.

Written against MODEL.md directly, sharing no code with the library's
optimisers, so that tests comparing against them can fail.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from hypothesis import strategies as st

from overlapsat import Graph, GraphBuilder


def random_graph(seed: int, n: int = 10, *, groups: int = 2, p_coll: float = 0.25, p_edge: float = 0.25,
                 with_memory: bool = True, atomic: bool = False, leave_unwaited: bool = False) -> Graph:
    """A random DAG in input order; every collective's wait lands later."""
    rng = random.Random(seed)
    b = GraphBuilder(f"rand{seed}")
    made: list[str] = []  # buffers produced so far
    pending_waits: list[str] = []
    coll_out: dict[str, str] = {}
    names: list[str] = []
    if with_memory and rng.random() < 0.5:
        b.input("in0", rng.randint(1, 50), freeable=True)
        made.append("in0")
    i = 0
    while i < n:
        if pending_waits and (rng.random() < 0.35 or i >= n - len(pending_waits)):
            c = pending_waits.pop(rng.randrange(len(pending_waits)))
            if not (leave_unwaited and rng.random() < 0.3):
                b.wait(f"w_{c}", c)
                names.append(f"w_{c}")
                made.append(coll_out[c])  # readable once waited
                i += 1
                continue
        reads = [x for x in made if rng.random() < p_edge]
        size = rng.randint(0, 40) if with_memory else 0
        out = f"b{i}"
        if rng.random() < p_coll and i < n - 1:
            name = f"c{i}"
            b.collective(name, group=f"g{rng.randrange(groups)}", duration=float(rng.randint(1, 30)),
                         reads=reads, writes={out: size})
            pending_waits.append(name)
            coll_out[name] = out
            names.append(name)
            i += 1
            continue
        else:
            name = f"k{i}"
            b.compute(name, float(rng.randint(0, 20)), reads=reads, writes={out: size})
        names.append(name)
        made.append(out)
        if with_memory and rng.random() < 0.2:
            b.mark_output(out)
        i += 1
    for c in pending_waits:
        if not leave_unwaited:
            b.wait(f"w_{c}", c)
            names.append(f"w_{c}")
    if atomic and len(names) >= 3:
        # two adjacent compute nodes with no collective in between may form an atomic pair
        for a, c in zip(names, names[1:]):
            if a.startswith("k") and c.startswith("k"):
                b.atomic(a, c)
                break
    return b.build()


def two_paths() -> Graph:
    """k (10 us) reads a freeable input x (30 B) and writes y (50 B); c (8 us) writes z (40 B), waited by w;
    m (1 us) reads y and z. With c issued before k, k's step holds x + y + z = 120 B; after it, 80 B: under a
    budget below 120 B the transfer cannot run beside k (decision 71)."""
    b = GraphBuilder("two_paths")
    b.input("x", 30, freeable=True)
    b.compute("k", 10.0, reads=["x"], writes={"y": 50})
    b.collective("c", group="g", duration=8.0, writes={"z": 40})
    b.wait("w", "c")
    b.compute("m", 1.0, reads=["y", "z"])
    return b.build()


def _ready(g: Graph, placed: list[bool], v: int, collective_order: str) -> bool:
    if placed[v] or any(not placed[u] for u in g.preds[v]):
        return False
    if g.kind[v] == 1 and collective_order != "free":
        seq = g.group_colls[g.group_id[v]] if collective_order == "group" else g.coll_seq
        k = seq.index(v)
        if k > 0 and not placed[seq[k - 1]]:
            return False
        if k > 0 and collective_order == "chain" and not all(placed[w] for w in g.waits_of[seq[k - 1]]):
            return False
    return True


def _units(g: Graph) -> list[list[int]]:
    """Scheduling units: atomic groups as one unit, other nodes alone."""
    units, seen = [], set()
    for v in range(len(g.nodes)):
        if v in seen:
            continue
        a = g.atomic_of[v]
        u = g.atomic[a] if a >= 0 else [v]
        seen.update(u)
        units.append(u)
    return units


def _unit_ready(g: Graph, placed: list[bool], unit: list[int], co: str) -> bool:
    tmp = list(placed)
    for v in unit:
        if not _ready(g, tmp, v, co):
            return False
        tmp[v] = True
    return True


def random_valid_order(g: Graph, rng: random.Random, collective_order: str = "group") -> list[int]:
    placed = [False] * len(g.nodes)
    units = _units(g)
    order: list[int] = []
    while len(order) < len(g.nodes):
        ready = [u for u in units if not placed[u[0]] and _unit_ready(g, placed, u, collective_order)]
        u = rng.choice(ready)
        for v in u:
            placed[v] = True
            order.append(v)
    return order


def all_valid_orders(g: Graph, collective_order: str = "group") -> Iterator[list[int]]:
    """Every order satisfying MODEL.md validity 1, 2, 3 and 5 (brute force)."""
    units = _units(g)
    placed = [False] * len(g.nodes)
    order: list[int] = []

    def rec() -> Iterator[list[int]]:
        if len(order) == len(g.nodes):
            yield list(order)
            return
        for u in units:
            if not placed[u[0]] and _unit_ready(g, placed, u, collective_order):
                for v in u:
                    placed[v] = True
                    order.append(v)
                yield from rec()
                for v in u:
                    placed[v] = False
                    order.pop()

    yield from rec()


def naive_makespan(g: Graph, order: list[int]) -> float:
    """MODEL.md's walk, written out again from the text (not the library's code)."""
    t, free, end = 0.0, {}, {}
    for v in order:
        nd = g.nodes[v]
        if nd.kind.value == "compute":
            t += nd.duration
        elif nd.kind.value == "collective":
            t += nd.launch
            s = max(t, free.get(nd.group, 0.0))
            end[nd.name] = s + nd.duration
            free[nd.group] = s + nd.duration
        else:
            t = max(t, end[nd.collective]) + nd.duration
    return max([t, *free.values()])


def naive_peak(g: Graph, order: list[int]) -> int:
    """Peak memory recomputed from MODEL.md's text with a plain scan."""
    names = g.names
    pos = {names[v]: s for s, v in enumerate(order)}
    cur = sum(b.size_free for b in g.buffers if b.freeable_input)
    peak = 0
    for s, v in enumerate(order):
        cur += sum(b.size_alloc for b in g.buffers if b.producer == names[v])
        peak = max(peak, cur)
        for b in g.buffers:
            if b.output or (b.producer is None and not b.freeable_input):
                continue
            users = [pos[c] for c in b.consumers]
            last = max(users) if users else pos.get(b.producer, 0)
            if last == s:
                cur -= b.size_free
    return peak


@st.composite
def graphs(draw: st.DrawFn, max_nodes: int = 12, **kw: object) -> Graph:
    seed = draw(st.integers(0, 10**6))
    n = draw(st.integers(2, max_nodes))
    if "groups" not in kw:
        kw["groups"] = draw(st.integers(1, 3))
    return random_graph(seed, n, **kw)  # type: ignore[arg-type]


class WithGroupMember:
    """`price` that also charges `us` per member beyond the first of a coalesced bucket's group call (decision 56)."""

    def __init__(self, price, us: float) -> None:
        self.inner, self.group_member_us = price, us

    def __call__(self, nd):
        return self.inner(nd)
