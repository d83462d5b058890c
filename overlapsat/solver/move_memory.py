"""The memory of a bucket move's plan, without building its bucketed graph (decision 120).

A bucket move (bucket_moves.py) that shortens the walk under a budget had to be confirmed by building and
validating its plan's bucketed graph: 60-120 ms at 3.7k nodes, fifty times a move's walk. So a 10-s plan
search tried a few dozen moves where a 60-s one tried thousands. Here the bucketed graph's buffers (MODEL.md
"Buckets" and "Memory", as `plan._bucketed` maps them) are kept as allocations and frees by node name; a move
changes only the buffers of the collectives it regroups, so its peak is the current events less theirs plus
their new ones, summed over the edited order once. The figure is `peak_of(materialize(...))`'s to the byte
(tests/solver/test_move_memory.py), so at level free, where a move's order is valid by construction, it is
the whole check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import accumulate
from operator import add, sub

from overlapsat.graph import Buffer, Graph
from overlapsat.plan import Bucket, Pricing, bucket_nodes, bucketable_by_key, layout_of

_START = ""  # events of buffers with no producer happen at the order's first step (`simulate._memory`)


class EditPlaces:
    """The places of an edited order, read through the current order's (`base`, of `before` names): the edited
    order equals the current one before `lo` and in its last `tail` places, so only its span is indexed."""

    def __init__(self, base: Mapping[str, int], order: Sequence[str], lo: int, tail: int, before: int) -> None:
        self.base, self.lo, self.stop, self.grown = base, lo, before - tail, len(order) - before
        self.span = {nm: lo + k for k, nm in enumerate(order[lo:len(order) - tail])}

    def __getitem__(self, nm: str) -> int:
        k = self.span.get(nm)
        if k is not None:
            return k
        k = self.base[nm]
        if self.lo <= k < self.stop:
            raise KeyError(nm)  # a node the edit removed
        return k if k < self.lo else k + self.grown


class MoveMemory:
    """The bucketed graph's memory events for the current buckets and order, and the peak of an edit of them."""

    def __init__(self, g: Graph, price: Pricing, buckets: Sequence[Bucket], order: Sequence[str]) -> None:
        self.g, self.price = g, price
        self.coalesced = layout_of(price) == "coalesced"
        self.of: dict[str, Bucket] = {}  # a member, or a member's wait -> its bucket
        for b in buckets:
            self._place(self.of, b)
        # the buffers of each bucketable collective and of its waits (what regrouping it can change)
        self.touch: dict[str, tuple[int, ...]] = {}
        for cs in bucketable_by_key(g).values():
            for c in cs:
                own = [c, *g.waits_of[c]]
                self.touch[g.names[c]] = tuple(dict.fromkeys(j for v in own for j in (*g.produces[v],
                                                                                      *g.consumes[v])))
        self._sizes: dict[Bucket, tuple[str, int, int]] = {}
        self.pos = {nm: k for k, nm in enumerate(order)}
        self.alloc: dict[str, int] = {}
        self.free: dict[str, int] = {}
        for buf in g.buffers:
            self._add(self.alloc, self.free, buf, self.of, self.pos.__getitem__, 1)
        for b in buckets:
            self._bucket(self.alloc, self.free, b, 1)
        self._curve(list(order))

    def _curve(self, order: list[str]) -> None:
        """The live bytes after each step's frees (`live`), and the running maxima of those after its allocations
        from the front (`head[k]`: steps before k) and from the back (`back[k]`: steps from k on)."""
        self.order = order
        post, self.live = self._walk(order, {}, {}, True)
        self.head = [0, *accumulate(post, max)]
        self.back = [*accumulate(reversed(post), max)][::-1] + [-1]

    def _walk(self, names: Sequence[str], da: dict[str, int], df: dict[str, int], first: bool,
              live: int = 0) -> tuple[list[int], list[int]]:
        """The live bytes after each of `names`' allocations and after its frees, from `live`, with the events
        `da` and `df` added (`first`: the first name is the order's first step)."""
        alloc, free = self.alloc, self.free
        grow = [alloc.get(nm, 0) + da.get(nm, 0) for nm in names]
        drop = [free.get(nm, 0) + df.get(nm, 0) for nm in names]
        if first and names:
            grow[0] += alloc.get(_START, 0) + da.get(_START, 0)
            drop[0] += free.get(_START, 0) + df.get(_START, 0)
        after = list(accumulate(map(sub, grow, drop), initial=live))
        return list(map(add, after, grow)), after[1:]

    def _place(self, of: dict[str, Bucket], b: Bucket) -> None:
        g = self.g
        for m in b.members:
            of[m] = b
            of[g.names[g.waits_of[g.index[m]][0]]] = b

    def _mapped(self, buf: Buffer, of: dict[str, Bucket]) -> tuple[str | None, list[str]]:
        """`buf`'s producer and readers in the bucketed graph of `of`'s buckets (`plan._bucketed`'s rules)."""
        p = buf.producer
        bp = of.get(p) if p is not None else None
        written = bp is not None and p in bp.members
        readers: dict[str, None] = {}
        for c in buf.consumers:
            bc = of.get(c)
            if bc is None:
                readers[c] = None
                continue
            mine = c in bc.members
            if not self.coalesced and written and bc == bp and not mine:
                continue  # the member's wait no longer reads what the copy-out now writes
            readers[bc.nodes[1] if self.coalesced and mine else bc.nodes[0] if mine else bc.nodes[2]] = None
        if p is None:
            return None, list(readers)
        if bp is None:
            return p, list(readers)
        return bp.nodes[1 if self.coalesced and written else 3], list(readers)

    def _add(self, alloc: dict[str, int], free: dict[str, int], buf: Buffer, of: dict[str, Bucket],
             pos: Callable[[str], int], sign: int) -> None:
        """`buf`'s allocation and free (`simulate._memory`: at its producer, or the first step for a freeable
        input; freed after its last reader, or where it is made when nothing reads it; outputs never), times
        `sign`, into `alloc` and `free`."""
        prod, readers = self._mapped(buf, of)
        if prod is None and not buf.freeable_input:
            return  # a parameter: a constant, not counted
        at = _START if prod is None else prod
        alloc[at] = alloc.get(at, 0) + sign * (buf.size_alloc if prod is not None else buf.size_free)
        if buf.output:
            return
        last = max(readers, key=pos) if readers else at
        free[last] = free.get(last, 0) + sign * buf.size_free

    def _bucket(self, alloc: dict[str, int], free: dict[str, int], b: Bucket, sign: int) -> None:
        """The buffers bucket `b` adds (copy layout; `plan._bucketed`), times `sign`: the gathered buffer from
        the copy-in to the copy-out and the concatenation the copy-in frees at once (all_gather), or the
        input from the copy-in to the collective and the output from it to the copy-out."""
        if self.coalesced:
            return
        sizes = self._sizes.get(b)
        if sizes is None:
            four = bucket_nodes(self.g, b, self.price)
            sizes = self._sizes[b] = (four[1].op or "", int(four[0].bytes_accessed) // 2,
                                      int(four[3].bytes_accessed) // 2)
        op, n_in, n_out = sizes
        c_in, coll, _, c_out = b.nodes
        if op == "all_gather":
            events = ((c_in, c_out, max(n_in, n_out)), (c_in, c_in, n_in))
        else:
            events = ((c_in, coll, n_in), (coll, c_out, n_out))
        for a, f, size in events:
            alloc[a] = alloc.get(a, 0) + sign * size
            free[f] = free.get(f, 0) + sign * size

    def _delta(self, order: Sequence[str], new: Iterable[Bucket], gone: Iterable[Bucket], lo: int,
               tail: int) -> tuple[dict[str, int], dict[str, int], dict[str, Bucket]]:
        """The events that change from the current buckets and order to `new` and `gone` applied and `order`
        (which equals the current order before `lo` and in its last `tail` places)."""
        new, gone = list(new), list(gone)
        of = dict(self.of)
        g = self.g
        for b in gone:
            for m in b.members:
                of.pop(m, None)
                of.pop(g.names[g.waits_of[g.index[m]][0]], None)
        for b in new:
            self._place(of, b)
        old = self.pos
        pos = EditPlaces(old, order, lo, tail, len(self.order)).__getitem__
        alloc: dict[str, int] = {}
        free: dict[str, int] = {}
        touched = dict.fromkeys(j for b in (*new, *gone) for m in b.members for j in self.touch[m])
        for j in touched:
            buf = g.buffers[j]
            self._add(alloc, free, buf, self.of, old.__getitem__, -1)
            self._add(alloc, free, buf, of, pos, 1)
        for b in gone:
            self._bucket(alloc, free, b, -1)
        for b in new:
            self._bucket(alloc, free, b, 1)
        return alloc, free, of

    def peak(self, order: Sequence[str], new: Iterable[Bucket], gone: Iterable[Bucket], lo: int = 0,
             tail: int = 0) -> int:
        """MODEL.md's peak of `order` on the bucketed graph of the current buckets less `gone`, plus `new` (an
        `Edit`): the edited span walked, the rest read from the current curve (shifted after the span by the
        bytes it leaves live otherwise); every event a move changes lies in its span (the whole order is
        walked where one would not)."""
        da, df, _ = self._delta(order, new, gone, lo, tail)
        stop, end = len(self.order) - tail, len(order) - tail
        old = self.pos  # a name of the current order outside the span keeps its place; the others are in it
        if any(x and (not lo <= old[nm] < stop if nm in old else nm == _START and lo > 0)
               for d in (da, df) for nm, x in d.items()):
            post, _ = self._walk(order, da, df, True)
            return max(0, *post)
        before = self.live[lo - 1] if lo > 0 else 0
        post, live = self._walk(order[lo:end], da, df, lo == 0, before)
        peak = max(self.head[lo], *post) if post else self.head[lo]
        if stop < len(self.order):
            peak = max(peak, self.back[stop] + (live[-1] if live else before) - self.live[stop - 1])
        return max(0, peak)

    def accept(self, order: Sequence[str], new: Iterable[Bucket], gone: Iterable[Bucket], lo: int = 0,
               tail: int = 0) -> None:
        da, df, self.of = self._delta(order, new, gone, lo, tail)
        for mine, d in ((self.alloc, da), (self.free, df)):
            for nm, x in d.items():
                mine[nm] = mine.get(nm, 0) + x
        self.pos = {nm: k for k, nm in enumerate(order)}
        self._curve(list(order))


__all__ = ["EditPlaces", "MoveMemory"]
