"""The CP-SAT model of MODEL.md (see docs/solver.md for the formulation and why).

Every node owns a slot on the compute stream: compute nodes for their
duration, collectives for one time unit (their issue point), waits from
their issue until their collective has finished (at least one unit). Slots
never overlap, so sorting slots by start gives the issue order. Collectives run
on their group's stream no earlier than their issue point, in input order.
Durations are rounded up to the resolution, and the extra unit per slot is
charged too, so the simulated makespan of the extracted order is never
above the model's objective.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from overlapsat.graph import COLLECTIVE, COMPUTE, WAIT, Graph


@dataclass
class Model:
    """Variables and constraints of one graph, built in families."""

    g: Graph
    scale: float  # model units per microsecond
    horizon: int
    m: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    issue: list[cp_model.IntVar] = field(default_factory=list)  # slot start on the compute stream
    slot_end: list[cp_model.LinearExprT] = field(default_factory=list)
    length: list[int] = field(default_factory=list)
    wait_end: dict[int, cp_model.IntVar] = field(default_factory=dict)
    wait_size: dict[int, cp_model.IntVar] = field(default_factory=dict)
    comm_start: dict[int, cp_model.IntVar] = field(default_factory=dict)
    comm_len: dict[int, int] = field(default_factory=dict)
    last_use: dict[int, cp_model.IntVar] = field(default_factory=dict)
    live_size: dict[int, cp_model.IntVar] = field(default_factory=dict)
    makespan: cp_model.IntVar | None = None
    first_issue: cp_model.IntVar | None = None

    # -- variables ---------------------------------------------------------
    def add_variables(self) -> None:
        g, m, H = self.g, self.m, self.horizon
        intervals = []
        for v in range(len(g.nodes)):
            k = g.kind[v]
            t = m.new_int_var(0, H, f"issue[{g.names[v]}]")
            self.issue.append(t)
            if k == WAIT:
                e = m.new_int_var(0, H, f"wait_end[{g.names[v]}]")
                size = m.new_int_var(1, H, f"wait_len[{g.names[v]}]")
                intervals.append(m.new_interval_var(t, size, e, f"slot[{g.names[v]}]"))
                self.wait_end[v], self.wait_size[v] = e, size
                self.length.append(1)
                self.slot_end.append(e)
            else:
                L = max(1, math.ceil(g.dur[v] * self.scale - 1e-9)) if k == COMPUTE else 1
                intervals.append(m.new_fixed_size_interval_var(t, L, f"slot[{g.names[v]}]"))
                self.length.append(L)
                self.slot_end.append(t + L)
                if k == COLLECTIVE:
                    self.comm_start[v] = m.new_int_var(0, H, f"comm_start[{g.names[v]}]")
                    self.comm_len[v] = math.ceil(g.dur[v] * self.scale - 1e-9)
        self.slots = intervals
        self.makespan = m.new_int_var(0, H, "makespan")

    # -- constraints, one family each -------------------------------------
    def add_compute_stream(self, formulation: str = "interval") -> None:
        """One sequential compute stream (issue slots of every node).

        "pairwise" is the alternative measured in docs/solver.md: one order
        literal per pair of nodes not ordered by dependencies.
        """
        if formulation == "interval":
            self.m.add_no_overlap(self.slots)
            return
        from overlapsat.bounds import _grow  # reachability for skipping ordered pairs

        g = self.g
        n = len(g.nodes)
        for u in range(n):
            seen = bytearray(n)
            _grow(u, g.succs, seen, g.kind, g.dur)
            for v in range(u + 1, n):
                if seen[v]:
                    continue
                before = self.m.new_bool_var(f"before[{u},{v}]")
                self.m.add(self.issue[v] >= self.slot_end[u]).only_enforce_if(before)
                self.m.add(self.issue[u] >= self.slot_end[v]).only_enforce_if(~before)

    def add_dependencies(self) -> None:
        """u -> v: v is issued after u's slot ends."""
        for v, ps in enumerate(self.g.preds):
            for u in ps:
                self.m.add(self.issue[v] >= self.slot_end[u])

    def add_collectives(self, collective_order: str = "group") -> None:
        """Streams per group, in input order; a transfer starts no earlier than its issue."""
        g, m = self.g, self.m
        for c, s in self.comm_start.items():
            m.add(s >= self.issue[c])
        for cs in g.group_colls:
            for a, b in zip(cs, cs[1:]):
                m.add(self.comm_start[b] >= self.comm_start[a] + self.comm_len[a])
                m.add(self.issue[b] >= self.issue[a] + 1)
        if collective_order == "global":
            for a, b in zip(g.coll_seq, g.coll_seq[1:]):
                m.add(self.issue[b] >= self.issue[a] + 1)

    def add_waits(self) -> None:
        """A wait's slot lasts until its collective's transfer has finished."""
        for w, e in self.wait_end.items():
            c = self.g.coll_of[w]
            self.m.add(e >= self.comm_start[c] + self.comm_len[c])

    def add_atomic_groups(self) -> None:
        """Members follow each other directly on the compute stream."""
        for grp in self.g.atomic:
            for a, b in zip(grp, grp[1:]):
                self.m.add(self.issue[b] == self.slot_end[a])

    def add_makespan(self) -> None:
        m, ms = self.m, self.makespan
        for v in range(len(self.g.nodes)):
            m.add(ms >= self.slot_end[v])
        for c, s in self.comm_start.items():
            m.add(ms >= s + self.comm_len[c])

    def add_memory_budget(self, budget: int) -> None:
        """Live buffers at every issue point stay within the budget (cumulative).

        A buffer lives from its producer's slot start to one unit past its last
        consumer's slot start, so at each slot start exactly Inductor's
        post-alloc set is counted (exact when size_alloc == size_free).
        """
        g, m, H = self.g, self.m, self.horizon
        intervals, demands = [], []
        fixed = 0
        for j in range(len(g.buffers)):
            p = g.b_prod[j]
            if p < 0 and not g.b_fin[j]:
                continue
            size = g.b_alloc[j] if p >= 0 else g.b_free[j]
            size = max(size, g.b_free[j]) if p >= 0 else size
            if size == 0:
                continue
            start = self.issue[p] if p >= 0 else 0
            if g.b_out[j]:
                if p < 0:
                    fixed += size
                    continue
                end: cp_model.LinearExprT = H + 1
            elif g.b_cons[j]:
                lu = m.new_int_var(0, H, f"last_use[{g.buffers[j].name}]")
                m.add_max_equality(lu, [self.issue[c] for c in g.b_cons[j]])
                self.last_use[j] = lu
                end = lu + 1
            elif p < 0:  # a freeable input nobody reads: alive at step 0 only, whichever node that is
                if self.first_issue is None:
                    self.first_issue = m.new_int_var(0, H, "first_issue")
                    m.add_min_equality(self.first_issue, self.issue)
                end = self.first_issue + 1
            else:
                end = start + 1
            sz = m.new_int_var(0, H + 1, f"live[{g.buffers[j].name}]")
            self.live_size[j] = sz
            intervals.append(m.new_interval_var(start, sz, end, f"buf[{g.buffers[j].name}]"))
            demands.append(size)
        if intervals:
            m.add_cumulative(intervals, demands, max(0, budget - fixed))

    def set_objective(self) -> None:
        self.m.minimize(self.makespan)

    # -- hints -------------------------------------------------------------
    def hint_order(self, order: list[int]) -> None:
        """A complete hint from an order: every variable, auxiliaries included."""
        g, m = self.g, self.m
        m.clear_hints()
        w = unit_walk(g, order, self.scale)
        issue = w.issue
        for c, st in w.comm_start.items():
            m.add_hint(self.comm_start[c], st)
        for v in self.wait_end:
            m.add_hint(self.wait_end[v], w.slot_end[v])
            m.add_hint(self.wait_size[v], w.slot_end[v] - issue[v])
        for v in range(len(g.nodes)):
            m.add_hint(self.issue[v], issue[v])
        m.add_hint(self.makespan, w.makespan)
        for j, lu in self.last_use.items():
            m.add_hint(lu, max(issue[c] for c in g.b_cons[j]))
        if self.first_issue is not None:
            m.add_hint(self.first_issue, min(issue))
        for j, sz in self.live_size.items():
            p = g.b_prod[j]
            start = issue[p] if p >= 0 else 0
            if g.b_out[j]:
                e = self.horizon + 1
            elif g.b_cons[j]:
                e = max(issue[c] for c in g.b_cons[j]) + 1
            elif p < 0:
                e = min(issue) + 1
            else:
                e = start + 1
            m.add_hint(sz, e - start)

    def order_from(self, solver: cp_model.CpSolver) -> list[int]:
        vals = [solver.value(x) for x in self.issue]
        return sorted(range(len(self.g.nodes)), key=lambda v: (vals[v], v))


@dataclass
class UnitWalk:
    """MODEL.md's walk in model units (durations rounded up, one unit per issue/wait slot)."""

    issue: list[int]
    slot_end: list[int]
    comm_start: dict[int, int]
    comm_end: dict[int, int]
    clock_before: list[int]  # compute clock before each position of the order
    free_before: list[list[int]]  # each group's stream, before each position
    makespan: int


def unit_walk(g: Graph, order: list[int], scale: float) -> UnitWalk:
    """What the model computes for a fixed order: the hint, and the LNS windows' boundaries."""
    n = len(g.nodes)
    issue, slot_end = [0] * n, [0] * n
    cstart: dict[int, int] = {}
    cend: dict[int, int] = {}
    free = [0] * len(g.groups)
    clock_before: list[int] = []
    free_before: list[list[int]] = []
    t = 0
    for v in order:
        clock_before.append(t)
        free_before.append(list(free))
        issue[v] = t
        k = g.kind[v]
        if k == COLLECTIVE:
            gi = g.group_id[v]
            cstart[v] = max(t, free[gi])
            cend[v] = free[gi] = cstart[v] + math.ceil(g.dur[v] * scale - 1e-9)
            t += 1
        elif k == WAIT:
            t = max(t + 1, cend[g.coll_of[v]])
        else:
            t += max(1, math.ceil(g.dur[v] * scale - 1e-9))
        slot_end[v] = t
    return UnitWalk(issue, slot_end, cstart, cend, clock_before, free_before, max([t, *cend.values()]))


def model_units(g: Graph, order: list[int], scale: float) -> int:
    """The model's makespan (units) for an order: the hint's objective."""
    return unit_walk(g, order, scale).makespan


def build(g: Graph, *, scale: float, horizon: int, collective_order: str = "group",
          memory_budget: int | None = None, formulation: str = "interval") -> Model:
    md = Model(g, scale, horizon)
    md.add_variables()
    md.add_compute_stream(formulation)
    md.add_dependencies()
    md.add_collectives(collective_order)
    md.add_waits()
    md.add_atomic_groups()
    md.add_makespan()
    if memory_budget is not None:
        md.add_memory_budget(memory_budget)
    md.set_objective()
    return md
