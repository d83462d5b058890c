"""Bucket moves that keep the current order: split, drop and merge buckets without rebuilding the graph.

The plan search's hill climb scores a bucketing by building its bucketed graph (`materialize`, which re-indexes
the whole graph: 0.2 s at 16k nodes) and running Inductor's passes on it. Here a move edits the current order
in place instead, and MODEL.md's walk of the edited order is computed from per-node figures alone (`_Layout`):

- split or drop a bucket: its parts (new buckets, or collectives alone) take its four positions;
- merge two units of one key (a bucket or a collective alone each): the merged copy-in and collective take the
  later collective's position (or the earlier one's), the merged wait and copy-out the earlier wait's. It is
  made only when the transfers overlap and no dependency would point backwards (`_merge_fits`, from the
  unbucketed graph's edges).

The edited order is valid on the bucketed graph by construction (each new node's dependencies are among those
of the node whose place it takes, or checked), so the bucketed graph is built once, at the end, where the order
is checked again (`validate`). At level "free" without a budget that is all. Under a budget, a move that shortens
the walk is kept only within it, by its plan's peak computed here (`MoveMemory`, exact; decision 120). At a
stricter level a group's collective sequence depends on the whole bucketing, which the edit does not see: there
such a move is kept only when `confirm` (the plan search's, exact, without the budget: the collective sequences
of the edited plan's bucketed graph at group and global, or the plan built and validated at chain, about 0.2 s
at 16k nodes) finds the edited plan valid. Only the few moves that shorten the walk pay.

An edit is spliced from slices of the current order, and its walk (`walk_edit`) visits only the edited span and
the collectives and waits outside it, whose compute clock is the current order's prefix sum.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from overlapsat.graph import COLLECTIVE, WAIT, Graph, Node, NodeKind
from overlapsat.plan import Bucket, Pricing, bucket_key, bucket_nodes, bucket_problems, bucketable_by_key
from overlapsat.solver.move_memory import EditPlaces, MoveMemory

_Figures = tuple[int, float, float, int, str]  # kind, compute-stream work, transfer, group id, a wait's collective


class Edit(NamedTuple):
    """A move's result: the edited order, the buckets it makes and those it removes, and where the order
    changed (positions before `lo`, and the last `tail`, are those of the current order)."""

    order: list[str]
    new: list[Bucket]
    gone: list[Bucket]
    lo: int = 0
    tail: int = 0


@dataclass
class _Unit:
    """A bucket, or a collective alone (its own copy-in and copy-out are None)."""

    members: tuple[str, ...]
    copy_in: str | None
    coll: str
    wait: str
    copy_out: str | None


class _Layout:
    """The current buckets and order of the bucketed graph, by name, and the figures the walk reads."""

    def __init__(self, g: Graph, price: Pricing, buckets: Sequence[Bucket], order: Sequence[str],
                 sequences: list[list[int]] | None = None) -> None:
        self.g, self.price = g, price
        # the collective sequences a level keeps (input indices, each list sorted), None at level free
        self.sequences = sequences
        self.seq_of = {c: i for i, cs in enumerate(sequences or []) for c in cs}
        self.groups = {grp: i for i, grp in enumerate(g.groups)}
        self.fig: dict[str, _Figures] = {}
        for v, nm in enumerate(g.names):
            self.fig[nm] = (g.kind[v], g.work[v], g.dur[v] if g.kind[v] == COLLECTIVE else 0.0,
                            g.group_id[v], g.names[g.coll_of[v]] if g.kind[v] == WAIT else "")
        self.buckets: dict[Bucket, None] = {}
        self.unit_of: dict[str, _Unit] = {}  # a bucketable collective -> its unit
        for cs in bucketable_by_key(g).values():
            for c in cs:
                self.unit_of[g.names[c]] = self._alone(g.names[c])
        for b in buckets:
            self._add(b)
        self._index(list(order))

    def _index(self, order: list[str]) -> None:
        """The current order, each name's place, the compute clock before each step without stalls (a prefix
        sum), and the places of collectives and waits: what `walk_edit` reads."""
        self.order = order
        self.pos = {nm: k for k, nm in enumerate(order)}
        fig = self.fig
        pre = [0.0] * (len(order) + 1)
        clock = 0.0
        events = []
        for k, nm in enumerate(order):
            f = fig[nm]
            if f[0] == COLLECTIVE or f[0] == WAIT:
                events.append(k)
            clock += f[1]
            pre[k + 1] = clock
        self.pre, self.events = pre, events

    def _alone(self, m: str) -> _Unit:
        """Collective m in no bucket."""
        return _Unit((m,), None, m, self.g.names[self.g.waits_of[self.g.index[m]][0]], None)

    def _nodes(self, b: Bucket) -> tuple[Node, Node, Node, Node]:
        """Bucket b's four nodes, priced, with their figures known to the walk."""
        four = bucket_nodes(self.g, b, self.price)
        for nd in four:
            if nd.name not in self.fig:
                kind = {NodeKind.COMPUTE: 0, NodeKind.COLLECTIVE: COLLECTIVE, NodeKind.WAIT: WAIT}[nd.kind]
                work = nd.launch if kind == COLLECTIVE else nd.duration
                self.fig[nd.name] = (kind, work, nd.duration if kind == COLLECTIVE else 0.0,
                                     self.groups[nd.group] if kind == COLLECTIVE else -1,
                                     nd.collective or "")
        return four

    def _add(self, b: Bucket) -> _Unit:
        c_in, coll, wait, c_out = self._nodes(b)
        u = _Unit(b.members, c_in.name, coll.name, wait.name, c_out.name)
        self.buckets[b] = None
        for m in b.members:
            self.unit_of[m] = u
        return u

    def walk(self, order: Sequence[str]) -> tuple[float, dict[str, float]]:
        """MODEL.md's walk of `order` as `simulate` does it (the clock without stalls, plus the stalls so far):
        the makespan, and each wait's stall by its collective's name."""
        free = [0.0] * len(self.groups)
        stall: dict[str, float] = {}
        clock, delay = self._span(order, 0.0, 0.0, free, {}, stall)
        return max([clock + delay, *free]) if free else clock + delay, stall

    def walk_edit(self, e: Edit) -> float:
        """The makespan of `walk(e.order)`, visiting only the collectives and waits outside the edited span
        (their clock is the current order's prefix sum, shifted after the span by the work it changed) and the
        span itself. The sums differ from `walk`'s by rounding only: it screens moves, and a kept one is walked
        whole."""
        pre, events = self.pre, self.events
        free = [0.0] * len(self.groups)
        ends: dict[str, float] = {}
        stop = len(self.order) - e.tail
        i_lo, i_stop = bisect.bisect_left(events, e.lo), bisect.bisect_left(events, stop)
        delay = self._events(events[:i_lo], 0.0, 0.0, free, ends)
        clock, delay = self._span(e.order[e.lo:len(e.order) - e.tail], pre[e.lo], delay, free, ends)
        moved = clock - pre[stop]
        delay = self._events(events[i_stop:], moved, delay, free, ends)
        end = pre[len(self.order)] + moved + delay
        return max([end, *free]) if free else end

    def _span(self, names: Sequence[str], clock: float, delay: float, free: list[float], ends: dict[str, float],
              stall: dict[str, float] | None = None) -> tuple[float, float]:
        """`names` walked node by node from `clock` (without stalls) and `delay` (the stalls so far): the two
        after them (`stall`: each wait's stall recorded by its collective's name)."""
        fig = self.fig
        for nm in names:
            kind, work, dur, grp, coll = fig[nm]
            t = clock + delay
            if kind == COLLECTIVE:
                t += work
                f = free[grp]
                free[grp] = ends[nm] = (t if t > f else f) + dur
            elif kind == WAIT:
                ce = ends[coll]
                if ce > t:
                    delay += ce - t
                    if stall is not None:
                        stall[coll] = ce - t
            clock += work
        return clock, delay

    def _events(self, places: list[int], shift: float, delay: float, free: list[float],
                ends: dict[str, float]) -> float:
        """The collectives and waits at `places` of the current order walked, their clock its prefix sum plus
        `shift` and the stalls so far (`delay`): the stalls after them."""
        fig, order, pre = self.fig, self.order, self.pre
        for k in places:
            nm = order[k]
            kind, work, dur, grp, coll = fig[nm]
            t = pre[k] + shift + delay
            if kind == COLLECTIVE:
                t += work
                f = free[grp]
                free[grp] = ends[nm] = (t if t > f else f) + dur
            else:
                ce = ends[coll]
                if ce > t:
                    delay += ce - t
        return delay

    def _spliced(self, at: dict[str, list[str]], new: list[Bucket], gone: list[Bucket]) -> Edit:
        """The current order with each node of `at` replaced by its list (an empty one drops it), by slices."""
        order, pos = self.order, self.pos
        places = sorted((pos[nm], nms) for nm, nms in at.items())
        out: list[str] = []
        prev = 0
        for k, nms in places:
            out += order[prev:k]
            out += nms
            prev = k + 1
        out += order[prev:]
        return Edit(out, new, gone, places[0][0], len(order) - places[-1][0] - 1)

    # -- moves ---------------------------------------------------------------
    def split(self, u: _Unit, parts: Sequence[tuple[str, ...]]) -> Edit | None:
        """`u` (a bucket) split into `parts` (a part of one is a collective alone), at u's four places (None
        where the members' waits depend on each other across parts so that those places would not do)."""
        if not self._split_fits(parts) or not self._split_in_sequence(parts):
            return None
        new = [Bucket(p) for p in parts if len(p) >= 2]
        made = {p: self._nodes(Bucket(p)) if len(p) >= 2 else None for p in parts}
        at: dict[str, list[str]] = {u.copy_in: [], u.coll: [], u.wait: [], u.copy_out: []}  # type: ignore[dict-item]
        for p, nodes in made.items():
            if nodes is None:
                m = p[0]
                at[u.coll].append(m)
                at[u.wait].append(self.g.names[self.g.waits_of[self.g.index[m]][0]])
            else:
                at[u.copy_in].append(nodes[0].name)  # type: ignore[index]
                at[u.coll].append(nodes[1].name)
                at[u.wait].append(nodes[2].name)
                at[u.copy_out].append(nodes[3].name)  # type: ignore[index]
        return self._spliced(at, new, [Bucket(u.members)])

    def _split_fits(self, parts: Sequence[tuple[str, ...]]) -> bool:
        """Whether the parts' waits, placed in part order at the bucket's wait (their copy-outs after them all),
        follow everything they depend on: a dependency of a member's wait on another part's member or wait
        comes from that part's copy-out when it is a bucket (after every wait: backwards), and from the node
        itself when it is alone (its collective comes earlier; its wait must be of an earlier part)."""
        g = self.g
        part_of: dict[str, int] = {}
        for i, p in enumerate(parts):
            for m in p:
                part_of[m] = i
                part_of[g.names[g.waits_of[g.index[m]][0]]] = i
        for j, p in enumerate(parts):
            for m in p:
                for q in g.preds[g.waits_of[g.index[m]][0]]:
                    i = part_of.get(g.names[q], j)
                    if i == j:
                        continue
                    if len(parts[i]) >= 2 or (g.kind[q] == WAIT and i > j):
                        return False
        return True

    def _split_in_sequence(self, parts: Sequence[tuple[str, ...]]) -> bool:
        """Where a level keeps collective sequences: no other collective of a part's sequence lies, in input
        order, between the bucket's first member and the part's (each part takes its first member's place in
        the sequence, MODEL.md "Buckets", while the edit puts every part at the bucket's place). A cheap filter:
        the plan search's `confirm` is exact."""
        if self.sequences is None:
            return True
        g = self.g
        idx = sorted(g.index[m] for p in parts for m in p)
        seq = self.sequences[self.seq_of[idx[0]]]
        lo = idx[0]
        for p in parts[1:]:
            hi = min(g.index[m] for m in p)
            between = bisect.bisect_left(seq, hi) - bisect.bisect_right(seq, lo)
            if between > sum(1 for i in idx if lo < i < hi):
                return False
        return True

    def merge(self, a: _Unit, b: _Unit, pos: Mapping[str, int],
              early: bool = False) -> Edit | None:
        """`a` and `b` merged (None where the edit would not be a valid order, or the bucket is illegal): the
        merged copy-in and collective at the later collective's place, or at the earlier one's (`early`: where
        torch's bucketer puts a bucket, and where a group's sequence has it unless its inputs come later)."""
        g = self.g
        members = tuple(sorted(a.members + b.members, key=g.index.__getitem__))
        merged = Bucket(members)
        if bucket_problems(g, [merged]):
            return None
        late, first = (a, b) if pos[a.coll] > pos[b.coll] else (b, a)  # by collective position
        first_wait = a if pos[a.wait] < pos[b.wait] else b
        at = first if early else late
        c_pos, w_pos = pos[at.coll], pos[first_wait.wait]
        if c_pos >= w_pos or not self._merge_fits(first, late, first_wait, a if first_wait is b else b, merged,
                                                  c_pos, w_pos, early, pos):
            return None
        nodes = self._nodes(merged)
        at_: dict[str, list[str]] = {x: [] for u in (a, b) for x in (u.copy_in, u.coll, u.wait, u.copy_out)
                                     if x is not None}
        at_[at.coll] = [nodes[0].name, nodes[1].name]
        at_[first_wait.wait] = [nodes[2].name, nodes[3].name]
        gone = [Bucket(u.members) for u in (a, b) if u.copy_in is not None]
        return self._spliced(at_, [merged], gone)

    def _merge_fits(self, first: _Unit, late: _Unit, first_wait: _Unit, later_wait: _Unit, merged: Bucket,
                    c_pos: int, w_pos: int, early: bool, pos: Mapping[str, int]) -> bool:
        """No dependency points backwards after the merge: placed late, what the earlier collective's members
        feed (other than their waits) comes after the merged collective's place; placed early, what the later
        collective's members depend on comes before it; and what the later-waited members' waits depend on comes
        before the merged wait's place. Positions of other buckets' nodes are taken at their latest (sources) or
        earliest (targets) node, which only makes the check stricter."""
        g = self.g
        mine = set(merged.members) | {g.names[g.waits_of[g.index[m]][0]] for m in merged.members}
        if early:
            for m in late.members:
                for p in g.preds[g.index[m]]:
                    nm = g.names[p]
                    if nm not in mine and self._last(nm, pos) >= c_pos:
                        return False
        else:
            for m in first.members:
                for s in g.succs[g.index[m]]:
                    nm = g.names[s]
                    if nm not in mine and self._first(nm, pos) <= c_pos:
                        return False
        for m in later_wait.members:
            w = g.waits_of[g.index[m]][0]
            for p in g.preds[w]:
                nm = g.names[p]
                if nm not in mine and self._last(nm, pos) >= w_pos:
                    return False
        return True

    def _first(self, nm: str, pos: Mapping[str, int]) -> int:
        """Where a dependency into `nm` (a node of the unbucketed graph) now ends: a bucket member's copy-in, a
        member's wait's bucket wait, or the node itself."""
        u = self._unit_holding(nm)
        if u is None or u.copy_in is None:
            return pos[nm]
        return pos[u.copy_in] if nm in u.members else pos[u.wait]

    def _last(self, nm: str, pos: Mapping[str, int]) -> int:
        """Where a dependency out of `nm` now starts, at the latest: a bucket member's (or its wait's) copy-out
        (an edge leaves its collective, a buffer its copy-out), or the node itself."""
        u = self._unit_holding(nm)
        if u is None or u.copy_out is None:
            return pos[nm]
        return pos[u.copy_out]

    def _unit_holding(self, nm: str) -> _Unit | None:
        u = self.unit_of.get(nm)
        if u is not None:
            return u
        i = self.g.index[nm]
        if self.g.kind[i] == WAIT:
            u = self.unit_of.get(self.g.names[self.g.coll_of[i]])
        return u

    def shift(self, a: _Unit, b: _Unit, last: bool) -> Edit | None:
        """One member moved between neighbouring units of one key: a's last member into b (`last`), or b's first
        into a; a split, then a merge on the edited order (None where the merge is not made)."""
        src, dst = (a, b) if last else (b, a)
        if len(src.members) < 2:
            return None
        moved = src.members[-1] if last else src.members[0]
        rest = tuple(m for m in src.members if m != moved)
        first = self.split(src, [rest, (moved,)] if last else [(moved,), rest])
        if first is None:
            return None
        tmp = self.copy()  # the split made, its places read through this layout's (no O(n) index of its own)
        tmp._regroup(first.new, first.gone)
        tmp.order, tmp.pos = first.order, EditPlaces(self.pos, first.order, first.lo, first.tail, len(self.order))
        second = tmp.merge(tmp.unit_of[moved], tmp.unit_of[dst.members[0]], tmp.pos)
        if second is None:
            return None
        new = [x for x in first.new if x not in second.gone] + second.new
        gone = first.gone + [x for x in second.gone if x not in first.new]
        return Edit(second.order, new, gone, min(first.lo, second.lo), min(first.tail, second.tail))

    def copy(self) -> _Layout:
        """A layout to edit without touching this one (the figures are shared: they only grow)."""
        c = object.__new__(_Layout)
        c.__dict__.update(self.__dict__)
        c.buckets, c.unit_of = dict(self.buckets), dict(self.unit_of)
        return c

    def accept(self, e: Edit) -> None:
        self._regroup(e.new, e.gone)
        self._index(e.order)

    def _regroup(self, new: list[Bucket], gone: list[Bucket]) -> None:
        for b in gone:
            self.buckets.pop(b, None)
            for m in b.members:
                self.unit_of[m] = self._alone(m)
        for b in new:
            self._add(b)


Confirm = Callable[[tuple[Bucket, ...], list[str]], bool]  # is this plan (buckets, order by name) valid?
CONFIRM_MOVES = 50  # a confirmation counts as this many moves tried (it builds the bucketed graph once)
MEMORY_MOVES = 4  # a check of the budget in the layout, and the accept after it, as this many (1-4 and 2-11 ms)


@dataclass
class MovesResult:
    buckets: tuple[Bucket, ...]
    order: list[str]
    makespan: float
    tried: int
    accepted: int
    first_s: float | None  # when a move was first kept (seconds after the start)
    refused: int = 0  # moves that shortened the walk but were above the budget, or `confirm` found invalid


def order_preserving_search(g: Graph, price: Pricing, buckets: Sequence[Bucket], order: Sequence[str],
                            max_moves: int, late: Callable[[], bool] = lambda: False,
                            confirm: Confirm | None = None, sequences: list[list[int]] | None = None,
                            budget: int | None = None, early: bool | None = None) -> MovesResult:
    """A hill climb over bucket moves that keep the order (module docstring), from `buckets` and `order` (a
    valid order of their bucketed graph, by name): at most `max_moves` moves tried (`late()`: the clock's stop,
    in timed mode; a confirmation counts `CONFIRM_MOVES`), in the order `_moves` gives them; the first that
    shortens the walk, and that `confirm` accepts (None: level free, no budget), is kept. `sequences`: the
    collective sequences the level keeps (`Graph.group_colls`, or `[coll_seq]`), to leave out early the splits
    they forbid. `budget`: a move above it is refused before `confirm` by the peak of its plan, computed in the
    layout (`MoveMemory`, exact; a check counts `MEMORY_MOVES`), so that `confirm` need not check the budget
    (`plan_checks.move_checks`). `early`: merges at the earlier collective's place too (`_moves`; None: only where
    `sequences` are kept); the plan search asks for them under a budget (decision 124)."""
    t0 = time.monotonic()
    first: float | None = None
    lay = _Layout(g, price, buckets, order, sequences)
    memory = MoveMemory(g, price, buckets, order) if budget is not None else None
    best, stall = lay.walk(lay.order)
    tried = accepted = refused = 0
    improved = True
    while improved and tried < max_moves and not late():
        improved = False
        for move in _moves(lay, stall, lay.pos, early):
            if tried >= max_moves or late():
                break
            edit = move()
            if edit is None:
                continue
            tried += 1
            if lay.walk_edit(edit) < best - 1e-9 * max(1.0, best):
                ms, st = lay.walk(edit.order)  # exact, and the stalls that order the next moves
                if ms >= best - 1e-9 * max(1.0, best):
                    continue
                if memory is not None:
                    tried += MEMORY_MOVES
                    if memory.peak(*edit) > budget:  # type: ignore[operator]
                        refused += 1
                        continue
                if confirm is not None:
                    tried += CONFIRM_MOVES
                    kept = (set(lay.buckets) - set(edit.gone)) | set(edit.new)
                    if not confirm(tuple(sorted(kept, key=lambda b: g.index[b.members[0]])), edit.order):
                        refused += 1
                        continue
                lay.accept(edit)
                if memory is not None:
                    memory.accept(*edit)
                best, stall, improved = ms, st, True
                accepted += 1
                first = time.monotonic() - t0 if first is None else first
                break
    bs = tuple(sorted(lay.buckets, key=lambda b: g.index[b.members[0]]))
    return MovesResult(bs, lay.order, best, tried, accepted, first, refused)


def _moves(lay: _Layout, stall: dict[str, float], pos: Mapping[str, int],
           early: bool | None = None) -> list[Callable[[], tuple | None]]:
    """The moves from the current layout, most promising first, each built only when tried: halve the buckets
    whose wait stalls (most stalled first); merge neighbouring units of one key (by collective position),
    pairs where neither stalls first, at the later collective's place, then all again at the earlier one's
    (`early`; by default only where the level keeps collective sequences, which need that place: at free on a
    16k-node FSDP step they merged into a few huge buckets, -4.0 % in 10 s against -7.9 % without them); drop a
    bucket; move one member across the boundary of two neighbours; split a bucket at any other point."""
    g = lay.g
    units = list({id(u): u for u in lay.unit_of.values()}.values())
    buckets = [u for u in units if u.copy_in is not None]
    out: list[Callable[[], tuple | None]] = []
    for u in sorted(buckets, key=lambda u: -stall.get(u.coll, 0.0)):
        if stall.get(u.coll, 0.0) <= 0.0:
            break
        half = len(u.members) // 2
        out.append(lambda u=u, half=half: lay.split(u, [u.members[:half], u.members[half:]]))
    by_key: dict[tuple, list[_Unit]] = {}
    for u in sorted(units, key=lambda u: pos[u.coll]):
        by_key.setdefault(bucket_key(g.node(u.members[0])), []).append(u)
    pairs = [(a, b) for us in by_key.values() for a, b in zip(us, us[1:])]
    pairs.sort(key=lambda ab: (stall.get(ab[0].coll, 0.0) > 0.0) + (stall.get(ab[1].coll, 0.0) > 0.0))
    out += [lambda a=a, b=b: lay.merge(a, b, pos) for a, b in pairs]
    if early if early is not None else lay.sequences is not None:
        out += [lambda a=a, b=b: lay.merge(a, b, pos, early=True) for a, b in pairs]
    out += [lambda u=u: lay.split(u, [(m,) for m in u.members]) for u in buckets]
    # a bucket's boundary moved by one member, then splits at every other point
    out += [lambda a=a, b=b, last=last: lay.shift(a, b, last) for a, b in pairs for last in (True, False)]
    for u in buckets:
        half = len(u.members) // 2
        out += [lambda u=u, k=k: lay.split(u, [u.members[:k], u.members[k:]])
                for k in range(1, len(u.members)) if k != half]
    return out


__all__ = ["Edit", "MovesResult", "order_preserving_search"]
