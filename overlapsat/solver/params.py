"""The solver's options, checked once, and the one object that owns its time."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal, get_args

from overlapsat.errors import GraphError

if TYPE_CHECKING:
    from overlapsat.cost.interference import Interference

log = logging.getLogger(__name__)
CollectiveOrder = Literal["chain", "global", "group", "free"]
POLISH_NODE_VISITS_PER_SECOND = 2e6  # one polish move walks the graph about once (measured, 2 cores, 2026-11-22)


def _positive_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _positive_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


@dataclass(frozen=True)
class SolveParams:
    """Everything `optimize` can be told, validated on construction.

    time_limit: wall-clock seconds for the whole call; the outer safety net.
    work_limit: deterministic work for the search, in reference seconds (CP-SAT's
        deterministic seconds priced by `cpsat.dt_scale`, plus fixed charges for
        the Python side); default `work_per_second * time_limit`.
        In deterministic mode this, not the clock, ends the search, so the
        order is a function of the graph and these options.
    workers: CP-SAT workers with `deterministic=False` (default: min(8, CPUs)); a
        deterministic search runs one, never interleaved (decision 84), and a call
        given more says so once (decision 118).
    deterministic: same order on every run, machine and load.
    collective_order: which collective reorderings are allowed, strictest
        first (docs/solver.md, Collective order): "chain" (Inductor's fake
        deps: one collective in flight), "global" (the input's issue order of
        all collectives), "group" (each process group's input order; safe
        when a rank may fall back to Inductor's order) or "free" (any order,
        safe only when every rank applies the same solved order).
    lns_min_nodes: graphs with more nodes skip the monolithic model and are
        improved window by window only.
    lns_min_window_nodes: graphs with at least this many nodes get window
        LNS (before the monolithic model, which then tries to prove the order).
    monolithic_share: the share of the work the monolithic model gets when
        LNS runs too.
    lns_window / lns_max_window: first and largest window (positions).
    lns_window_work: CP-SAT deterministic seconds per window (charged as work at `dt_scale`).
    lns_restarts: further starts of the window search from the next best
        distinct heuristic orders, when a search converges with work left.
    portfolio_share: the share of the time limit Inductor's iterative passes
        get, counted in their own deterministic steps (`portfolio_steps`, at
        least enough to finish them on graphs of a few thousand nodes); a pass
        that reaches it stops between two moves with a valid order.
    fill_share: the share of the work (timed mode: of the time) left after the portfolio that the fill moves
        get before the CP-SAT phases (solver/fill.py, decision 96); 0: none.
    log_search: keep CP-SAT's log in `Result.stats["log"]`.
    interference: an `overlapsat.cost.Interference`: after the search, break
        the plain model's ties by the contended makespan (cost/polish.py); the
        order's plain makespan and peak memory never grow, so the status and
        bound stand. None (the default): no such pass.
    polish_evaluations: moves that pass may try (a work limit, not seconds);
        default: what takes about half of time_limit on a 2-core machine
        (each move walks the graph, so fewer on larger graphs).
    """

    time_limit: float = 10.0
    work_limit: float | None = None
    work_per_second: float = 0.5
    workers: int | None = None
    deterministic: bool = True
    collective_order: CollectiveOrder = "group"
    lns_min_nodes: int = 1200
    lns_min_window_nodes: int = 100
    monolithic_share: float = 0.3
    lns_window: int = 40
    lns_max_window: int = 640
    lns_window_work: float = 0.1
    lns_restarts: int = 2
    portfolio_share: float = 0.1
    fill_share: float = 0.8  # decision 99: a productive fill takes most; an idle one ends early, its rest flows on
    log_search: bool = False
    interference: Interference | None = None
    polish_evaluations: int | None = None

    def __post_init__(self) -> None:
        problems: list[str] = []
        from overlapsat.cost.interference import Interference

        if self.interference is not None and not isinstance(self.interference, Interference):
            problems.append(f"interference must be an overlapsat.cost.Interference or None, got "
                            f"{type(self.interference).__name__}")
        if self.polish_evaluations is not None and not _positive_int(self.polish_evaluations):
            problems.append(f"polish_evaluations must be a positive integer or None, got {self.polish_evaluations!r}")
        for name in ("time_limit", "work_per_second", "lns_window_work"):
            if not _positive_number(getattr(self, name)):
                problems.append(f"{name} must be a positive finite number, got {getattr(self, name)!r}")
        if self.work_limit is not None and not _positive_number(self.work_limit):
            problems.append(f"work_limit must be a positive finite number or None, got {self.work_limit!r}")
        if self.workers is not None and not _positive_int(self.workers):
            problems.append(f"workers must be a positive integer or None, got {self.workers!r}")
        for name in ("monolithic_share", "portfolio_share"):
            if not (_positive_number(getattr(self, name)) and getattr(self, name) <= 1):
                problems.append(f"{name} must be in (0, 1], got {getattr(self, name)!r}")
        if not (isinstance(self.fill_share, (int, float)) and not isinstance(self.fill_share, bool)
                and 0 <= self.fill_share < 1):
            problems.append(f"fill_share must be in [0, 1), got {self.fill_share!r}")
        for name in ("lns_min_nodes", "lns_min_window_nodes", "lns_window", "lns_max_window"):
            if not _positive_int(getattr(self, name)):
                problems.append(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if isinstance(self.lns_restarts, bool) or not isinstance(self.lns_restarts, int) or self.lns_restarts < 0:
            problems.append(f"lns_restarts must be an integer >= 0, got {self.lns_restarts!r}")
        if _positive_int(self.lns_window) and _positive_int(self.lns_max_window) and self.lns_max_window < self.lns_window:
            problems.append(f"lns_max_window ({self.lns_max_window}) must be >= lns_window ({self.lns_window})")
        if self.collective_order not in get_args(CollectiveOrder):
            problems.append(f"collective_order must be one of {', '.join(get_args(CollectiveOrder))}; "
                            f"got {self.collective_order!r}")
        for name in ("deterministic", "log_search"):
            if not isinstance(getattr(self, name), bool):
                problems.append(f"{name} must be True or False, got {getattr(self, name)!r}")
        if problems:
            raise GraphError(problems[0] if len(problems) == 1 else "solver options: " + "; ".join(problems),
                             problems=problems)

    def say_one_worker(self, clock: TimeBudget | None) -> None:
        """A call (not one of a caller's phases) given `workers` > 1 for a deterministic search warns that it runs one
        (decision 84): the option is kept valid, as callers pass it for both modes, but never silently dropped."""
        if clock is None and self.deterministic and self.workers is not None and self.workers > 1:
            log.warning("workers=%d: a deterministic search runs one CP-SAT worker, never interleaved (decision 84), "
                        "so that its plan is the same on any machine; pass deterministic=False to use %d",
                        self.workers, self.workers)

    @property
    def n_workers(self) -> int:
        return self.workers or min(8, max(1, os.cpu_count() or 1))

    @property
    def portfolio_steps(self) -> int:
        """Steps for the iterative passes of one portfolio run (deterministic, unlike a wall-clock cut)."""
        from overlapsat.heuristics.portfolio import ITERATIVE_STEPS_MIN, ITERATIVE_STEPS_PER_SECOND

        return max(ITERATIVE_STEPS_MIN, int(ITERATIVE_STEPS_PER_SECOND * self.portfolio_share * self.time_limit))

    def polish_moves(self, nodes: int) -> int:
        """The contention polish's work limit for a graph of `nodes` nodes (a function of the options only)."""
        if self.polish_evaluations is not None:
            return self.polish_evaluations
        return max(100, int(POLISH_NODE_VISITS_PER_SECOND * 0.5 * self.time_limit / max(1, nodes)))

    @property
    def total_work(self) -> float:
        return self.work_limit if self.work_limit is not None else self.work_per_second * self.time_limit

    @classmethod
    def from_kwargs(cls, **kw: object) -> SolveParams:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kw) - known)
        if unknown:
            raise GraphError(f"unknown solver option(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**kw)  # type: ignore[arg-type]


class TimeBudget:
    """The one clock of a call: its deadline (the time limit, a wall-clock promise in every mode, decision 57) and
    its deterministic work budget. A phase that runs under a caller's budget (`optimize` inside `optimize_plan`)
    is given `parent`: it then never ends past the parent's deadline, and what the clock cut is flagged on both."""

    def __init__(self, params: SolveParams, clock: Callable[[], float] | None = None,
                 parent: TimeBudget | None = None, started: float | None = None) -> None:
        self.clock = clock or (parent.clock if parent is not None else time.monotonic)
        self.t0 = self.clock() if started is None else started  # `started`: the call's entry, checks before it counted
        self.deterministic = params.deterministic
        self.parent = parent
        # deterministic: the work budget ends every phase, and the clock cuts (and says so) only at the time
        # limit; timed: the clock ends the search, and the work budget too only where the caller set one
        self.deadline = self.t0 + params.time_limit
        if parent is not None:  # a deterministic phase ends on its work, or at the call's deadline: never at its share
            self.deadline = parent.deadline if params.deterministic else min(self.deadline, parent.deadline)
        self.work_total = params.total_work if params.deterministic or params.work_limit is not None else math.inf
        self.work_used = 0.0
        self.phase_end: float | None = None  # timed mode: a phase's own end (`until`)
        self._interrupted = False  # Ctrl-C: stop searching, return the best order so far
        self._cut = False  # set when the clock, not the work budget, ended a search
        self.cuts_parent = True  # a cut here is the parent's too (not for a phase kept apart: `apart`)
        self.says_cuts_once = False  # the caller counts its phases' cuts and says them once (`counting_cuts`)

    @property
    def interrupted(self) -> bool:
        return self._interrupted or (self.parent is not None and self.parent.interrupted)

    @interrupted.setter
    def interrupted(self, value: bool) -> None:
        self._interrupted = value
        if value and self.parent is not None:
            self.parent.interrupted = True

    @property
    def cut_by_wall_clock(self) -> bool:
        return self._cut

    @cut_by_wall_clock.setter
    def cut_by_wall_clock(self, value: bool) -> None:
        self._cut = value
        if value and self.parent is not None and self.deterministic and self.cuts_parent:
            self.parent.cut_by_wall_clock = True

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def wall_left(self) -> float:
        end = self.deadline if self.phase_end is None else min(self.deadline, self.phase_end)
        return max(0.0, end - self.clock())

    def until(self, share: float | None) -> None:
        """Timed mode: end the current phase after `share` of the time left (None: clear); deterministic mode
        splits by work instead."""
        self.phase_end = None if share is None else self.clock() + share * max(0.0, self.deadline - self.clock())

    def work_left(self) -> float:
        return max(0.0, self.work_total - self.work_used)

    def spend(self, work: float) -> None:
        self.work_used += work

    def exhausted(self, deterministic: bool) -> bool:
        """Out of work; or out of wall time (flagged when it cuts a deterministic search); or interrupted."""
        if self.interrupted or self.work_left() <= 0:
            return True
        if self.wall_left() <= 0:
            if deterministic:
                self.cut_by_wall_clock = True
            return True
        return False

    def clock_over(self) -> bool:
        """The call's own deadline has passed (not just a phase's)."""
        return self.clock() >= self.deadline

    def cut(self, ahead: float = 0.0) -> bool:
        """Whether the deadline has passed, or will within `ahead` seconds (what a step costs before it can stop);
        in deterministic mode, flagged as a cut (the work did not end it), unless `ahead` alone is beyond the
        call's time limit: then every machine skips the step, so the answer is the same (decision 128)."""
        if self.clock() + ahead < self.deadline:
            return False
        if self.deterministic and not self.beyond_limit(ahead):
            self.cut_by_wall_clock = True
        return True

    def beyond_limit(self, seconds: float) -> bool:
        """Whether `seconds` (a step's price) take the call's whole time limit or more: no machine has room for the
        step, even at the call's first moment, so leaving it out is the same everywhere and no clock cut (decision
        128)."""
        root = self
        while root.parent is not None:
            root = root.parent
        return seconds >= root.deadline - root.t0

    @classmethod
    def entry(cls, clock: TimeBudget | None) -> float:
        """The time on the clock a call's budget will read (its caller's, else the monotonic clock): taken at the
        call's entry and given as `started`, so that what the call checks before its budget exists counts."""
        return (clock.clock if clock is not None else time.monotonic)()

    @classmethod
    def left_of(cls, time_limit: float, spent: float) -> TimeBudget:
        """A caller's clock: what is left of `time_limit` after `spent` seconds (a process's start, a file's
        loading). A call given it as its `clock` ends by that deadline, while its work budget, and so a
        deterministic answer, still follow the time limit as given."""
        return cls(SolveParams(time_limit=max(0.01, time_limit - spent)))

    def reserving(self, seconds: float) -> TimeBudget:
        """A child clock that ends `seconds` before this one (what a later phase is promised), in either mode; what
        it cuts is flagged here too. Its work budget is its own (the caller's `params` decide it)."""
        child = TimeBudget(SolveParams(time_limit=max(0.01, self.wall_left()), deterministic=self.deterministic),
                           clock=self.clock, parent=self)
        child.deadline = max(self.clock(), self.deadline - seconds)
        return child

    def apart(self) -> TimeBudget:
        """A child clock to this one's deadline whose cuts stay its own: for a phase whose result does not change
        the plan (the bound after it), so that a cut there is said of that phase, not of the plan (decision 98)."""
        child = self.reserving(0.0)
        child.cuts_parent = False
        return child

    def counting_cuts(self) -> TimeBudget:
        """A child clock to this one's deadline for many short searches (a plan's every bucketing): each logs its
        cut at info, and the caller, which counts them, warns once; the cuts are this one's too."""
        child = self.reserving(0.0)
        child.says_cuts_once = True
        return child

    @property
    def cut_said_by_caller(self) -> bool:
        """Whether a cut of a search on this budget is its caller's to report: a clock kept apart (`apart`), whose
        caller's notes say it, or one that counts its searches' cuts (`counting_cuts`)."""
        return self.parent is not None and (not self.parent.cuts_parent or self.parent.says_cuts_once)

    def monotonic(self, at: float) -> float:
        """`at` on this budget's clock as a `time.monotonic()` time (what the portfolio reads its deadline on),
        never before now."""
        return time.monotonic() + max(0.0, at - self.clock())

    def at(self, share: float) -> float:
        """The wall-clock time (`clock()`'s) at `share` of this budget's time, never past its deadline."""
        return min(self.deadline, self.t0 + share * (self.deadline - self.t0))
