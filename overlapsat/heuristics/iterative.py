"""Inductor's iterative passes: reorder_communication_preserving_peak_memory and sink_waits_iterative.

Behaviour of torch 2.13 (`comms._reorder_communication_preserving_peak_memory_internal`,
`comms._sink_waits_iterative_internal`) on the graph model, including its
incremental memory bookkeeping, whose approximations decide when a move is
refused (see docs/heuristics.md for the quirks kept on purpose). The order is
a doubly linked list of node ids; each collective (wait) is moved earlier
(later) by swapping it, together with the nodes it had to group with, past
one neighbour at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, WAIT, Graph
from overlapsat.heuristics.base import PassResult, start_order, validated
from overlapsat.simulate import memory_curve


@dataclass(frozen=True)
class IterativeConfig:
    """The knobs of torch's `config_comms` for one iterative pass (torch defaults)."""

    peak_memory_budget: float = 0.2
    use_runtime_estimations: bool = False
    extra_comm_comp_overlap: float = 0.5
    unsafe_collectives_reorder: bool = True
    with_collectives: bool = False  # reorder: group with collectives; sink: swap with collectives
    comm_mult: float = 2.0
    non_comm_mult: float = 1.0

    def __post_init__(self) -> None:
        for f in ("peak_memory_budget", "extra_comm_comp_overlap", "comm_mult", "non_comm_mult"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise GraphError(f"IterativeConfig.{f} must be a finite number >= 0, got {v!r}")


@dataclass
class MoveInfo:
    """Per-collective (per-wait) statistics, as torch's ReorderInfo / SinkWaitInfo."""

    grouped: int = 0
    moves: int = 0
    limiting_factor: str = "None"
    comm_time: float = -1.0
    comp_time: float = -1.0
    initial_exposed: float = -1.0
    final_exposed: float = -1.0

    @property
    def improvement(self) -> float:
        return self.initial_exposed - self.final_exposed

    def as_dict(self) -> dict[str, object]:
        """The fields and the improvement (every field is a scalar: `asdict`'s deep copy took 3 s at 100k nodes)."""
        return {**vars(self), "improvement": self.improvement}


@dataclass
class _State:
    """Linked list plus torch's incremental memory bookkeeping."""

    g: Graph
    prev: list[int]
    next: list[int]
    head: int
    rt: list[float]
    cur: list[list[int]]  # node -> [post_alloc, post_free]
    af: list[list[int]]  # node -> [size_alloc, size_free] at its step
    last_use: dict[int, int]  # tracked buffer -> node that frees it
    cand_bufs: list[list[int]]  # node -> tracked buffers it reads
    peak: int
    dsets: list[frozenset[int]] = field(default_factory=list)
    steps: int = 0  # deterministic work: list positions visited
    work_limit: int | None = None

    def over(self) -> bool:
        return self.work_limit is not None and self.steps > self.work_limit

    def segment(self, a: int, b: int) -> list[int]:
        out = [a]
        while a != b:
            a = self.next[a]
            out.append(a)
        self.steps += len(out)
        return out

    def swap(self, lh: int, lt: int, rh: int, rt: int) -> None:
        """Exchange two adjacent segments: [lh..lt][rh..rt] -> [rh..rt][lh..lt]."""
        p, q = self.prev[lh], self.next[rt]
        if p != -1:
            self.next[p] = rh
        else:
            self.head = rh
        self.prev[rh] = p
        self.next[rt], self.prev[lh] = lh, rt
        self.next[lt] = q
        if q != -1:
            self.prev[q] = lt

    def order(self) -> list[int]:
        out = []
        v = self.head
        while v != -1:
            out.append(v)
            v = self.next[v]
        return out

    def coll_exposed(self, c: int) -> tuple[float, float]:
        """comm time of c, compute issued after it before something needs it."""
        kind, rt, dsets = self.g.kind, self.rt, self.dsets
        comp = 0.0
        s = self.next[c]
        while s != -1:
            self.steps += 1
            if c in dsets[s]:
                break
            if kind[s] != COLLECTIVE:
                comp += rt[s]
            s = self.next[s]
        return rt[c], comp

    def wait_exposed(self, w: int) -> tuple[float, float]:
        """comm time of w's collective, compute between them (reset past nested pairs)."""
        kind, rt, dsets = self.g.kind, self.rt, self.dsets
        comm = comp = 0.0
        nested: set[int] = set()  # what the waits passed read directly: a collective among them is nested
        s = self.prev[w]
        while s != -1:
            self.steps += 1
            if kind[s] == WAIT:
                nested.update(dsets[s])
            if kind[s] == COLLECTIVE:
                if s in dsets[w]:
                    comm = rt[s]
                    break
                if s in nested:
                    comp = 0.0
                s = self.prev[s]
                continue
            comp += rt[s]
            s = self.prev[s]
        return comm, comp


def _init(g: Graph, ids: list[int], cfg: IterativeConfig, work_limit: int | None) -> _State:
    n = len(g.nodes)
    prev = [-1] * n
    nxt = [-1] * n
    for a, b in zip(ids, ids[1:]):
        nxt[a] = b
        prev[b] = a
    rt = [g.port_dur[v] * (cfg.comm_mult if g.kind[v] == COLLECTIVE else cfg.non_comm_mult) for v in range(n)]
    post_alloc, post_free = memory_curve(g, ids)
    cur = [[0, 0] for _ in range(n)]
    for s, v in enumerate(ids):
        cur[v] = [post_alloc[s], post_free[s]]
    pos = [0] * n
    for s, v in enumerate(ids):
        pos[v] = s
    af = [[0, 0] for _ in range(n)]
    last_use: dict[int, int] = {}
    cand_bufs: list[list[int]] = [[] for _ in range(n)]
    first = ids[0] if ids else -1
    for j in range(len(g.buffers)):
        p = g.b_prod[j]
        if p >= 0:
            af[p][0] += g.b_alloc[j]
        elif g.b_fin[j]:
            af[first][0] += g.b_free[j]
        else:
            continue
        if g.b_out[j]:
            continue
        cons = g.b_cons[j]
        lu = max(cons, key=lambda c: pos[c]) if cons else (p if p >= 0 else first)
        last_use[j] = lu
        af[lu][1] += g.b_free[j]
        for c in cons:
            cand_bufs[c].append(j)
    peak = max(0, max(post_alloc)) if post_alloc else 0
    st = _State(g, prev, nxt, ids[0] if ids else -1, rt, cur, af, last_use, cand_bufs, peak)
    st.dsets = [frozenset(p) for p in g.data_preds]
    st.work_limit = work_limit
    return st


def _run_stats(st: _State) -> dict[str, object]:
    """What every iterative pass reports about its work, and whether the work limit cut it short."""
    return {"work_steps": st.steps, "interrupted": st.over()}


def _flush(cur: list[list[int]], members: list[int], off: int) -> int:
    """Apply a pending group shift. Torch shifts every group node on each swap;
    doing it lazily keeps a move O(1) instead of O(group size)."""
    if off:
        for v in members:
            cur[v][0] += off
            cur[v][1] += off
    return 0


def _gemm_like(g: Graph, v: int) -> bool:
    return g.nodes[v].gemm_like


@validated
def reorder_communication_preserving_peak_memory(
    g: Graph, order: Sequence[str | int] | None = None, config: IterativeConfig | None = None,
    work_limit: int | None = None,
) -> PassResult:
    """Move each collective earlier, swap by swap, while the peak stays within budget.

    The pass is quadratic in the worst case; `work_limit` (list positions
    visited) stops it between two moves, where the order is still valid.
    """
    cfg = config or IterativeConfig()
    ids = start_order(g, order)
    kind = g.kind
    if not any(kind[v] == COLLECTIVE for v in ids):
        return PassResult("reorder_communication_preserving_peak_memory", ids, {"per_collective": {}})
    st = _init(g, ids, cfg, work_limit)
    prev, nxt, cur, af, rt = st.prev, st.next, st.cur, st.af, st.rt
    stats: dict[int, MoveInfo] = {}
    limit_ratio = cfg.extra_comm_comp_overlap
    curr = st.head
    while curr != -1 and nxt[curr] != -1 and not st.over():
        next_curr = nxt[curr]
        if kind[curr] != COLLECTIVE:
            curr = next_curr
            continue
        info = stats[curr] = MoveInfo()
        info.comm_time, info.comp_time = st.coll_exposed(curr)
        info.initial_exposed = info.final_exposed = info.comm_time - info.comp_time
        cand = prev[curr]
        group_head = group_tail = curr
        group_waits: dict[int, tuple[float, float]] = {}
        group_runtime = 0.0
        group_peak = cur[curr][0]
        group_deps = set(st.dsets[curr])
        members = [curr]  # group, last to first
        gset = {curr}
        off = 0  # pending shift of the group's memory levels (applied lazily, see _flush)
        while cand != -1:
            st.steps += 1
            if st.over():
                info.limiting_factor = "work limit"
                break
            if cfg.use_runtime_estimations and info.final_exposed < -limit_ratio * info.comm_time:
                info.limiting_factor = "unexposed by runtime estimations"
                break
            if not cfg.unsafe_collectives_reorder and kind[cand] == COLLECTIVE:
                info.limiting_factor = "collective ordering"
                break
            if cand in group_deps:
                if kind[cand] == COLLECTIVE and not cfg.with_collectives:
                    info.limiting_factor = f"data dependency on collective {g.names[cand]!r}"
                    break
                if not cfg.use_runtime_estimations and _gemm_like(g, cand):
                    info.limiting_factor = f"data dependency on gemm-like {g.names[cand]!r}"
                    break
                group_head = cand
                group_deps.update(st.dsets[cand])
                members.append(cand)
                gset.add(cand)
                if cfg.use_runtime_estimations:
                    if kind[cand] == WAIT:
                        group_waits[cand] = st.wait_exposed(cand)
                    if kind[cand] != COLLECTIVE:
                        group_runtime += rt[cand]
                group_peak = max(group_peak, cur[cand][0])
                cur[cand][0] -= off
                cur[cand][1] -= off
                info.grouped += 1
                cand = prev[cand]
                continue
            if cfg.use_runtime_estimations:
                if kind[cand] != COLLECTIVE:
                    c_rt = rt[cand]
                    if c_rt > 0 and group_waits:
                        ex = info.comm_time - info.comp_time
                        delta = max(0.0, ex - c_rt) - max(0.0, ex)
                        for gc, gp in group_waits.values():
                            delta += max(0.0, gc - gp + c_rt) - max(0.0, gc - gp)
                        if delta > 0:
                            info.limiting_factor = f"candidate has compute {c_rt}, group contains waits"
                            break
                        group_waits = {k: (gc, gp - c_rt) for k, (gc, gp) in group_waits.items()}
                elif group_runtime > 0:
                    ct, cp = st.coll_exposed(cand)
                    if max(0.0, ct - cp + group_runtime) - max(0.0, ct - cp) > 0:
                        info.limiting_factor = f"candidate {g.names[cand]!r} is a collective that would be exposed"
                        break
            c_alloc, c_free = af[cand]
            c_delta = c_alloc - c_free
            changed: dict[int, list[int]] = {}
            for b in st.cand_bufs[cand]:
                lu = st.last_use[b]
                if lu in gset:
                    changed.setdefault(lu, []).append(b)
            upd: dict[int, int] = {}
            tail_free = cur[group_tail][1] + off
            if not changed:
                potential = max(group_peak - c_delta, tail_free - c_delta + c_alloc)
            else:
                off = _flush(cur, members, off)
                st.steps += len(members)
                potential = 0
                d = -c_delta
                for gn in reversed(members):
                    pa = cur[gn][0] + d
                    upd[gn] = pa
                    potential = max(potential, pa)
                    for b in changed.get(gn, ()):
                        d += g.b_free[b]
                upd[cand] = tail_free + d + c_alloc
                potential = max(potential, upd[cand])
            if potential - st.peak > st.peak * cfg.peak_memory_budget:
                info.limiting_factor = f"peak memory new:{potential} vs base:{st.peak}"
                break
            info.moves += 1
            st.swap(cand, cand, group_head, group_tail)  # [cand][group] -> [group][cand]
            if cfg.use_runtime_estimations:
                info.comm_time, info.comp_time = st.coll_exposed(curr)
            elif kind[cand] != COLLECTIVE:
                info.comp_time += rt[cand]
            info.final_exposed = info.comm_time - info.comp_time
            # memory bookkeeping after the swap
            if not changed:
                off -= c_delta
                pa = cur[group_tail][1] + off + c_alloc
                cur[cand] = [pa, pa - c_free]
            else:
                for bufs in changed.values():
                    for b in bufs:
                        st.last_use[b] = cand
                moved = 0
                for gn in members:
                    m = sum(g.b_free[b] for b in changed.get(gn, ()))
                    moved += m
                    af[gn][1] -= m
                    cur[gn] = [upd[gn], upd[gn] - af[gn][1]]
                af[cand][1] += moved
                cur[cand] = [upd[cand], upd[cand] - af[cand][1]]
            cand = prev[group_head]
        _flush(cur, members, off)
        curr = next_curr
    per = {g.names[c]: i.as_dict() for c, i in stats.items()}
    return PassResult("reorder_communication_preserving_peak_memory", st.order(),
                      {"per_collective": per, "peak_memory_before": st.peak, "config": asdict(cfg), **_run_stats(st)})


@validated
def sink_waits_iterative(g: Graph, order: Sequence[str | int] | None = None,
                         config: IterativeConfig | None = None, work_limit: int | None = None) -> PassResult:
    """Move each wait later, swap by swap, while the peak stays within budget (`work_limit`: as the reorder pass)."""
    cfg = config or IterativeConfig()
    ids = start_order(g, order)
    if not ids:
        return PassResult("sink_waits_iterative", ids, {"per_wait": {}})
    kind = g.kind
    st = _init(g, ids, cfg, work_limit)
    prev, nxt, cur, af, rt = st.prev, st.next, st.cur, st.af, st.rt
    stats: dict[int, MoveInfo] = {}
    processed: set[int] = set()
    curr = ids[-1]
    while curr != -1 and prev[curr] != -1 and not st.over():
        prev_curr = prev[curr]
        if not (kind[curr] == WAIT and curr not in processed):
            curr = prev_curr
            continue
        processed.add(curr)
        info = stats[curr] = MoveInfo()
        info.comm_time, info.comp_time = st.wait_exposed(curr)
        info.initial_exposed = info.final_exposed = info.comm_time - info.comp_time
        cand = nxt[curr]
        group_head = group_tail = curr
        group_runtime = 0.0
        group_peak = cur[curr][0]
        group = {curr}
        group_has_coll = kind[curr] == COLLECTIVE
        while cand != -1:
            st.steps += 1
            if st.over():
                info.limiting_factor = "work limit"
                break
            if cfg.use_runtime_estimations and info.final_exposed < -cfg.extra_comm_comp_overlap * info.comm_time:
                info.limiting_factor = "unexposed by runtime estimations"
                break
            data_dep = any(p in group for p in st.dsets[cand])
            if not cfg.with_collectives and kind[cand] == COLLECTIVE:
                info.limiting_factor = f"candidate contains_async_collective {g.names[cand]}"
                break
            both = group_has_coll and kind[cand] == COLLECTIVE
            if data_dep or both:
                groupable = kind[cand] != WAIT and kind[cand] != COLLECTIVE and (
                    cfg.use_runtime_estimations or not _gemm_like(g, cand))
                if groupable:
                    group_tail = cand
                    group.add(cand)
                    group_peak = max(group_peak, cur[cand][0])
                    info.grouped += 1
                    cand = nxt[cand]
                    continue
                if data_dep:
                    info.limiting_factor = f"data dependency on {g.names[cand]!r}"
                    break
                if not cfg.unsafe_collectives_reorder and both:
                    info.limiting_factor = f"collective ordering with candidate {g.names[cand]}"
                    break
            if cfg.use_runtime_estimations and kind[cand] == WAIT:
                ct, cp = st.wait_exposed(cand)
                if max(0.0, ct - cp + group_runtime) > max(0.0, ct - cp):
                    info.limiting_factor = "candidate is a wait that would be exposed"
                    break
            gns = st.segment(group_head, group_tail)
            c_alloc, c_free = af[cand]
            c_delta = c_alloc - c_free
            changed: dict[int, list[int]] = {}
            for b in st.cand_bufs[cand]:
                if st.last_use[b] != cand:
                    continue
                cons = set(g.b_cons[b])
                last_gn = -1
                for gn in gns:
                    if gn in cons:
                        last_gn = gn
                if last_gn != -1:
                    changed.setdefault(last_gn, []).append(b)
            pre = cur[group_head][0] - af[group_head][0]
            upd: dict[int, int] = {}
            sfd: dict[int, int] = {}
            if not changed:
                potential = max(group_peak + c_delta, pre + c_alloc)
            else:
                upd[cand] = potential = pre + c_alloc
                move = sum(g.b_free[b] for bufs in changed.values() for b in bufs)
                sfd[cand] = -move
                d = c_delta + move
                for gn in gns:
                    pa = cur[gn][0] + d
                    upd[gn] = pa
                    potential = max(potential, pa)
                    add = 0
                    if gn in changed:
                        add = sum(g.b_free[b] for b in changed[gn])
                        sfd[gn] = add
                    d -= add
            if potential - st.peak > st.peak * cfg.peak_memory_budget:
                info.limiting_factor = f"peak memory new:{potential} vs base:{st.peak}"
                break
            info.moves += 1
            st.swap(group_head, group_tail, cand, cand)  # [group][cand] -> [cand][group]
            if cfg.use_runtime_estimations or kind[cand] == WAIT:
                info.comm_time, info.comp_time = st.wait_exposed(curr)
            elif kind[cand] != COLLECTIVE:
                info.comp_time += rt[cand]
            info.final_exposed = info.comm_time - info.comp_time
            if not changed:
                pa = pre + c_alloc
                cur[cand] = [pa, pa - c_free]
                for gn in gns:
                    cur[gn][0] += c_delta
                    cur[gn][1] += c_delta
            else:
                for v in (cand, *gns):
                    af[v][1] += sfd.get(v, 0)
                    cur[v] = [upd[v], upd[v] - af[v][1]]
            cand = nxt[group_tail]
        curr = prev_curr
    per = {g.names[w]: i.as_dict() for w, i in stats.items()}
    return PassResult("sink_waits_iterative", st.order(),
                      {"per_wait": per, "peak_memory_before": st.peak, "config": asdict(cfg), **_run_stats(st)})
