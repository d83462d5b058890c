"""The CP-SAT model of MODEL.md, for the whole graph or a window of an order.

Every node owns a slot on the compute stream: kernels for their duration,
collectives for their launch (one unit, their issue point, when free), waits
from their issue until their collective has finished and then their own time
(at least one unit; decisions.md 17). Slots never overlap, so
sorting slots by start gives the issue order. Transfers run on their group's
stream no earlier than their issue point, in issue order. Units and rounding
live in `units.py`; the formulation and why it is sound in docs/solver.md.

One `Model` serves both scopes, so they cannot drift apart:

- the whole graph: positions 0..n of a reference order, objective the makespan;
- a window: positions i..j of the current order, entry state (compute clock,
  group streams, transfers in flight) fixed by the prefix, exit state bounded
  by today's, objective the exit clock.

Every variable is created together with its value in the reference order, so
the warm start is complete by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from overlapsat.graph import COLLECTIVE, WAIT, Graph
from overlapsat.problem import Problem
from overlapsat.solver.units import TimeScale, UnitWalk, unit_walk

RELAX, RESTRICT = "relax", "restrict"  # how bytes round when counted coarser than one (memory_quantum)
MAX_ENERGY = 2**60  # demand x time of a cumulative, well inside 64-bit integers
BEFORE, AFTER = "before", "after"  # an event outside the scope, on either side


class CpModel(cp_model.CpModel):
    """CP-SAT's model without the CamelCase aliases ortools binds to each instance (`_add_pre_pep8_methods`):
    they make every model a reference cycle, so each LNS window's model waited for the cyclic collector, which
    overlapsat pauses during a search (`gc_pause.py`)."""

    def _add_pre_pep8_methods(self) -> None:
        pass


@dataclass(frozen=True)
class Scope:
    """Positions [start, stop) of the reference order that the model reorders."""

    start: int
    stop: int

    @classmethod
    def whole(cls, g: Graph) -> Scope:
        return cls(0, len(g.nodes))

    def is_whole(self, g: Graph) -> bool:
        return self.start == 0 and self.stop == len(g.nodes)


class Model:
    """Variables, one method per constraint family, and the objective."""

    def __init__(self, g: Graph, ts: TimeScale, ref: list[int], scope: Scope, horizon: int,
                 walk: UnitWalk | None = None, collective_order: str = "group") -> None:
        self.g, self.ts, self.ref, self.scope = g, ts, list(ref), scope
        self.collective_order = collective_order
        self.memory_rounding, self.memory_quantum = RESTRICT, 1  # bytes exact unless add_memory_budget says
        self.has_memory = False  # a memory cumulative (OR-Tools aborts interleaved search on some: optimize.py)
        self.joint = False  # priced as the whole model (cpsat.dt_scale)
        self.m = CpModel()
        self.walk: UnitWalk = walk if walk is not None else unit_walk(g, self.ref, ts)
        self.whole = scope.is_whole(g)
        self.nodes = self.ref[scope.start:scope.stop]
        self.in_scope = set(self.nodes)
        self.pos = self.walk.pos  # the walk is of `ref`
        self._check_atomic()
        w = self.walk
        self.t0 = 0 if self.whole else w.clock_before[scope.start]
        self.free0 = [0] * len(g.groups) if self.whole else w.free_before[scope.start]
        # nothing in a window may end later than today's exit clock
        self.horizon = horizon if self.whole else (
            w.clock_before[scope.stop] if scope.stop < len(self.ref) else max(w.slot_end[v] for v in self.nodes))
        self.end_time = self.horizon + 2  # after every event
        self.issue: dict[int, cp_model.IntVar] = {}
        self.slot_end: dict[int, cp_model.LinearExprT] = {}
        self.comm_start: dict[int, cp_model.IntVar] = {}
        self.comm_len: dict[int, int] = {}
        self.wait_end: dict[int, cp_model.IntVar] = {}
        self.slots: list[cp_model.IntervalVar] = []
        self.objective: cp_model.IntVar | None = None
        self._add_variables()

    # -- variables, each with its warm start -------------------------------
    def _var(self, lo: int, hi: int, hint: int, name: str) -> cp_model.IntVar:
        x = self.m.new_int_var(lo, hi, name)
        self.m.add_hint(x, hint)
        return x

    def _add_variables(self) -> None:
        g, ts, w, H = self.g, self.ts, self.walk, self.horizon
        for v in self.nodes:
            nm = g.names[v]
            t = self._var(self.t0, H, w.issue[v], f"issue[{nm}]")
            self.issue[v] = t
            if g.kind[v] == WAIT:
                e = self._var(self.t0, H, w.slot_end[v], f"wait_end[{nm}]")
                size = self._var(ts.slot(g, v), H, w.slot_end[v] - w.issue[v], f"wait_len[{nm}]")
                self.slots.append(self.m.new_interval_var(t, size, e, f"slot[{nm}]"))
                self.wait_end[v] = e
                self.slot_end[v] = e
            else:
                length = ts.slot(g, v)
                self.slots.append(self.m.new_fixed_size_interval_var(t, length, f"slot[{nm}]"))
                self.slot_end[v] = t + length
                if g.kind[v] == COLLECTIVE:
                    self.comm_len[v] = ts.transfer(g, v)
                    # in a window, a transfer whose wait lies beyond it may end after the exit clock
                    hi = H if self.whole else max(H, w.comm_end[v])
                    self.comm_start[v] = self._var(self.t0, hi, w.comm_start[v], f"comm_start[{nm}]")

    def _check_atomic(self) -> None:
        for grp in self.g.atomic:
            inside = sum(v in self.in_scope for v in grp)
            if 0 < inside < len(grp):
                raise ValueError(f"window {self.scope} splits atomic group {[self.g.names[v] for v in grp]}")

    # -- constraints, one family each --------------------------------------
    def add_compute_stream(self) -> None:
        """One sequential compute stream: the issue slots of every node."""
        self.m.add_no_overlap(self.slots)

    def add_dependencies(self) -> None:
        """u -> v inside the scope: v is issued after u's slot ends (outside: fixed by position)."""
        for v in self.nodes:
            for u in self.g.preds[v]:
                if u in self.in_scope:
                    self.m.add(self.issue[v] >= self.slot_end[u])

    def add_collective_streams(self) -> None:
        """A transfer starts after its issue and after the transfer of its group issued before it.

        Under a fixed group order that is the input order; under "free" the
        order of each pair is a literal tying issue order to stream order
        (the stream is FIFO by issue, MODEL.md, Time).
        """
        g, m, ts = self.g, self.m, self.ts
        for c, s in self.comm_start.items():
            m.add(s >= self.issue[c] + ts.work(g, c))  # after its launch
            m.add(s >= self.free0[g.group_id[c]])
        for cs in g.group_colls:
            inside = [c for c in cs if c in self.in_scope]
            if self.collective_order != "free":
                for a, b in zip(inside, inside[1:]):
                    m.add(self.comm_start[b] >= self.comm_start[a] + self.comm_len[a])
                continue
            inside.sort(key=lambda c: self.pos[c])
            for k, a in enumerate(inside):
                for b in inside[k + 1:]:
                    first = self.m.new_bool_var(f"issued_before[{g.names[a]},{g.names[b]}]")
                    self.m.add_hint(first, True)  # the reference issues a before b
                    m.add(self.issue[b] >= self.issue[a] + 1).only_enforce_if(first)
                    m.add(self.comm_start[b] >= self.comm_start[a] + self.comm_len[a]).only_enforce_if(first)
                    m.add(self.issue[a] >= self.issue[b] + 1).only_enforce_if(~first)
                    m.add(self.comm_start[a] >= self.comm_start[b] + self.comm_len[b]).only_enforce_if(~first)

    def add_collective_order(self) -> None:
        """The pairs the collective-order policy fixes (MODEL.md, validity 3; docs/solver.md)."""
        for a, b in self.g.order_pairs(self.collective_order):
            if a in self.in_scope and b in self.in_scope:
                self.m.add(self.issue[b] >= self.slot_end[a])

    def add_waits(self) -> None:
        """A wait's slot lasts until its collective's transfer has finished, and then its own time."""
        g = self.g
        for w, e in self.wait_end.items():
            c = g.coll_of[w]
            own = self.ts.work(g, w)
            if c in self.in_scope:
                self.m.add(e >= self.comm_start[c] + self.comm_len[c] + own)
            else:  # issued before the window: its end is fixed by the prefix
                self.m.add(e >= self.walk.comm_end[c] + own)

    def add_atomic_groups(self) -> None:
        """Members follow each other directly on the compute stream."""
        for grp in self.g.atomic:
            if grp and grp[0] in self.in_scope:
                for a, b in zip(grp, grp[1:]):
                    self.m.add(self.issue[b] == self.slot_end[a])

    def add_memory_budget(self, budget: int) -> None:
        """Exact peak memory <= budget (docs/solver.md, Memory).

        The live bytes at time t are sum_b A_b [alloc_b <= t] - F_b [free_b <= t],
        with alloc at the producer's issue and free one unit after the last
        consumer's issue, split into non-negative pieces (`live_pieces`); a
        cumulative over the pieces is exact at every issue point, and between
        them it sees post-free levels, which are never higher.
        """
        g = self.g
        const = 0
        ivs: list[cp_model.IntervalVar] = []
        dem: list[int] = []
        if self.whole:
            touched: list[int] = list(range(len(g.buffers)))
        else:  # a window: buffers no node inside touches are one constant, read off the reference order
            touched = self._touched_buffers()
            const = self._live_at_entry() - sum(self._before_entry(b) for b in touched)
        for b in touched:
            A, F = g.b_alloc[b], g.b_free[b]
            if g.b_prod[b] < 0:
                if not g.b_fin[b]:
                    continue  # parameters: a constant left out of the peak
                A = F  # a freeable input is counted with its free size from the start
            alloc, free = self._alloc_time(b), self._free_time(b)
            pieces, offset = live_pieces(A, F)
            const += offset
            for d, from_alloc, to_free in pieces:
                s, e = alloc if from_alloc else BEFORE, free if to_free else AFTER
                if s == AFTER or e == BEFORE:
                    continue
                if s == BEFORE and e == AFTER:
                    const += d
                    continue
                ivs.append(self._live_interval(s, e, f"live[{g.buffers[b].name}]"))
                dem.append(d)
        cap = budget - const
        if cap < 0:
            self.m.add_bool_or([])  # infeasible: fixed live bytes alone exceed the budget
            return
        q = memory_quantum(sum(dem) + cap, self.end_time - self.t0)
        self.memory_quantum = q
        if q > 1:  # bytes in units of q: floor keeps every valid order (relax), ceil admits only valid ones
            dem = [d // q if self.memory_rounding == RELAX else -(-d // q) for d in dem]
            cap //= q
        if ivs:
            self.m.add_cumulative(ivs, dem, cap)
            self.has_memory = True

    def _touched_buffers(self) -> list[int]:
        """Buffers a node of the window produces or reads (and, from step 0, unread freeable inputs)."""
        g = self.g
        seen: set[int] = set()
        for v in self.nodes:
            seen.update(g.produces[v])
            seen.update(g.consumes[v])
        if self.scope.start == 0:
            seen.update(b for b in range(len(g.buffers)) if g.b_prod[b] < 0 and g.b_fin[b] and not g.b_cons[b])
        return sorted(seen)

    def _before_entry(self, b: int) -> int:
        """Buffer b's bytes at the window's entry: A [alloc before] - F [free before] (parameters: 0)."""
        g, start = self.g, self.scope.start
        p = g.b_prod[b]
        if p < 0 and not g.b_fin[b]:
            return 0
        A = g.b_alloc[b] if p >= 0 else g.b_free[b]
        alloc_before = p < 0 or self.pos[p] < start
        if not alloc_before:
            return 0
        if g.b_out[b]:
            return A
        cons = g.b_cons[b]
        last = max(self.pos[c] for c in cons) if cons else (self.pos[p] if p >= 0 else 0)  # unread input: step 0
        return A - (g.b_free[b] if last < start else 0)

    def _live_at_entry(self) -> int:
        """Live bytes before the window's first step in the reference order (post-free of the step before)."""
        from overlapsat.simulate import memory_curve  # the arbiter's own bookkeeping, once per reference order

        w = self.walk  # the walk is of `ref`, shared by every window until an order is accepted
        if w.live_before is None:
            _, post_free = memory_curve(self.g, self.ref)
            fin = sum(self.g.b_free[b] for b in range(len(self.g.buffers))
                      if self.g.b_prod[b] < 0 and self.g.b_fin[b])
            w.live_before = [fin] + post_free[:-1]
        return w.live_before[self.scope.start]

    def add_exit_state(self) -> None:
        """Window only: no worse than today at the exit, so the suffix can only finish earlier.

        The suffix's walk is monotone in the compute clock, each group's stream
        and the end of every transfer still in flight; memory outside the
        window is unchanged because the window's node set is.
        """
        g, w, m = self.g, self.walk, self.m
        for v in self.nodes:
            m.add(self.slot_end[v] <= self.horizon)
        for c in self.comm_start:
            if not g.waits_of[c] or any(w not in self.in_scope for w in g.waits_of[c]):
                m.add(self.comm_start[c] + self.comm_len[c] <= w.comm_end[c])
        for cs in g.group_colls:  # the stream is free at the exit no later than today
            inside = [c for c in cs if c in self.in_scope]
            if inside:
                free_at_exit = max(w.comm_end[c] for c in inside)
                for c in inside:
                    m.add(self.comm_start[c] + self.comm_len[c] <= free_at_exit)

    def set_objective(self) -> None:
        """Whole graph: the makespan. Window: the exit clock."""
        ends: list[cp_model.LinearExprT] = [self.slot_end[v] for v in self.nodes]
        hint = max(self.walk.slot_end[v] for v in self.nodes)
        if self.whole:
            ends += [self.comm_start[c] + self.comm_len[c] for c in self.comm_start]
            hint = self.walk.makespan
        self.objective = self._var(self.t0, self.horizon, hint, "objective")
        self.m.add_max_equality(self.objective, ends)
        self.m.minimize(self.objective)

    # -- memory events -----------------------------------------------------
    def _alloc_time(self, b: int) -> str | tuple[cp_model.LinearExprT, int]:
        p = self.g.b_prod[b]
        return BEFORE if p < 0 else self._at(p, 0)

    def _at(self, v: int, plus: int) -> str | tuple[cp_model.LinearExprT, int]:
        """v's issue (+plus) as (expression, hint), or which side of the scope it lies on."""
        if self.pos[v] < self.scope.start:
            return BEFORE
        if self.pos[v] >= self.scope.stop:
            return AFTER
        return self.issue[v] + plus, self.walk.issue[v] + plus

    def _free_time(self, b: int) -> str | tuple[cp_model.LinearExprT, int]:
        """One unit after the last consumer's issue (MODEL.md: released after the last use)."""
        g = self.g
        if g.b_out[b]:
            return AFTER
        cons = g.b_cons[b]
        p = g.b_prod[b]
        if not cons:
            if p >= 0:
                return self._at(p, 1)  # nobody reads it: released at its own step
            if self.scope.start > 0:
                return BEFORE  # an unread freeable input goes at step 0
            first = self.m.new_int_var(self.t0, self.horizon, f"first[{g.buffers[b].name}]")
            self.m.add_min_equality(first, [self.issue[v] for v in self.nodes])
            h = min(self.walk.issue[v] for v in self.nodes)
            self.m.add_hint(first, h)
            return first + 1, h + 1
        if any(self.pos[c] >= self.scope.stop for c in cons):
            return AFTER
        inside = [c for c in cons if self.pos[c] >= self.scope.start]
        if not inside:
            return BEFORE
        if len(inside) == 1:
            return self._at(inside[0], 1)
        last = self.m.new_int_var(self.t0, self.horizon, f"last_use[{g.buffers[b].name}]")
        self.m.add_max_equality(last, [self.issue[c] for c in inside])
        h = max(self.walk.issue[c] for c in inside)
        self.m.add_hint(last, h)
        return last + 1, h + 1

    def _live_interval(self, s: str | tuple, e: str | tuple, name: str) -> cp_model.IntervalVar:
        start, s_hint = (self.t0, self.t0) if s == BEFORE else s  # type: ignore[misc]
        end, e_hint = (self.end_time, self.end_time) if e == AFTER else e  # type: ignore[misc]
        size = self._var(0, self.end_time - self.t0, e_hint - s_hint, f"{name}.size")
        return self.m.new_interval_var(start, size, end, name)

    # -- reading a solution ------------------------------------------------
    def order_from(self, solver: cp_model.CpSolver) -> list[int]:
        """The full order: prefix, the scope sorted by issue time, suffix."""
        vals = {v: solver.value(self.issue[v]) for v in self.nodes}
        inside = sorted(self.nodes, key=lambda v: (vals[v], self.pos[v]))
        return self.ref[:self.scope.start] + inside + self.ref[self.scope.stop:]


def live_pieces(alloc_bytes: int, free_bytes: int) -> tuple[list[tuple[int, bool, bool]], int]:
    """A buffer's live bytes (`alloc_bytes` at its alloc, `free_bytes` released at its free) as non-negative
    pieces a cumulative can hold, each (bytes, from its alloc (else from the start), to its free (else to the
    end)), with the constant they overcount by (a buffer that frees more than it allocates):
      A >= F: (A - F) [alloc <= t] + F [alloc <= t < free]
      F >  A: A [alloc <= t < free] + (F - A) [t < free] - (F - A)
    Pieces of no bytes are left out. One split for the order model and the joint model."""
    a, f = alloc_bytes, free_bytes
    if a >= f:
        pieces, offset = [(a - f, True, False), (f, True, True)], 0
    else:
        pieces, offset = [(a, True, True), (f - a, False, True)], -(f - a)
    return [p for p in pieces if p[0]], offset


def memory_quantum(total_bytes: int, span_units: int) -> int:
    """The power of two that bytes are counted in, so that a cumulative's energy (demand x time) stays far
    inside CP-SAT's 64-bit arithmetic (16 TiB buffers over a 4e6-unit horizon overflowed it, and the model
    proved a false infeasibility). 1 (exact) for every realistic step."""
    q = 1
    while (total_bytes // q) * max(1, span_units) > MAX_ENERGY:
        q *= 2
    return q


def build(problem: Problem, ts: TimeScale, ref: list[int], *, horizon: int, scope: Scope | None = None,
          walk: UnitWalk | None = None, model_cls: type[Model] = Model, memory_rounding: str = RESTRICT) -> Model:
    """The model of `problem` (its relaxed graph, budget and level) over `scope` (default: the whole graph),
    warm-started from `ref` (`walk`: its unit walk, if known).

    `memory_rounding` matters only where bytes must be counted coarser than one (`memory_quantum`): RESTRICT
    rounds sizes up (every solution is within the budget; an infeasibility or a bound proves nothing), RELAX
    rounds them down (every valid order stays feasible: an infeasibility and a bound are proofs; a solution
    may exceed the budget). `md.memory_quantum` says whether it did (1: exact).
    `model_cls` swaps in a variant with other constraint families (benchmarks/bench_formulation.py).
    """
    g = problem.relaxed  # same node ids; Inductor's chain edges bind at the "chain" level only
    md = model_cls(g, ts, ref, scope or Scope.whole(g), horizon, walk, problem.collective_order)
    md.memory_rounding = memory_rounding
    md.add_compute_stream()
    md.add_dependencies()
    md.add_collective_streams()
    md.add_collective_order()
    md.add_waits()
    md.add_atomic_groups()
    if problem.budget is not None:
        md.add_memory_budget(problem.budget)
    if not md.whole:
        md.add_exit_state()
    md.set_objective()
    return md
