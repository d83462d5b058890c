"""Model time units: the one place where durations are rounded.

A duration of d us becomes `floor(d * steps_per_us)` resolution steps (or
the nearest whole number, when the product is within float noise of it), and a
step is `k` model units. Every node also owns a slot on the compute stream
of its work (a kernel's duration, a collective's launch, a wait's own time,
decisions.md 17); nodes whose work is zero steps ("unit slots") take one unit.
With `k` larger than the number of unit slots, the slots can never add up to
one step, which makes the bound conversion exact (docs/solver.md, Soundness):

    K * sim_floor(O) <= units(O) <= K * sim_floor(O) + unit_slots

where sim_floor is the simulation with the rounded durations, in steps.
Floored durations never exceed the true ones; snapped ones exceed them by at
most `round_up_us` in all (float noise, summed). The makespan is a max of
sums of durations along paths, so res * sim_floor(O) <= sim(O) + round_up_us,
and

    sim(O) >= res * ceil((B - unit_slots) / K) - round_up_us

for any order O and any proven lower bound B on the model's objective. When
every duration is a whole number of steps, this bound equals the optimum (up
to that noise) whenever CP-SAT proves optimality.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, WAIT, Graph

MAX_UNITS = 2**50  # keeps every model value exact in a double (CP-SAT's LP)
SEARCH_UNITS = 4 * 10**6  # above this horizon, memory proofs and LNS windows get slow (docs/solver.md)
EXACT_UNITS = 2**40  # without a budget, whole-graph solves stay as fast at this scale
MAX_STEPS_PER_US = 10**6  # 1 ps: finer than any cost model
# a product d * per within this (relative) of a whole number is that number: the float noise of representing a
# rational duration. It was 1e-9 once, which snapped 7.123456789 us up to 577/81 us, 1.2e-9 us too long, and
# gave a bound above the optimum (a seed of tests/test_multiwait.py); rounding up is now also paid back in
# `TimeScale.round_up_us`.
FLOAT_TOL = 1e-12
_NOISE = 4 * 2.0**-52  # a few ulps: the error of the float product itself


def _steps(d: float, per_us: int) -> int:
    x = d * per_us
    r = round(x)
    if abs(x - r) <= FLOAT_TOL * max(1.0, abs(x)):
        return int(r)  # exact up to float noise in the product
    return math.floor(x)


def _round_up(d: float, per_us: int) -> float:
    """How many steps longer `_steps` makes d than it is, at most (0 when it floors clearly)."""
    x = d * per_us
    r = _steps(d, per_us)
    return max(0.0, r - x) + _NOISE * abs(x) if r == round(x) else 0.0


def _exact(d: float, per_us: int) -> bool:
    x = d * per_us
    return abs(x - round(x)) <= FLOAT_TOL * max(1.0, abs(x))


def _common_denominator(durs: list[float]) -> int | None:
    """The least steps-per-us at which every duration is whole (None if above 10**6)."""
    per = 1
    for d in set(durs):  # durations repeat: each distinct value once
        fr = Fraction(d).limit_denominator(MAX_STEPS_PER_US)
        if not _exact(d, fr.denominator):
            return None
        per = per * fr.denominator // math.gcd(per, fr.denominator)
        if per > MAX_STEPS_PER_US:
            return None
    return per


@dataclass(frozen=True)
class TimeScale:
    """`steps_per_us` resolution steps per microsecond, `k` model units per step."""

    steps_per_us: int
    k: int
    unit_slots: int  # nodes whose compute-stream work is zero steps
    exact: bool  # every duration is a whole number of steps
    round_up_us: float = 0.0  # what snapping float noise to whole steps may have added, summed over durations

    @property
    def resolution_us(self) -> float:
        return 1.0 / self.steps_per_us

    def steps(self, d: float) -> int:
        return _steps(d, self.steps_per_us)

    def slot(self, g: Graph, v: int) -> int:
        """Length of v's slot on the compute stream: its work (kernel, launch, a wait's own time; a wait's
        slot also spans its stall), or one unit when that is zero steps."""
        s = self.steps(g.work[v])
        return s * self.k if s > 0 else 1

    def work(self, g: Graph, v: int) -> int:
        """v's work in units (0 when zero steps): a transfer starts `work` after its collective's issue, a
        wait's slot ends `work` after its collective's transfer."""
        return self.steps(g.work[v]) * self.k

    def transfer(self, g: Graph, c: int) -> int:
        return self.steps(g.dur[c]) * self.k

    def bound_us(self, model_bound: int) -> float:
        """A lower bound on any order's simulated makespan from a proven model bound."""
        steps = max(0, -(-(model_bound - self.unit_slots) // self.k))  # ceil division
        return max(0.0, steps / self.steps_per_us - self.round_up_us)


def choose_scale(g: Graph, max_units: int = SEARCH_UNITS) -> TimeScale:
    """The coarsest resolution at which every duration is exact, with `k` > unit slots,
    as long as the horizon stays within `max_units`; else 0.01 us (or coarser) and k = 1.

    CP-SAT proves bounds on time-indexed propagation in steps of one unit, so
    its proofs slow down in proportion to the horizon (measured in
    docs/solver.md); the bound stays sound at any scale (module docstring),
    only its tightness changes.
    """
    durs = [d for d in g.work if d > 0] + [d for d, k in zip(g.dur, g.kind) if k == COLLECTIVE and d > 0]
    total = math.fsum(durs)

    def make(per: int, with_k: bool) -> TimeScale:
        unit_slots = sum(1 for d in g.work if _steps(d, per) == 0)  # slots of one unit that no work pays for
        up = math.fsum(_round_up(d, per) for d in durs) / per
        return TimeScale(per, unit_slots + 1 if with_k else 1, unit_slots, all(_exact(d, per) for d in durs), up)

    def units(ts: TimeScale) -> float:
        return (total * ts.steps_per_us + 1) * ts.k + ts.unit_slots

    per = _common_denominator(durs)
    if per is not None:
        for with_k in (True, False):
            ts = make(per, with_k)
            if units(ts) <= max_units:
                return ts
    for per in (100, 10, 1):
        ts = make(per, False)
        if units(ts) <= max_units:
            return ts
    ts = make(1, False)
    if units(ts) > MAX_UNITS:
        raise GraphError(f"graph {g.name!r}: {total:.3g} us of work with {len(g.nodes)} nodes is too long for the "
                         "CP-SAT model's integer time (1 us resolution)")
    return ts


@dataclass
class UnitWalk:
    """MODEL.md's walk of an order, in model units: the hint, and the LNS windows' boundaries."""

    issue: list[int]
    slot_end: list[int]
    comm_start: dict[int, int]
    comm_end: dict[int, int]
    clock_before: list[int]  # compute clock before each position of the order
    free_before: list[list[int]]  # each group's stream, before each position
    makespan: int
    pos: list[int]  # position of each node in the order
    live_before: list[int] | None = None  # live bytes before each position; filled by the memory family on first use


def unit_lengths(g: Graph, ts: TimeScale) -> tuple[list[int], list[int], list[int]]:
    """Each node's slot, transfer and work length in units, computed once per graph and scale."""
    cache = g._cache.setdefault("unit_lengths", {})
    if ts not in cache:
        cache[ts] = ([ts.slot(g, v) for v in range(len(g.nodes))],
                     [ts.transfer(g, v) if g.kind[v] == COLLECTIVE else 0 for v in range(len(g.nodes))],
                     [ts.work(g, v) for v in range(len(g.nodes))])
    return cache[ts]


def unit_walk(g: Graph, order: list[int], ts: TimeScale) -> UnitWalk:
    n = len(g.nodes)
    slot, transfer, work = unit_lengths(g, ts)
    kind, group_id, coll_of = g.kind, g.group_id, g.coll_of
    issue, slot_end = [0] * n, [0] * n
    cstart: dict[int, int] = {}
    cend: dict[int, int] = {}
    free = [0] * len(g.groups)
    clock_before: list[int] = []
    free_before: list[list[int]] = []
    t = 0
    for v in order:
        clock_before.append(t)
        free_before.append(free[:])
        issue[v] = t
        k = kind[v]
        if k == COLLECTIVE:
            gi = group_id[v]
            s = t + work[v]  # after its launch
            s = s if s > free[gi] else free[gi]
            cstart[v] = s
            cend[v] = free[gi] = s + transfer[v]
            t += slot[v]
        elif k == WAIT:
            e = cend[coll_of[v]] + work[v]  # its own time runs after its collective
            t = t + slot[v] if t + slot[v] > e else e
        else:
            t += slot[v]
        slot_end[v] = t
    pos = [0] * n
    for k, v in enumerate(order):
        pos[v] = k
    return UnitWalk(issue, slot_end, cstart, cend, clock_before, free_before, max([t, *cend.values()]), pos)


def safe_horizon(g: Graph, ts: TimeScale) -> int:
    """Model makespan no order can exceed: every slot plus every transfer, end to end."""
    slot, transfer, _ = unit_lengths(g, ts)
    return sum(slot) + sum(transfer)


def model_units(g: Graph, order: list[int], ts: TimeScale) -> int:
    """The model's makespan for an order (what the hint's objective is)."""
    return unit_walk(g, order, ts).makespan
