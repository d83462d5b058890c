"""Re-place an order's collectives and waits around its kernels, within a memory budget (our pass, not Inductor's).

Under a budget the portfolio's fastest orders (Inductor's raise and sink passes) can peak far above it: on a
backward graph `sink_waits` holds every reduce-scatter's full gradient until the end of the step, which no local
fit repairs. torch's newer scheduler avoids that by hiding each collective under a memory limit as it goes. This
pass does the same on an order that fits: it keeps the order's kernels where they are and walks its collectives in
their own sequence (so no group's issue order changes), and for each:

- issues it in the latest gap between kernels from which its transfer, queued behind the collectives before it
  on its stream, still ends before its wait's first reader starts (`just_in_time`), or in the earliest gap its
  inputs allow (`as_early`); if it cannot end in time either way, as soon as its stream is free;
- moves each of its waits to the first gap at which the transfer has ended, or just before its first reader.

A move that would raise the memory at any kernel above the budget is shortened until it does not: the memory at
each kernel is kept exact under single-node moves (MODEL.md's rule, kernels' steps; the steps of collectives and
waits are left to the caller, which judges every pass's order in full). Time is read from the kernels' prefix sum,
without stalls. Deterministic and linear in the graph per collective.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from overlapsat.graph import COLLECTIVE, COMPUTE, Graph
from overlapsat.heuristics.base import PassResult

MODES = ("just_in_time", "as_early")


class _Curve:
    """Live bytes at each kernel's step of an order whose kernels stay put; collectives and waits sit in the gaps
    between kernels (gap s: before kernel s). A node's point is 2s for gap s and 2i + 1 for kernel i."""

    def __init__(self, g: Graph, pt: np.ndarray, n_kernels: int) -> None:
        self.g, self.pt, self.n = g, pt, n_kernels
        self.m = np.zeros(n_kernels + 1, dtype=np.int64)  # one spare slot: index n is past the last kernel
        self.span: dict[int, tuple[int, int]] = {}
        # inputs nobody reads are released at step 0: counted at kernel 0 only when no event comes first
        self.unread = sum(g.b_free[j] for j in range(len(g.b_prod))
                          if g.b_prod[j] < 0 and g.b_fin[j] and not g.b_cons[j] and not g.b_out[j])
        self.first = int(np.count_nonzero(pt[[v for v in range(len(g.kind)) if g.kind[v] != COMPUTE]] == 0))
        self.m[0] += self.unread if not self.first else 0
        diff = np.zeros(n_kernels + 2, dtype=np.int64)
        for j in range(len(g.b_prod)):
            if (g.b_prod[j] >= 0 or g.b_fin[j]) and (g.b_prod[j] >= 0 or g.b_cons[j] or g.b_out[j]):
                self.span[j] = (ia, i_f) = self._span(j)
                diff[ia] += self._size(j)
                if not g.b_out[j]:
                    diff[i_f] -= g.b_free[j]
        self.m += np.cumsum(diff)[:n_kernels + 1]

    def _span(self, j: int) -> tuple[int, int]:
        """(first kernel index the buffer is counted at, first kernel index it is released before)."""
        g, pt = self.g, self.pt
        a = int(pt[g.b_prod[j]]) if g.b_prod[j] >= 0 else -1
        if g.b_out[j]:
            return (a // 2 if a >= 0 else 0), self.n
        cons = g.b_cons[j]
        f = max(int(pt[c]) for c in cons) if cons else max(a, 0)
        return (a // 2 if a >= 0 else 0), min(self.n, (f - 1) // 2 + 1)

    def _size(self, j: int) -> int:  # what the buffer adds when made (an input: what it frees, as simulate counts)
        return self.g.b_alloc[j] if self.g.b_prod[j] >= 0 else self.g.b_free[j]

    def _add(self, sp: tuple[int, int], j: int, sign: int) -> None:
        ia, i_f = sp
        self.m[ia:] += sign * self._size(j)
        if not self.g.b_out[j]:
            self.m[i_f:] -= sign * self.g.b_free[j]

    def touched(self, v: int) -> list[int]:
        g = self.g
        return [j for j in (*g.produces[v], *g.consumes[v]) if j in self.span]

    def rises(self, v: int, new_pt: int) -> np.ndarray:
        """How many bytes each kernel index gains if `v` moves to `new_pt` (the rises only)."""
        old = int(self.pt[v])
        self.pt[v] = new_pt
        up = np.zeros(self.n + 1, dtype=np.int64)
        for j in self.touched(v):
            (a0, f0), (a1, f1) = self.span[j], self._span(j)
            if a1 < a0:
                up[a1:a0] += self._size(j)
            if f1 > f0 and not self.g.b_out[j]:
                up[f0:f1] += self.g.b_free[j]
        self.pt[v] = old
        if self.first and not self._first_after(v, new_pt):  # kernel 0 becomes step 0
            up[0] += self.unread
        return up[:self.n]

    def _first_after(self, v: int, new_pt: int) -> int:
        """How many events sit before kernel 0 once `v` moves to `new_pt`."""
        return self.first + (new_pt == 0) - (int(self.pt[v]) == 0)

    def move(self, v: int, new_pt: int) -> None:
        before, self.first = self.first, self._first_after(v, new_pt)
        if bool(before) != bool(self.first):
            self.m[0] += self.unread if not self.first else -self.unread
        spans = self.touched(v)
        for j in spans:
            self._add(self.span[j], j, -1)
        self.pt[v] = new_pt
        for j in spans:
            self.span[j] = sp = self._span(j)
            self._add(sp, j, +1)


def prefetch_within_budget(g: Graph, order: Sequence[int], budget: int, collective_order: str = "group",
                           mode: str = "just_in_time") -> PassResult:
    """`order` (ids of `g`, valid under the level) with its collectives and waits re-placed as the module says.

    The kernels keep their order and every dependency is kept; so are the collectives' issue order over all
    groups and, at `chain`, each wait before the next collective. Atomic groups that hold a collective or a
    wait are left as they are: the order is returned unchanged."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    ids = list(order)
    kernels = [v for v in ids if g.kind[v] == COMPUTE]
    n = len(kernels)
    if any(g.atomic_of[v] >= 0 and g.kind[v] != COMPUTE for v in ids):
        return PassResult(f"prefetch_{mode}", ids, {"moved": 0, "skipped": "an atomic group holds a collective"},
                          graph=g)
    pt = np.zeros(len(g.kind), dtype=np.int64)
    events: list[int] = []
    k = 0
    for v in ids:
        if g.kind[v] == COMPUTE:
            pt[v] = 2 * k + 1
            k += 1
        else:
            pt[v] = 2 * k
            events.append(v)
    # a gap between two kernels of one atomic group takes no event
    locked = [False] + [g.atomic_of[a] >= 0 and g.atomic_of[a] == g.atomic_of[b]
                        for a, b in zip(kernels, kernels[1:])] + [False]
    clock = np.zeros(n + 1)
    np.cumsum(np.asarray(g.work, dtype=np.float64)[kernels], out=clock[1:])  # before kernel s (gap s)
    curve = _Curve(g, pt, n)
    seq = {v: k for k, v in enumerate(events)}  # order within a gap: the events' own, kept
    colls = [v for v in events if g.kind[v] == COLLECTIVE]
    before = dict(zip(colls[1:], colls))  # each collective -> the one issued before it
    after: dict[int, int] = {}  # each event -> the next collective after it (-1: none)
    nxt = -1
    for v in reversed(events):
        after[v] = nxt
        nxt = v if g.kind[v] == COLLECTIVE else nxt
    # the latest gap each event may take whatever the walk does: before its kernel successors, and before the
    # latest gap of each event successor (placed after it); at `chain`, a wait before the next collective; a
    # collective also before every collective issued after it (the issue order is the walk's)
    hi: dict[int, int] = {}
    bound = n
    for v in reversed(events):
        h = min([int(pt[u]) // 2 if g.kind[u] == COMPUTE else hi[u] for u in g.succs[v]] + [n])
        if collective_order == "chain" and g.kind[v] != COLLECTIVE and after[v] >= 0:
            h = min(h, hi[after[v]])
        if g.kind[v] == COLLECTIVE:
            bound = h = min(h, bound)
        hi[v] = h
    free = [0.0] * len(g.groups)
    last_coll = 0  # the previous collective's gap
    ends: dict[int, float] = {}
    moved = 0

    def fit(v: int, target: int, lo: int, hi: int) -> int:
        """The gap nearest `target`, on the way back to `v`'s own, whose move keeps every kernel within the budget,
        in [lo, hi] and splitting no atomic group."""
        here = int(pt[v]) // 2
        target = min(max(target, lo), hi)
        if target != here:
            up = curve.rises(v, 2 * target)
            over = np.flatnonzero((up > 0) & (curve.m[:n] + up > budget))
            if len(over):
                target = max(int(over[-1]) + 1, target) if target < here else min(int(over[0]), target)
        s = min(max(target, lo), hi)
        if locked[s]:  # the nearest open gap in [lo, hi], first on the way back to its own (no new rise there)
            step = 1 if s < here else -1
            t = s
            while lo <= t <= hi and locked[t] and t != here:
                t += step
            if not (lo <= t <= hi) or locked[t]:
                open_ = [u for u in range(lo, hi + 1) if not locked[u]]
                t = min(open_, key=lambda u: (abs(u - s), u)) if open_ else here
            s = t
        return s

    for v in events:  # in the walk's sequence (a topological one): each is placed once
        lo = max([(int(pt[u]) + 1) // 2 for u in g.preds[v]] + [0])
        # where the events after it still are (so none has to move for it), unless the walk has passed them
        near = min([int(pt[u]) // 2 for u in g.succs[v] if g.kind[u] != COMPUTE]
                   + ([int(pt[after[v]]) // 2] if after[v] >= 0 and (g.kind[v] == COLLECTIVE or collective_order ==
                                                                     "chain") else []) + [n])
        if g.kind[v] == COLLECTIVE:
            grp = g.group_id[v]
            lo = max(lo, last_coll)
            if collective_order == "chain" and v in before:  # each wait of the previous collective comes first
                lo = max([lo] + [int(pt[w]) // 2 for w in g.waits_of[before[v]]])
        top = min(hi[v], near) if near >= lo else hi[v]
        if g.kind[v] == COLLECTIVE:
            readers = [u for w in g.waits_of[v] for u in g.succs[w]]
            due = clock[min([int(pt[u]) // 2 if g.kind[u] == COMPUTE else hi[u] for u in readers] + [n])]
            launch, dur = g.launch[v], g.dur[v]
            if mode == "as_early":
                target = lo
            elif free[grp] + dur <= due:  # the latest gap from which it still ends in time
                target = int(np.searchsorted(clock, due - launch - dur, side="right")) - 1
            else:  # it ends late whatever: as soon as its stream is free
                target = int(np.searchsorted(clock, free[grp] - launch, side="right")) - 1
            s = fit(v, target, lo, top)
            last_coll = s
            ends[v] = free[grp] = max(clock[s] + launch, free[grp]) + dur
        else:  # a wait: the first gap at which its collective has ended, or before its first reader
            end = ends.get(g.coll_of[v], 0.0)
            s = fit(v, int(np.searchsorted(clock, end, side="left")), lo, top)
        if s != int(pt[v]) // 2:
            curve.move(v, 2 * s)
            moved += 1
    key = {v: (int(pt[v]) // 2, 1, 0) for v in kernels}
    key.update({v: (int(pt[v]) // 2, 0, seq[v]) for v in events})
    out = sorted(ids, key=key.__getitem__)
    return PassResult(f"prefetch_{mode}", out, {"moved": moved, "mode": mode}, graph=g)

