"""Issue a collective earlier: the kernels before its issue that do not lead to it move to just after it.

Where a process group's stream idles before a collective, its transfer waits for its issue, and the compute stream
runs kernels there that the collective does not need. Moving such a kernel (with whatever depends on it before the
issue) to just after the issue starts the transfer earlier and runs the kernel beside it. On backward graphs this
is the gradient of a weight computed before, not during, the all-reduce of its input's gradient, or a bucket's
copy-in put before the next collective it does not feed (decision 96).

A local search over the best order: sweeps over the collectives, those whose stream idled before them first (the
others gain only where a collective of their own group moves behind them: a prefetch), nearest kernel first; a move
is kept only where MODEL.md's makespan shrinks and the peak stays within the budget, and the caller validates what
it keeps. It ends when a sweep keeps nothing, after `PATIENCE` moves in a row kept nothing, or at its move limit.
Deterministic: its work is counted in moves evaluated.

A move never takes a collective behind one whose order the problem's level keeps (decision 114): under "group" one
of the same group, under "global" and "chain" any (c, or one it passes on the way). Such a move was kept before
on its makespan alone, and the caller's validation then threw the whole fill away, every valid move with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from overlapsat.graph import COLLECTIVE, WAIT, Graph
from overlapsat.simulate import makespan_of, peak_of, simulate

WINDOW = 60  # positions before a collective's issue whose kernels may move after it
NODE_VISITS_PER_SECOND = 6e6  # a move walks the order once (about 9e6 nodes a second on 2 cores, 2026-12-01)
EPS = 1e-6  # us: a move must shorten the makespan by more than this
PATIENCE = 1000  # moves tried in a row without one kept end the search: the work left goes to the next phase


@dataclass
class FillStats:
    """What the fill did: its sweeps, the moves it walked and kept, and the makespan before and after (us)."""

    sweeps: int = 0
    moves_tried: int = 0
    moves_kept: int = 0
    before_us: float = 0.0
    after_us: float = 0.0

    def export(self) -> dict[str, object]:
        return {"fill": asdict(self)}


def move_cost(g: Graph) -> float:
    """The work (reference seconds) one evaluated move costs on `g`: a walk of the order and its memory."""
    return max(1, len(g.nodes)) / NODE_VISITS_PER_SECOND


def issue_bound(g: Graph, order: Sequence[int]) -> set[int]:
    """The collectives whose group's stream was idle just before their transfer (it waited for their issue), from
    one walk of `order`: only their issue, or a collective of their group moved behind them, can gain."""
    sim = simulate(g, order)
    free = [0.0] * len(g.groups)
    out = set()
    for v in order:
        if g.kind[v] == COLLECTIVE:
            gid = g.group_id[v]
            if sim.start[v] > free[gid] + EPS:
                out.add(v)
            free[gid] = sim.end[v]
    return out


def _ancestors_within(g: Graph, c: int, pos: list[int], lo: int) -> set[int]:
    """The ancestors of `c` placed at `lo` or later: a path into `c` from there runs only through nodes placed
    between, so the search stays inside the window."""
    seen: set[int] = set()
    stack = [c]
    while stack:
        u = stack.pop()
        for p in g.preds[u]:
            if p not in seen and pos[p] >= lo:
                seen.add(p)
                stack.append(p)
    return seen


def fill(g: Graph, order: Sequence[int], budget: int | None, max_moves: int,
         stop: Callable[[], bool] | None = None, collective_order: str = "free") -> tuple[list[int], FillStats]:
    """`order` with kernels moved after collectives' issues (module docstring), at most `max_moves` moves
    evaluated; `stop()` ends it early (the caller's clock). Returns the order (no longer, within `budget`, valid
    under `collective_order` where `order` is) and the statistics."""
    kept = g.keeps_before(collective_order)  # the pairs the level keeps (decision 114)
    order = list(order)
    ms = makespan_of(g, order)
    st = FillStats(before_us=ms, after_us=ms)
    kind, work, preds = g.kind, g.work, g.preds
    improved, since_kept = True, 0

    def spent() -> bool:  # the move limit, the patience or the caller's clock
        return st.moves_tried >= max_moves or since_kept >= PATIENCE or (stop is not None and stop())

    while improved and not spent():
        improved = False
        st.sweeps += 1
        pos = [0] * len(g.nodes)
        for i, v in enumerate(order):
            pos[v] = i
        bound_by_issue = issue_bound(g, order)
        # first the collectives whose transfer waited for their issue, then the rest (only a collective of their
        # group moved behind them can gain there)
        colls = [v for v in order if kind[v] == COLLECTIVE]
        for c in [v for v in colls if v in bound_by_issue] + [v for v in colls if v not in bound_by_issue]:
            if spent():
                break
            pc = pos[c]
            lo = max(0, pc - WINDOW)
            anc = _ancestors_within(g, c, pos, lo)
            for j in range(pc - 1, lo - 1, -1):  # nearest first; a kept move leaves the positions before j as they were
                u = order[j]
                if u in anc or kind[u] == WAIT or (kind[u] != COLLECTIVE and work[u] <= 0):
                    continue
                moved = {u}
                for k in range(j + 1, pc):  # what depends on u before the issue moves with it
                    v = order[k]
                    if any(p in moved for p in preds[v]):
                        if v in anc:
                            break
                        moved.add(v)
                else:
                    if c not in bound_by_issue and not any(
                            kind[v] == COLLECTIVE and g.group_id[v] == g.group_id[c] for v in moved):
                        continue  # neither its issue nor its stream's order gains: not worth a walk
                    if kept is not None:  # the collectives the move passes, listed once per move
                        passed = [w for w in order[j + 1:pc + 1] if w not in moved and kind[w] == COLLECTIVE]
                        if any(kept(v, w) for v in moved if kind[v] == COLLECTIVE for w in passed):
                            continue  # a collective moved behind one the level keeps after it (c among them)
                    new = (order[:j] + [v for v in order[j + 1:pc + 1] if v not in moved]
                           + [v for v in order[j:pc] if v in moved] + order[pc + 1:])
                    st.moves_tried += 1
                    m = makespan_of(g, new)
                    if m < ms - EPS and (budget is None or peak_of(g, new) <= budget):
                        order, ms, improved = new, m, True
                        st.moves_kept += 1
                        since_kept = 0
                        for i in range(j, pc + 1):
                            pos[order[i]] = i
                        pc = pos[c]
                    else:
                        since_kept += 1
                    if spent():
                        break
    st.after_us = ms
    return order, st


__all__ = ["FillStats", "fill", "move_cost"]
