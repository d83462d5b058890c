"""Large-neighbourhood search over windows of the current best order.

A window of consecutive positions is re-ordered by a small CP-SAT model whose
entry state (compute clock, each group's stream, collectives in flight) is
fixed by the prefix. Its exit state may not get worse: the compute clock,
every group's stream and the end of every collective still in flight are
bounded by their current values. The simulator is monotone in these, so the
suffix can only finish earlier; and since the window's node set is unchanged,
memory outside it is unchanged too. Every accepted order is re-simulated and
validated.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from ortools.sat.python import cp_model

from overlapsat.graph import COLLECTIVE, COMPUTE, WAIT, Graph
from overlapsat.simulate import simulate
from overlapsat.solver.model import UnitWalk, unit_walk
from overlapsat.validate import validate

log = logging.getLogger(__name__)


def solve_window(g: Graph, order: list[int], i: int, j: int, *, scale: float, budget: int | None,
                 collective_order: str, max_time: float, deterministic: bool, workers: int) -> tuple[list[int] | None, float]:
    """Best re-ordering of order[i:j] under fixed boundaries, or None; and deterministic time used."""
    us = unit_walk(g, order, scale)
    win = order[i:j]
    inwin = set(win)
    pos = {v: k for k, v in enumerate(order)}
    t0 = us.clock_before[i]
    free0 = us.free_before[i]
    t_exit = us.clock_before[j] if j < len(order) else max(us.slot_end[v] for v in win)
    H = t_exit  # nothing in the window may end later than today's exit clock
    m = cp_model.CpModel()
    issue, slot_end, slots = {}, {}, []
    comm_start, comm_len, wait_end = {}, {}, {}
    for v in win:
        k = g.kind[v]
        t = m.new_int_var(t0, H, f"i{v}")
        issue[v] = t
        if k == WAIT:
            e = m.new_int_var(t0, H, f"we{v}")
            sz = m.new_int_var(1, H - t0 + 1, f"ws{v}")
            slots.append(m.new_interval_var(t, sz, e, f"s{v}"))
            wait_end[v] = (e, sz)
            slot_end[v] = e
        else:
            L = max(1, math.ceil(g.dur[v] * scale - 1e-9)) if k == COMPUTE else 1
            slots.append(m.new_fixed_size_interval_var(t, L, f"s{v}"))
            slot_end[v] = t + L
            if k == COLLECTIVE:
                comm_len[v] = math.ceil(g.dur[v] * scale - 1e-9)
                comm_start[v] = m.new_int_var(t0, 10 * H + 10, f"cs{v}")
                m.add(comm_start[v] >= t)
                m.add(comm_start[v] >= free0[g.group_id[v]])
    m.add_no_overlap(slots)
    for v in win:
        for u in g.preds[v]:
            if u in inwin:
                m.add(issue[v] >= slot_end[u])
        if g.kind[v] == WAIT:
            c = g.coll_of[v]
            e = wait_end[v][0]
            if c in inwin:
                m.add(e >= comm_start[c] + comm_len[c])
            else:
                m.add(e >= us.comm_end[c])
        m.add(slot_end[v] <= t_exit)
    seqs = [g.coll_seq] if collective_order == "global" else g.group_colls
    for seq in seqs:
        cs = [c for c in seq if c in inwin]
        for a, b in zip(cs, cs[1:]):
            m.add(issue[b] >= issue[a] + 1)
            if g.group_id[a] == g.group_id[b]:
                m.add(comm_start[b] >= comm_start[a] + comm_len[a])
    # exit state no worse: streams and collectives still in flight
    for c in comm_start:
        w = g.wait_of[c]
        if w < 0 or w not in inwin:
            m.add(comm_start[c] + comm_len[c] <= us.comm_end[c])
    for cs in g.group_colls:
        in_c = [c for c in cs if c in inwin]
        if in_c:  # the group's stream is free no later than today at the exit
            m.add(comm_start[in_c[-1]] + comm_len[in_c[-1]] <= us.comm_end[in_c[-1]])
    exit_clock = m.new_int_var(t0, H, "exit")
    m.add_max_equality(exit_clock, [slot_end[v] for v in win])
    mem_hints = _window_memory(g, m, order, i, j, t0, issue, H, budget, us) if budget is not None else []
    m.minimize(exit_clock)
    # complete hint: the current order
    for v in win:
        m.add_hint(issue[v], us.issue[v])
        if v in wait_end:
            m.add_hint(wait_end[v][0], us.slot_end[v])
            m.add_hint(wait_end[v][1], us.slot_end[v] - us.issue[v])
        if v in comm_start:
            m.add_hint(comm_start[v], us.comm_start[v])
    m.add_hint(exit_clock, max(us.slot_end[v] for v in win))
    for var, val in mem_hints:
        m.add_hint(var, val)
    s = cp_model.CpSolver()
    p = s.parameters
    p.max_time_in_seconds = max_time
    if deterministic:
        # windows are small: one worker is deterministic by itself and faster than interleaved search
        p.num_workers = 1
        p.max_deterministic_time = max_time
    else:
        p.num_workers = workers
    st = s.solve(m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, s.deterministic_time
    vals = {v: s.value(issue[v]) for v in win}
    new_win = sorted(win, key=lambda v: (vals[v], pos[v]))
    if new_win == win or s.objective_value >= max(us.slot_end[v] for v in win):
        return None, s.deterministic_time
    return order[:i] + new_win + order[j:], s.deterministic_time


def _window_memory(g: Graph, m: cp_model.CpModel, order: list[int], i: int, j: int, t0: int,
                   issue: dict[int, cp_model.IntVar], H: int, budget: int, us: UnitWalk) -> list[tuple]:
    """Cumulative over the window (buffers entering, leaving or living inside it); returns hints."""
    pos = {v: k for k, v in enumerate(order)}
    hints: list[tuple] = []
    base = 0
    ivs, dem = [], []
    for b in range(len(g.buffers)):
        p = g.b_prod[b]
        if p < 0 and not g.b_fin[b]:
            continue
        size = max(g.b_alloc[b], g.b_free[b]) if p >= 0 else g.b_free[b]
        if size == 0:
            continue
        pp = pos[p] if p >= 0 else -1
        cons = g.b_cons[b]
        # a freeable input nobody reads lives at step 0 only (docs/decisions.md, 4)
        last = len(order) if g.b_out[b] else max((pos[c] for c in cons), default=max(pp, 0))
        if pp >= j or last < i:
            continue  # not alive inside the window
        if pp < i and last >= j:
            base += size
            continue
        start = issue[p] if i <= pp < j else t0
        start_val = us.issue[p] if i <= pp < j else t0
        if last >= j:
            end: cp_model.LinearExprT = H + 1
            end_val = H + 1
        elif p < 0 and not cons:  # the unread freeable input: until the window's first node
            lu = m.new_int_var(t0, H, f"first{b}")
            m.add_min_equality(lu, [issue[v] for v in order[i:j]])
            lu_val = min(us.issue[v] for v in order[i:j])
            hints.append((lu, lu_val))
            end, end_val = lu + 1, lu_val + 1
        else:
            wc = [c for c in cons if i <= pos[c] < j] or [p]
            lu = m.new_int_var(t0, H, f"lu{b}")
            m.add_max_equality(lu, [issue[c] for c in wc])
            lu_val = max(us.issue[c] for c in wc)
            hints.append((lu, lu_val))
            end, end_val = lu + 1, lu_val + 1
        sz = m.new_int_var(0, H + 2 - t0, f"sz{b}")
        hints.append((sz, end_val - start_val))
        ivs.append(m.new_interval_var(start, sz, end, f"buf{b}"))
        dem.append(size)
    m.add_cumulative(ivs, dem, max(0, budget - base))
    return hints


def lns(g: Graph, order: list[int], *, scale: float, budget: int | None, collective_order: str, deadline: float,
        deterministic: bool, workers: int, window: int = 80, max_window: int = 640, det_budget: float | None = None,
        window_time: float = 1.0, target: float | None = None,
        on_improve: Callable[[list[int], float], bool | None] | None = None) -> tuple[list[int], dict[str, float]]:
    """Improve `order` window by window until the deadline (or deterministic budget).

    Sweeps visit windows around the largest stalls first; a sweep that does not
    lower the makespan doubles the window, up to `max_window`. It stops early
    once the makespan reaches `target` (a lower bound).
    """
    best = list(order)
    best_ms = simulate(g, best).makespan
    n = len(best)
    stats: dict[str, float] = {"windows": 0, "accepted": 0, "improvements": 0, "det_time": 0.0, "sweeps": 0,
                               "stopped_by_wall_clock": 0}
    while window <= max(max_window, 1):
        start_ms = best_ms
        sim = simulate(g, best)
        step = max(1, window // 2)
        starts = sorted(range(0, max(1, n - step), step), key=lambda i: -sum(sim.stall[v] for v in best[i:i + window]))
        for i in starts:
            if target is not None and best_ms <= target + 1e-6:
                return best, stats
            if det_budget is not None and stats["det_time"] >= det_budget:
                return best, stats
            if time.monotonic() > deadline:
                stats["stopped_by_wall_clock"] = 1
                return best, stats
            j = min(n, i + window)
            per = min(window_time, max(0.05, deadline - time.monotonic()))
            cand, dt = solve_window(g, best, i, j, scale=scale, budget=budget, collective_order=collective_order,
                                    max_time=per, deterministic=deterministic, workers=workers)
            stats["windows"] += 1
            stats["det_time"] += dt
            if cand is None:
                continue
            ms = simulate(g, cand).makespan
            if ms <= best_ms + 1e-9 and not validate(g, cand, budget, collective_order=collective_order, limit=1):
                stats["accepted"] += 1
                improved = ms < best_ms - 1e-9
                best, best_ms = cand, ms
                if improved:
                    stats["improvements"] += 1
                    if on_improve is not None and on_improve(cand, ms):
                        stats["stopped_by_rule"] = 1
                        return best, stats
        stats["sweeps"] += 1
        if best_ms >= start_ms - 1e-9:
            window *= 2
    return best, stats
