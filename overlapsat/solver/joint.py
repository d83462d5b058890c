"""Bucket membership and issue order in one CP-SAT model (PyJobShop's optional tasks and SelectExactlyOne).

Each candidate bucket is an optional task of four optional intervals (copy-in, merged collective, wait,
copy-out, priced as `materialize` prices them); each collective that some candidate holds either stays alone
(its own collective and wait, optional too) or lies in exactly one selected candidate. The union of every
candidate's nodes is one `Graph` (`Union`), so the time scale, the unit walk and the hint are the ordinary ones.

Dependencies: `materialize` maps each edge and buffer by its two ends alone, so the dependencies of any
bucketing are those of the graph with each pair of its buckets; read off the graph bucketed by one candidate at
a time (`Union.relations`), each holds when both its ends are present.

Memory (decision 103): each buffer of any bucketing is one `LiveBuffer` of the union, made by whichever of its
makers is present and read by its present readers (`Union.live_buffers`), and the budget is one cumulative over
their live intervals, as in the order model (model.py), its bytes rounded down where they must be counted coarser.

Scope (decisions 43, 103): level "free". Every stricter level only removes plans, so the model relaxes it: where
the candidates are every legal bucket (`Candidates.complete`), its proven bound holds over every plan of the
problem within its budget; elsewhere (no bound to prove) the budget is relaxed too. Its plan is checked at the
problem's level and budget before it is used.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ortools.sat.python import cp_model

from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, WAIT, Graph, derived
from overlapsat.plan import Bucket, Pricing, bucket_problems, bucketable_by_key, materialize
from overlapsat.problem import Problem
from overlapsat.solver.model import CpModel
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.units import EXACT_UNITS, TimeScale, UnitWalk, choose_scale, safe_horizon, unit_walk

log = logging.getLogger(__name__)

COMPLETE_KEY = 6  # keys with at most this many collectives offer every legal subset as a candidate
RUN = 4  # larger keys offer runs of 2..RUN consecutive collectives (the model is then no bound over plans)
MAX_CANDIDATES = 120  # beyond this many candidate buckets the model is not built
MAX_UNION_NODES = 800  # nor beyond this many nodes in the union of the graph and every candidate's nodes
MAX_STREAM_PAIRS = 20_000  # nor beyond this many pairs of transfers of one group that may both be present
# the budget at each step (`add_memory_steps`) is built where its maker-reader clauses, priced at STEP_CLAUSE_S
# each (building them in Python: 2.95 s for 30,765 at 57 nodes, 11.6 s for 159,155 at 113, 2026-12-02), take at
# most STEP_SHARE of the joint model's time limit: a function of the limit, not of the clock (decision 103)
STEP_CLAUSE_S = 1e-4
STEP_SHARE = 0.25
# building the model in Python (the union of every candidate's graph, then the CP-SAT model) costs about BUILD_S per
# union node per candidate, the union about the graph's nodes and 4 per candidate (1.1 s for 102 candidates on a
# 187-node graph, 0.2-0.4 s for 30-57 on 101-276 nodes; this 2-core machine, 2026-12-02): the model is built only
# where that is at most BUILD_SHARE of its time limit (a function of the limit, not of the clock), and where the
# clock still has it (decision 105)
BUILD_S = 2e-5
BUILD_SHARE = 0.5


@dataclass(frozen=True)
class Candidates:
    """The buckets the model may select, and whether they are every legal bucket of the graph."""

    buckets: tuple[Bucket, ...]
    complete: bool


@dataclass(frozen=True)
class LiveBuffer:
    """A buffer of some bucketing (MODEL.md "Memory"): present in every bucketing, or (`owner`) only where that
    candidate is chosen; made at the issue of the one present node of `makers` (none: a freeable input, live from
    the start), released one step after the last present node of `readers` (never, an `output`)."""

    name: str
    alloc: int
    free: int
    owner: tuple[str, int] | None
    makers: tuple[int, ...]
    readers: tuple[int, ...]
    output: bool

    @property
    def sizes(self) -> tuple[int, int]:
        """(bytes allocated, bytes freed) as the memory model counts them: a freeable input its free size from
        the start."""
        return (self.free, self.free) if not self.makers else (self.alloc, self.free)


def candidates(g: Graph) -> Candidates:
    """Every legal bucket of each key of at most `COMPLETE_KEY` collectives; runs of 2..`RUN` neighbours of one
    key (in its input order) of a larger key."""
    out: list[Bucket] = []
    complete = True
    for cs in bucketable_by_key(g).values():
        names = [g.names[c] for c in cs]
        if len(names) <= COMPLETE_KEY:
            subsets: list[Sequence[str]] = [s for k in range(2, len(names) + 1)
                                            for s in itertools.combinations(names, k)]
        else:
            complete = False
            subsets = [names[i:j] for i in range(len(names)) for j in range(i + 2, min(len(names), i + RUN) + 1)]
        out += [b for s in subsets if not bucket_problems(g, [b := Bucket(tuple(s))])]
    return Candidates(tuple(out), complete)


class Union:
    """The graph and every candidate's four nodes as one graph (nodes of `g` keep their ids), who owns each
    node, and the dependencies each holds under."""

    def __init__(self, g: Graph, cands: Sequence[Bucket], price: Pricing) -> None:
        self.g, self.cands = g, tuple(cands)
        self.alone = sorted({g.index[m] for b in self.cands for m in b.members})  # collectives that may stay alone
        self.bucketed = [materialize(g, [b], price) for b in self.cands]
        nodes = list(g.nodes) + [gb.node(nm) for b, gb in zip(self.cands, self.bucketed) for nm in b.nodes]
        edges = tuple(e for b in self.cands for e in ((b.nodes[0], b.nodes[1]), (b.nodes[2], b.nodes[3])))
        with derived():  # the graph's nodes and each checked bucketed graph's own
            self.graph = Graph(tuple(nodes), (), edges, g.atomic_groups, g.name + "+candidates")
        n0 = len(g.nodes)
        # owner: -1 always present; ("alone", c) present iff c stays alone; ("bucket", k) iff candidate k is chosen
        self.owner: list[tuple[str, int] | None] = [None] * len(nodes)
        for c in self.alone:
            self.owner[c] = ("alone", c)
            self.owner[g.waits_of[c][0]] = ("alone", c)
        for k in range(len(self.cands)):
            for j in range(4):
                self.owner[n0 + 4 * k + j] = ("bucket", k)
        self._live: list[LiveBuffer] | None = None  # `live_buffers`, once read
        self.holding: dict[int, list[int]] = {c: [] for c in self.alone}  # collective -> candidates holding it
        for k, b in enumerate(self.cands):
            for m in b.members:
                self.holding[g.index[m]].append(k)

    def node_of(self, k: int, j: int) -> int:
        """Candidate k's j-th node (0 copy-in, 1 collective, 2 wait, 3 copy-out)."""
        return len(self.g.nodes) + 4 * k + j

    def relations(self) -> list[tuple[int, int, tuple[tuple[str, int], ...]]]:
        """(u, v, owners): v is issued after u's slot ends whenever every owner in `owners` is present."""
        g, uid = self.g, self.graph.index
        out: dict[tuple[int, int], set[tuple[str, int]]] = {}

        for v in range(len(g.nodes)):
            for u in g.preds[v]:
                _add_relation(out, u, v, self.owner[u], self.owner[v])
        for k, (b, gb) in enumerate(zip(self.cands, self.bucketed)):
            mine = set(b.nodes)
            for v in range(len(gb.nodes)):
                for u in gb.preds[v]:
                    nu, nv = gb.names[u], gb.names[v]
                    if nu not in mine and nv not in mine:
                        continue  # between nodes of the graph: read off the graph itself
                    iu, iv = uid[nu], uid[nv]
                    _add_relation(out, iu, iv, self.owner[iu], self.owner[iv])
                    # an original end that another candidate holds: under that candidate it is its copy-in (a
                    # member) or its wait (a member's wait); its incoming dependencies map by that end alone
                    o = self.owner[iv]
                    if nu in mine and o is not None and o[0] == "alone":
                        c = o[1]
                        j = 0 if iv == c else 2
                        for k2 in self.holding[c]:
                            if k2 != k and not set(self.cands[k2].members) & set(b.members):
                                _add_relation(out, iu, self.node_of(k2, j), ("bucket", k), ("bucket", k2))
        return [(u, v, tuple(sorted(os_))) for (u, v), os_ in out.items()]

    def can_coexist(self, a: int, b: int) -> bool:
        """Whether nodes a and b can both be present (not two choices for one collective)."""
        oa, ob = self.owner[a], self.owner[b]
        if oa is None or ob is None or oa == ob:
            return True
        ma = self._members(oa)
        mb = self._members(ob)
        return not (ma & mb)

    def _members(self, o: tuple[str, int]) -> set[str]:
        return {self.g.names[o[1]]} if o[0] == "alone" else set(self.cands[o[1]].members)

    def live_buffers(self) -> list[LiveBuffer]:
        """Every buffer of every bucketing, read off the graph and each graph bucketed by one candidate:
        `materialize` maps a buffer's maker and each reader by the bucket that holds it alone, so under a
        bucketing a buffer is made by the present one of its makers here and read by its present readers. A
        parameter (no maker, never freed) is left out, as the memory model leaves it out."""
        if self._live is not None:
            return self._live
        g, uid = self.g, self.graph.index
        out: list[LiveBuffer] = []
        extra: dict[int, tuple[set[int], set[int]]] = {}  # a buffer of g -> candidates' makers and readers of it
        for k, (b, gb) in enumerate(zip(self.cands, self.bucketed)):
            mine = set(b.nodes)
            for j, buf in enumerate(gb.buffers):
                p = gb.b_prod[j]
                if buf.name in g.buffer_index:
                    makers, readers = extra.setdefault(g.buffer_index[buf.name], (set(), set()))
                    if p >= 0 and gb.names[p] in mine:
                        makers.add(uid[gb.names[p]])
                    readers.update(uid[gb.names[c]] for c in gb.b_cons[j] if gb.names[c] in mine)
                else:  # the bucket's own: its copy-in, merged or transient buffer
                    out.append(LiveBuffer(buf.name, gb.b_alloc[j], gb.b_free[j], ("bucket", k),
                                          (uid[gb.names[p]],), tuple(uid[gb.names[c]] for c in gb.b_cons[j]),
                                          gb.b_out[j]))
        for j, buf in enumerate(g.buffers):
            p = g.b_prod[j]
            if p < 0 and not g.b_fin[j]:
                continue
            makers, readers = extra.get(j, (set(), set()))
            out.append(LiveBuffer(buf.name, g.b_alloc[j], g.b_free[j], None,
                                  () if p < 0 else tuple(sorted({p, *makers})), tuple(sorted({*g.b_cons[j], *readers})),
                                  g.b_out[j]))
        self._live = out
        return out


class JointModel:
    """Variables with their warm start, one method per constraint family, and the objective (level "free")."""

    def __init__(self, u: Union, ts: TimeScale, horizon: int, hint: tuple[Sequence[Bucket], list[str]] | None,
                 hint_walk: tuple[Graph, UnitWalk] | None = None) -> None:
        self.u, self.ts, self.horizon = u, ts, horizon
        self.m = CpModel()
        self.has_memory = False
        self.joint = True  # its deterministic second is priced apart (cpsat.dt_scale, decision 98)
        ug = u.graph
        n = len(ug.nodes)
        # the hint: the given bucketing's walk in units, by node name of the union; absent nodes at 0
        at: dict[str, tuple[int, int, int]] = {}  # name -> (issue, slot end, transfer start)
        hint_buckets: set[Bucket] = set()
        hint_ms = 0
        if hint is not None and hint_walk is not None:  # the walk of the hint's order on its bucketed graph
            hint_buckets = set(hint[0])
            gp, w = hint_walk
            at = {gp.names[v]: (w.issue[v], w.slot_end[v], w.comm_start.get(v, 0)) for v in range(len(gp.nodes))}
            hint_ms = w.makespan
        self.alone = {c: self._bool(f"alone[{u.g.names[c]}]", not any(u.cands[k] in hint_buckets
                                                                     for k in u.holding[c])) for c in u.alone}
        self.chose = [self._bool(f"chose[{b.name}]", b in hint_buckets) for b in u.cands]
        self.hint_at = {nm: h[0] for nm, h in at.items()}  # the hint's issue of each node it has
        self.hint_on = {**{u.g.names[c]: all(u.cands[k] not in hint_buckets for k in u.holding[c]) for c in u.alone},
                        **{b.name: b in hint_buckets for b in u.cands}}  # by collective or candidate name
        self.memory_quantum = 1
        self.issue: list[Any] = [None] * n
        self.slot_end: list[Any] = [None] * n
        self.comm_start: dict[int, Any] = {}
        self.wait_end: dict[int, Any] = {}
        self.slots: list[cp_model.IntervalVar] = []
        for v in range(n):
            nm = ug.names[v]
            h = at.get(nm, (0, 0, 0))
            lit = self.present(v)
            self.issue[v] = self._var(0, horizon, h[0], f"issue[{nm}]")
            if ug.kind[v] == WAIT:
                e = self._var(0, horizon, h[1], f"wait_end[{nm}]")
                size = self._var(ts.slot(ug, v), horizon, max(ts.slot(ug, v), h[1] - h[0]), f"wait_len[{nm}]")
                self.slots.append(self._interval(self.issue[v], size, e, lit, nm))
                self.wait_end[v] = self.slot_end[v] = e
            else:
                length = ts.slot(ug, v)
                end = self.issue[v] + length
                self.slots.append(self._interval(self.issue[v], length, end, lit, nm))
                self.slot_end[v] = end
                if ug.kind[v] == COLLECTIVE:
                    self.comm_start[v] = self._var(0, horizon, h[2], f"comm_start[{nm}]")
        self.hint_order = {nm: i for i, nm in enumerate(hint[1])} if hint is not None else {}
        self.objective = self._var(0, horizon, hint_ms if hint is not None else horizon, "objective")

    # -- variables -----------------------------------------------------------
    def _var(self, lo: int, hi: int, hint: int, name: str) -> Any:
        x = self.m.new_int_var(lo, hi, name)
        self.m.add_hint(x, min(hi, max(lo, hint)))
        return x

    def _bool(self, name: str, hint: bool) -> Any:
        x = self.m.new_bool_var(name)
        self.m.add_hint(x, hint)
        return x

    def _interval(self, start: Any, size: Any, end: Any, lit: Any, nm: str) -> cp_model.IntervalVar:
        if lit is None:
            return self.m.new_interval_var(start, size, end, f"slot[{nm}]")
        return self.m.new_optional_interval_var(start, size, end, lit, f"slot[{nm}]")

    def present(self, v: int) -> Any:
        """Node v's presence literal (None: always present)."""
        o = self.u.owner[v]
        if o is None:
            return None
        return self.alone[o[1]] if o[0] == "alone" else self.chose[o[1]]

    def _lits(self, *vs: int) -> list[Any]:
        return list(dict.fromkeys(lit for v in vs if (lit := self.present(v)) is not None))

    def _owner_lit(self, o: tuple[str, int]) -> Any:
        return self.alone[o[1]] if o[0] == "alone" else self.chose[o[1]]

    # -- constraints, one family each ----------------------------------------
    def add_bucket_selection(self) -> None:
        """Each collective a candidate holds is alone or in exactly one chosen candidate (SelectExactlyOne)."""
        for c, ks in self.u.holding.items():
            self.m.add_exactly_one([self.alone[c], *(self.chose[k] for k in ks)])

    def add_compute_stream(self) -> None:
        """One sequential compute stream: the issue slots of the present nodes."""
        self.m.add_no_overlap(self.slots)

    def add_dependencies(self) -> None:
        """Each dependency of every bucketing, whenever its ends (and the candidates it comes from) are there."""
        for u, v, owners in self.u.relations():
            lits = list(dict.fromkeys(self._owner_lit(o) for o in owners))
            self.m.add(self.issue[v] >= self.slot_end[u]).only_enforce_if(lits)

    def add_collective_streams(self) -> None:
        """Transfers start after their launch; a group's stream is FIFO by issue among the present transfers."""
        ug, ts, m = self.u.graph, self.ts, self.m
        for c, s in self.comm_start.items():
            m.add(s >= self.issue[c] + ts.work(ug, c)).only_enforce_if(self._lits(c))
        by_group: dict[int, list[int]] = {}
        for c in self.comm_start:
            by_group.setdefault(ug.group_id[c], []).append(c)
        for cs in by_group.values():
            for k, a in enumerate(cs):
                for b in cs[k + 1:]:
                    if not self.u.can_coexist(a, b):
                        continue
                    first = self.m.new_bool_var(f"issued_before[{ug.names[a]},{ug.names[b]}]")
                    ha, hb = self.hint_order.get(ug.names[a]), self.hint_order.get(ug.names[b])
                    self.m.add_hint(first, ha is None or hb is None or ha < hb)
                    both = self._lits(a, b)
                    la, lb = self.transfer(a), self.transfer(b)
                    m.add(self.issue[b] >= self.issue[a] + 1).only_enforce_if([*both, first])
                    m.add(self.comm_start[b] >= self.comm_start[a] + la).only_enforce_if([*both, first])
                    m.add(self.issue[a] >= self.issue[b] + 1).only_enforce_if([*both, ~first])
                    m.add(self.comm_start[a] >= self.comm_start[b] + lb).only_enforce_if([*both, ~first])

    def transfer(self, c: int) -> int:
        return self.ts.transfer(self.u.graph, c)

    def add_waits(self) -> None:
        """A wait's slot lasts until its collective's transfer has finished, and then its own time."""
        ug = self.u.graph
        for w, e in self.wait_end.items():
            c = ug.coll_of[w]
            self.m.add(e >= self.comm_start[c] + self.transfer(c) + self.ts.work(ug, w)).only_enforce_if(
                self._lits(w))

    def add_atomic_groups(self) -> None:
        """Members follow each other directly on the compute stream (they are never bucketed)."""
        for grp in self.u.graph.atomic:
            for a, b in zip(grp, grp[1:]):
                self.m.add(self.issue[b] == self.slot_end[a])

    def add_memory_budget(self, budget: int, steps: bool = True) -> None:
        """Peak memory <= budget in every bucketing, as the order model counts it (model.py,
        `Model.add_memory_budget`): each buffer's bytes split into non-negative pieces over its live interval,
        one cumulative over them (`live_pieces`), checked at every issue. A buffer's alloc is the issue of its present maker and
        its release one unit after the last issue of its present readers (at least after its alloc: unread, it
        goes at its own step). Bytes counted coarser than one (`memory_quantum`) are rounded down: a
        relaxation, so the bound still holds and the plan is checked. `steps`: also `add_memory_steps`."""
        from overlapsat.solver.model import live_pieces, memory_quantum  # the order model's own split and guard

        m, ug = self.m, self.u.graph
        end = self.horizon + 2  # after every event
        const, ivs, dem = 0, [], []
        for lb in self.u.live_buffers():
            lit = None if lb.owner is None else self._owner_lit(lb.owner)
            a_size, f_size = lb.sizes
            if lit is not None and f_size > a_size:  # `materialize` sizes a bucket's own buffers alike
                raise GraphError(f"bucket buffer {lb.name!r} frees more than it allocates")
            on = [v for v in lb.makers if self._hint_present(v)]
            a_hint = self.hint_at.get(ug.names[on[0]], 0) if on else 0
            if not lb.makers:
                alloc: Any = 0
            else:
                alloc = self._var(0, self.horizon, a_hint, f"alloc[{lb.name}]")
                for v in lb.makers:
                    m.add(alloc == self.issue[v]).only_enforce_if(self._lits(v))
            if lb.output:
                free, f_hint = end, end
            else:
                reads = [self.hint_at.get(ug.names[v], 0) + 1 for v in lb.readers if self._hint_present(v)]
                f_hint = max([a_hint + 1, *reads])
                free = self._var(1, end, f_hint, f"free[{lb.name}]")
                m.add(free >= alloc + 1)
                for v in lb.readers:
                    m.add(free >= self.issue[v] + 1).only_enforce_if(self._lits(v))
            pieces, offset = live_pieces(a_size, f_size)
            const += offset
            for d, from_alloc, to_free in pieces:
                st, sh = (alloc, a_hint) if from_alloc else (0, 0)
                en, eh = (free, f_hint) if to_free else (end, end)
                size = self._var(0, end, eh - sh, f"live[{lb.name}].size")
                ivs.append(self.m.new_interval_var(st, size, en, f"live[{lb.name}]") if lit is None else
                           self.m.new_optional_interval_var(st, size, en, lit, f"live[{lb.name}]"))
                dem.append(d)
        cap = budget - const
        if cap < 0:
            m.add_bool_or([])  # the bytes every bucketing holds throughout exceed the budget alone
            return
        q = memory_quantum(sum(dem) + cap, end)
        self.memory_quantum = q
        if q > 1:
            dem, cap = [d // q for d in dem], cap // q
        if ivs:
            m.add_cumulative(ivs, dem, cap)
            self.has_memory = True
        if steps:
            self.add_memory_steps(budget, q)

    def add_memory_steps(self, budget: int, q: int) -> None:
        """The budget once more, at each node's step, over literals of which node comes first (decision 103):
        redundant with the cumulative, but a proof over orders where the cumulative's time-tabling proves
        nothing until the issue times are fixed (a 12-node graph: no proof in 20 s, then 0.03-2.8 s). The live
        bytes at v's step split as the cumulative splits them: a buffer holds A - F from its maker's step on
        (A > F; an output, all of A), min(A, F) from its maker's step to its last reader's (its own step where
        it has none), and where F > A also F - A up to its last reader, less F - A throughout. Each piece is a
        literal at least as large as the truth (set by a clause per maker and reader), so every plan within the
        budget is kept and the bytes counted here are never fewer than the cumulative's."""
        u, m = self.u, self.m
        ug = u.graph
        n = len(ug.nodes)
        key = [(self.hint_at.get(ug.names[v], 0), v) for v in range(n)]  # the hint's order of the present nodes
        prec: dict[tuple[int, int], Any] = {}
        ons: dict[int, list[tuple[Any, bool]]] = {}
        befores: dict[tuple[int, int], list[tuple[Any, bool]]] = {}  # each pair's literal, read many times

        def on(v: int) -> list[tuple[Any, bool]]:
            if v not in ons:
                lit = self.present(v)
                ons[v] = [] if lit is None else [(lit, self._hint_present(v))]
            return ons[v]

        def before(a: int, b: int) -> list[tuple[Any, bool]]:  # a is issued no later than b
            got = befores.get((a, b))
            if got is not None:
                return got
            if a == b:
                return []
            i, j = min(a, b), max(a, b)
            h = key[i] < key[j]
            if (i, j) not in prec:
                x = prec[i, j] = self._bool(f"before[{ug.names[i]},{ug.names[j]}]", h)
                both = self._lits(i, j)
                m.add(self.issue[j] >= self.issue[i] + 1).only_enforce_if([*both, x])
                m.add(self.issue[i] >= self.issue[j] + 1).only_enforce_if([*both, ~x])
            x = prec[i, j]
            got = befores[a, b] = [(x, h)] if a < b else [(~x, not h)]
            return got

        def piece(name: str, clauses: list[list[tuple[Any, bool]]]) -> Any:  # 1 wherever some clause holds
            y = self._bool(name, any(all(h for _, h in cl) for cl in clauses))
            for cl in clauses:
                m.add_bool_or([y, *(~lit for lit, _ in cl)])
            return y

        terms: list[list[tuple[int, Any]]] = [[] for _ in range(n)]
        const = 0
        for lb in u.live_buffers():
            a_size, f_size = lb.sizes
            if f_size > a_size:
                const += f_size - a_size  # owned buffers never free more than they allocate (add_memory_budget)
            for v in range(n):
                mks = [mk for mk in lb.makers if u.can_coexist(mk, v)]
                rds = [r for r in lb.readers if u.can_coexist(r, v)]
                held = [[*on(mk), *before(mk, v)] for mk in mks]  # made by v's step
                if lb.output or a_size > f_size:
                    d = a_size if lb.output else a_size - f_size
                    if held:
                        terms[v].append((d, piece(f"held[{lb.name},{ug.names[v]}]", held)))
                if lb.output:
                    continue
                live = [[*on(mk), *on(r), *before(mk, v), *before(v, r)] for mk in mks for r in rds
                        if u.can_coexist(mk, r)] + [[] for mk in mks if mk == v]
                if not lb.makers:  # a freeable input: live from the start to its last reader
                    live = [[*on(r), *before(v, r)] for r in rds]
                if live:
                    terms[v].append((min(a_size, f_size), piece(f"live[{lb.name},{ug.names[v]}]", live)))
                if f_size > a_size:
                    unfreed = [[*on(r), *before(v, r)] for r in rds] + [[*on(mk), *before(v, mk)] for mk in mks]
                    if unfreed:
                        terms[v].append((f_size - a_size, piece(f"unfreed[{lb.name},{ug.names[v]}]", unfreed)))
        cap = (budget + const) // q
        for v in range(n):
            ts = [(d // q, y) for d, y in terms[v] if d // q]
            if ts:
                m.add(sum(d * y for d, y in ts) <= cap).only_enforce_if(self._lits(v))

    def _hint_present(self, v: int) -> bool:
        """Whether node v is in the hint's plan."""
        o = self.u.owner[v]
        if o is None:
            return True
        return self.hint_on[self.u.g.names[o[1]] if o[0] == "alone" else self.u.cands[o[1]].name]

    def set_objective(self) -> None:
        """The makespan: the last present slot or transfer end."""
        for v in range(len(self.u.graph.nodes)):
            ends = [self.slot_end[v]] + ([self.comm_start[v] + self.transfer(v)] if v in self.comm_start else [])
            for e in ends:
                self.m.add(self.objective >= e).only_enforce_if(self._lits(v))
        self.m.minimize(self.objective)

    # -- reading a solution --------------------------------------------------
    def order_from(self, solver: cp_model.CpSolver) -> list[int]:
        """The present nodes by issue time (union ids); the chosen candidates are those whose nodes it holds
        (`_chosen`)."""
        on = [v for v in range(len(self.u.graph.nodes))
              if (lit := self.present(v)) is None or solver.boolean_value(lit)]
        return sorted(on, key=lambda v: (solver.value(self.issue[v]), v))


def build_joint(u: Union, ts: TimeScale, hint: tuple[Sequence[Bucket], list[str]] | None = None,
                price: Pricing | None = None, horizon: int | None = None, budget: int | None = None,
                steps: bool = True) -> JointModel:
    """The joint model of `u`, within `budget` where one is given; `hint` (buckets among the candidates, an order
    of their bucketed graph) is the warm start and, where it is within the budget, its makespan the horizon (no
    plan worth finding ends later)."""
    walk = _hint_walk(u, ts, hint, price) if hint is not None else None
    if horizon is None:
        fits = walk is not None and (budget is None or _peak(walk[0], hint[1]) <= budget)  # type: ignore[index]
        horizon = walk[1].makespan if fits else safe_horizon(u.graph, ts)  # type: ignore[index]
    md = JointModel(u, ts, horizon, hint, walk)
    if budget is not None:
        md.add_memory_budget(budget, steps)
    md.add_bucket_selection()
    md.add_compute_stream()
    md.add_dependencies()
    md.add_collective_streams()
    md.add_waits()
    md.add_atomic_groups()
    md.set_objective()
    return md


def _hint_walk(u: Union, ts: TimeScale, hint: tuple[Sequence[Bucket], list[str]],
               price: Pricing | None) -> tuple[Graph, UnitWalk]:
    """The hint's bucketed graph and the unit walk of its order (the values of the warm start, and its makespan
    the horizon)."""
    bs, order = hint
    gp = materialize(u.g, list(bs), price) if bs else u.g  # type: ignore[arg-type]
    return gp, unit_walk(gp, [gp.index[nm] for nm in order], ts)


def _peak(gp: Graph, order: Sequence[str]) -> int:
    """The simulated peak of `order` (names) on the bucketed graph `gp`: the arbiter's, for the hint and a plan."""
    from overlapsat.simulate import simulate

    return simulate(gp, [gp.index[nm] for nm in order]).peak_memory


@dataclass
class JointResult:
    """What the joint model found: a plan (buckets, order by name of their bucketed graph) or none, and a lower
    bound on every plan of the problem (0 where the candidates are not every legal bucket)."""

    buckets: tuple[Bucket, ...] | None = None
    order: list[str] | None = None
    bound: float = 0.0
    complete: bool = False
    stats: dict[str, Any] = field(default_factory=dict)


def too_large(g: Graph, cands: Candidates) -> str:
    """Why the joint model is not built for `g` ('' when it is)."""
    if not cands.buckets:
        return "no candidate bucket"
    if len(cands.buckets) > MAX_CANDIDATES:
        return f"{len(cands.buckets)} candidate buckets (at most {MAX_CANDIDATES})"
    nodes = len(g.nodes) + 4 * len(cands.buckets)
    if nodes > MAX_UNION_NODES:
        return f"{nodes} nodes with the candidates' (at most {MAX_UNION_NODES})"
    per_group: dict[str | None, int] = {}
    for c in g.coll_seq:
        per_group[g.nodes[c].group] = per_group.get(g.nodes[c].group, 0) + 1
    for b in cands.buckets:
        grp = g.node(b.members[0]).group
        per_group[grp] = per_group.get(grp, 0) + 1
    pairs = sum(k * (k - 1) // 2 for k in per_group.values())
    if pairs > MAX_STREAM_PAIRS:
        return f"{pairs} pairs of transfers of one group (at most {MAX_STREAM_PAIRS})"
    return ""


def solve_joint(problem: Problem, price: Pricing, params: SolveParams,
                start: tuple[Sequence[Bucket], list[str]] | None = None,
                cands: Candidates | None = None, clock: TimeBudget | None = None) -> JointResult:
    """The joint model of `problem`'s graph at level "free" within its budget, warm-started from `start` (buckets,
    and an order of their bucketed graph by name; used only when its buckets are candidates), choosing among
    `cands` (default: `candidates` of the graph; a bound only when they are complete). Never raises for
    the solver's sake: a failure is in `stats["error"]`. Its plan is not checked against the problem's level or
    (where bytes were counted coarser than one) its budget: the caller does that."""
    from overlapsat.solver.cpsat import JOINT_START_S, solve_model  # the one contained, interruptible CP-SAT call

    g = problem.graph.relaxed("free")
    if len(g.nodes) > MAX_UNION_NODES:  # before listing candidates: that alone costs seconds at 16k nodes
        return JointResult(stats={"skipped": f"{len(g.nodes)} nodes (at most {MAX_UNION_NODES})"})
    if cands is None:  # every legal bucket within the problem's bucket cap (complete: every one the policy allows)
        cands = candidates(g)
        cands = replace(cands, buckets=tuple(b for b in cands.buckets if not problem.over_cap([b])))
    why = too_large(g, cands)
    if why:
        return JointResult(stats={"skipped": why})
    build = build_price(len(g.nodes), len(cands.buckets))
    if build > BUILD_SHARE * params.time_limit:
        return JointResult(stats={"skipped": f"building it is priced at {build:.2f} s, over {BUILD_SHARE:g} of its "
                                             f"{params.time_limit:g}-s limit"})
    if clock is not None and clock.wall_left() < build:  # the caller's clock has no room: said as a clock cut
        if params.deterministic:
            clock.cut_by_wall_clock = True
        return JointResult(stats={"skipped": f"the clock left {clock.wall_left():.2f} s, less than its build"})
    u = Union(g, cands.buckets, price)
    try:
        ts = choose_scale(u.graph, EXACT_UNITS)  # as exact as the whole-graph model without a budget
    except GraphError as e:
        return JointResult(stats={"skipped": str(e)})
    if start is not None and not set(start[0]) <= set(cands.buckets):
        start = None  # not among the candidates: no complete hint
    tb = TimeBudget(params, parent=clock)
    stats: dict[str, Any] = {"candidates": len(cands.buckets), "complete": cands.complete,
                             "union_nodes": len(u.graph.nodes), "exact_scale": ts.exact,
                             "under_budget": problem.budget is not None and cands.complete}
    work = tb.work_left() if math.isfinite(tb.work_left()) else params.time_limit
    work -= min(JOINT_START_S, work / 2)  # what CP-SAT's start costs before its count moves (decision 98)
    if problem.budget is None or not cands.complete:  # no bound to prove within a budget: relaxed (decision 43)
        md = build_joint(u, ts, start, price)
        return _joint_result(u, solve_model(u.graph, md, ts, params, tb, None, None, stats, work), cands, stats)
    # first without the budget, for at most half the work and the clock (decision 103): CP-SAT proves it fast, and
    # its bound is a floor for the budgeted model, whose proofs are slower; its plan where that is within the
    # budget (the answer where it is also proven optimal: no plan within the budget is then shorter)
    free_md = build_joint(u, ts, start, price)
    stats["unbudgeted"] = {}
    half = tb.reserving(tb.wall_left() / 2)
    first = solve_model(u.graph, free_md, ts, params, half, None, None, stats["unbudgeted"], work / 2)
    tb.spend(half.work_used)
    kept = first.order is not None and _within(u, first.order, price, problem.budget)
    if kept and stats["unbudgeted"].get("solver_status") == "OPTIMAL":
        return _joint_result(u, first, cands, {**stats, **stats["unbudgeted"], "memory_quantum_bytes": 1})
    steps = step_clauses(u) * STEP_CLAUSE_S <= STEP_SHARE * params.time_limit
    try:
        md = build_joint(u, ts, start, price, budget=problem.budget, steps=steps)
    except GraphError as e:
        return JointResult(stats={"skipped": str(e)})
    if first.bound_units is not None:
        md.m.add(md.objective >= first.bound_units)  # the budget only removes plans
    stats.update(memory_steps=steps, memory_quantum_bytes=md.memory_quantum)
    out = solve_model(u.graph, md, ts, params, tb, None, None, stats, max(0.01, work - tb.work_used))
    if out.bound_us is None and first.bound_us is not None:
        out = replace(out, bound_us=first.bound_us)  # no answer within the budget: the floor still holds
    if out.order is None and kept:  # the plan without the budget is within it
        out = replace(out, order=first.order)
    return _joint_result(u, out, cands, stats)


def build_price(nodes: int, cands: int) -> float:
    """What building the joint model costs (`BUILD_S`), from the graph's size and the candidates' count alone."""
    return BUILD_S * (nodes + 4 * cands) * cands


def step_clauses(u: Union) -> int:
    """What `add_memory_steps` builds, as maker-reader clauses (at most; its cost)."""
    return sum(len(u.graph.nodes) * max(1, len(lb.makers)) * max(1, len(lb.readers)) for lb in u.live_buffers())


def _within(u: Union, order: list[int], price: Pricing, budget: int) -> bool:
    """Whether the plan of `order` (union ids) peaks within `budget` on its bucketed graph."""
    h = materialize(u.g, list(_chosen(u, order)), price)  # type: ignore[arg-type]
    return _peak(h, [u.graph.names[v] for v in order]) <= budget


def _chosen(u: Union, order: list[int]) -> tuple[Bucket, ...]:
    """The candidates whose nodes `order` (union ids) holds."""
    on = {u.graph.names[v] for v in order}
    return tuple(b for b in u.cands if b.nodes[1] in on)


def _joint_result(u: Union, out: Any, cands: Candidates, stats: dict[str, Any]) -> JointResult:
    """A solve's outcome as the joint model's result: a plan where it found one, a bound where the candidates
    are every legal bucket."""
    res = JointResult(complete=cands.complete, stats={**stats, "error": out.error} if out.error else stats)
    if out.order is not None:
        res.buckets = _chosen(u, out.order)
        res.order = [u.graph.names[v] for v in out.order]
    if cands.complete and out.bound_us is not None:
        res.bound = out.bound_us
    if out.infeasible:  # a proof that no plan is within the horizon: the start is optimal
        res.stats["infeasible_below_start"] = True
    return res


def _add_relation(out: dict[tuple[int, int], set[tuple[str, int]]], u: int, v: int,
                  *owners: tuple[str, int] | None) -> None:
    out.setdefault((u, v), set()).update(o for o in owners if o is not None)


def with_time(params: SolveParams, share: float) -> SolveParams:
    """`params` with `share` of its time (and so of its work)."""
    return replace(params, time_limit=max(0.05, share * params.time_limit),
                   work_limit=None if params.work_limit is None else max(0.01, share * params.work_limit))


__all__ = ["Candidates", "JointModel", "JointResult", "LiveBuffer", "Union", "build_joint", "candidates", "solve_joint"]
