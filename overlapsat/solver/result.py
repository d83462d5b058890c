"""What a search returns: a `Result` (the best valid order or plan, its proven bound and status), and the
progress and stopping rules a caller may pass (PyVRP's `Result` and stopping criteria are the models)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

from overlapsat.errors import GraphError
from overlapsat.evaluate import Evaluated
from overlapsat.graph import Graph
from overlapsat.plan import Bucket, Plan

REL_TOL = 1e-9  # float noise of the simulator's sums; the only slack in an optimality claim


class Status(str, Enum):
    OPTIMAL = "optimal"  # the solver's order meets a proven bound
    IMPROVED = "improved"  # better than every heuristic, not proven optimal
    HEURISTIC_TIMEOUT = "heuristic_timeout"  # the solver found nothing better: a heuristic order, not proven
    HEURISTIC_OPTIMAL = "heuristic_optimal"  # a heuristic order meets a proven bound
    HEURISTIC_SOLVER_ERROR = "heuristic_solver_error"  # the solver failed; the best heuristic order
    INTERRUPTED = "interrupted"  # Ctrl-C: the best valid order found so far, not proven


def meets(makespan: float, bound: float) -> bool:
    """The one test behind every optimality claim and a zero gap."""
    return makespan - bound <= REL_TOL * max(1.0, abs(makespan))


@dataclass
class Progress:
    elapsed_s: float
    makespan_us: float  # the best valid order's (inf while none is known)
    bound_us: float
    phase: str = "search"  # heuristics | model | lns | polish | done (what `on_phase` reports)


class StoppingRule(Protocol):
    """Called on every improvement; returning True stops the search early."""

    def __call__(self, progress: Progress) -> bool: ...


@dataclass(frozen=True)
class GapBelow:
    """Stop once (makespan - bound) / makespan is at most `ratio`."""

    ratio: float

    def __post_init__(self) -> None:
        if not (isinstance(self.ratio, (int, float)) and 0 <= self.ratio < 1):
            raise GraphError(f"GapBelow.ratio must be in [0, 1), got {self.ratio!r}")

    def __call__(self, progress: Progress) -> bool:
        return progress.makespan_us <= 0 or (progress.makespan_us - progress.bound_us) / progress.makespan_us <= self.ratio


@dataclass(frozen=True)
class PlanInfo:
    """A plan's own figures (`Result.plan_info`; None for an order): how its buckets are issued, what the best
    unbucketed order found takes, the chosen bucketing's own status and bound over its orders, what the bound over
    every plan covers, and where the plan came from when not from the search itself."""

    layout: str = "copy"  # "copy" or "coalesced" (decision 55)
    unbucketed_us: float | None = None  # the best unbucketed order found (None: none judged)
    bucketing_status: str = ""  # `optimize`'s status over the chosen bucketing's orders
    bucketing_bound_us: float = 0.0  # and its bound there
    bound_scope: str = ""  # what `Result.bound` holds over
    bound_notes: tuple[str, ...] = ()  # the relaxation's notes
    every_bucketing: int | None = None  # where every legal bucketing was ordered: how many
    kept: str = ""  # "unbucketed" or a solved bucketing's name, where the caller's was shorter than the search's
    depends_on_input_order: bool = False  # torch's buckets of the given node order, or the passes from it, won
    copy_engine: int | None = None  # with a transport table: the collectives that take the copy engine
    offered: int | None = None  # and the all_gathers it offers the copy engine to
    scored: int = 0  # bucketings the search scored
    moves_kept: int = 0  # bucket moves it kept
    starts: dict[str, float] = field(default_factory=dict)  # warm starts: the best order's makespan on each (us)
    budget_source: str = "none"  # the budget's origin: "given", "the input order's peak (the default)" or "none"
    no_bucket_reason: str = ""  # a plan without buckets: why (nothing may merge, the cap, the budget, no gain)
    # the best order of the relaxation over every bucketing found within the budget, where it was ordered: no bound
    # from the relaxation passes it (decision 113; None: not ordered)
    relaxation_reach_us: float | None = None


@dataclass(frozen=True)
class Statistics:
    """How a search went (`Result.stats`): what found the best order, the input order's figures, the heuristics'
    table, the budget it ran under, a remark, whether the clock cut a deterministic run, the peers' bucketings
    judged (plans), and each phase's own figures by name (`phases`; `stats["plan"]` reads them as a mapping)."""

    method: str = ""
    baseline: dict[str, float] = field(default_factory=dict)  # the input order's makespan, exposed and peak
    heuristics: list[dict[str, Any]] = field(default_factory=list)
    memory_budget: int | None = None
    message: str = ""
    cut_by_wall_clock: bool = False  # deterministic mode: the clock, not the work limit, ended the search
    rows: dict[str, Evaluated] = field(default_factory=dict)  # plans: the peers' bucketings judged, by name
    phases: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.phases[key]

    def __contains__(self, key: object) -> bool:
        return key in self.phases

    def get(self, key: str, default: Any = None) -> Any:
        return self.phases.get(key, default)


@dataclass
class Result:
    """The best valid plan found (`best`: its order, and its buckets where buckets were searched, simulated and
    validated: the one source of its figures), the proven bound, the status, what stopped the search, and its
    typed statistics: PyVRP's `Result` is the size aimed at. `optimize` returns one over the orders of one graph;
    `optimize_plan` one over every bucketing and order (`plan_info` set: `bound`, `status` and `gap` hold over
    every plan, as `plan_info.bound_scope` says, and `plan_info` holds the plan's own figures)."""

    graph: Graph  # the graph as given (for orders, `best` walks the same nodes, ids and names)
    best: Evaluated
    status: Status
    bound: float  # proven lower bound on the makespan of any valid order (over "plans": of any plan)
    stopped_by: str  # what ended the search: proof | work | clock | interrupt | rule
    stats: Statistics = field(default_factory=Statistics)
    plan_info: PlanInfo | None = None  # plans: the plan's own figures

    def with_stats(self, **changes: Any) -> Result:
        """This result with some of its statistics replaced."""
        return replace(self, stats=replace(self.stats, **changes))

    # the statistics under the names they had as fields
    @property
    def method(self) -> str:
        return self.stats.method

    @property
    def baseline(self) -> dict[str, float]:
        return self.stats.baseline

    @property
    def heuristics(self) -> list[dict[str, Any]]:
        return self.stats.heuristics

    @property
    def memory_budget(self) -> int | None:
        return self.stats.memory_budget

    @property
    def message(self) -> str:
        return self.stats.message

    @property
    def cut_by_wall_clock(self) -> bool:
        return self.stats.cut_by_wall_clock

    @property
    def rows(self) -> dict[str, Evaluated]:
        return self.stats.rows

    @property
    def over(self) -> str:
        """What `bound` holds over: "orders" (of `graph`) or "plans" (every bucketing and order)."""
        return "orders" if self.plan_info is None else "plans"

    @property
    def order(self) -> list[int]:
        return self.best.order

    @property
    def makespan(self) -> float:
        return self.best.makespan

    @property
    def exposed(self) -> float:
        return self.best.exposed

    @property
    def peak_memory(self) -> int:
        return self.best.peak_memory

    @property
    def evaluated(self) -> Evaluated:
        """`best` (the name it had)."""
        return self.best

    @property
    def names(self) -> list[str]:
        """The order by name (of the bucketed graph, for a plan)."""
        return self.best.names()

    @property
    def buckets(self) -> tuple[Bucket, ...]:
        return self.best.buckets

    @property
    def bucketed(self) -> Graph:
        """The graph the order is of: `graph` relaxed, or for a plan the graph its buckets make."""
        return self.best.graph

    @property
    def transports(self) -> tuple[str, ...]:
        """The collectives the plan moves to the copy engine (empty for an order); `plan` would fingerprint."""
        return tuple(self.best.transports)

    @property
    def plan(self) -> Plan:
        """The order by name, the buckets and transports, and the fingerprint of the graph as given."""
        return Plan(tuple(self.names), self.best.buckets, self.graph.fingerprint(), self.best.transports, self.layout)

    @property
    def layout(self) -> str:
        """How the plan's buckets are issued ("copy" or "coalesced", decision 55); "copy" for an order."""
        return self.plan_info.layout if self.plan_info is not None else "copy"

    @property
    def unbucketed(self) -> float:
        """The best unbucketed order's makespan found (us; inf: none judged). For orders, the makespan."""
        if self.over != "plans":
            return self.makespan
        u = self.plan_info.unbucketed_us if self.plan_info is not None else None
        return math.inf if u is None else u

    @property
    def bought(self) -> float:
        """What bucketing bought: the best unbucketed order's makespan less this one's (us; < 0: it lost)."""
        return self.unbucketed - self.makespan

    def __repr__(self) -> str:  # the order and the heuristics' table run to megabytes on large graphs
        return (f"Result(graph={self.graph.name!r}, status={self.status.value!r}, method={self.method!r}, "
                f"makespan_us={self.makespan:.3f}, exposed_us={self.exposed:.3f}, bound_us={self.bound:.3f}, "
                f"over={self.over!r}, buckets={len(self.buckets)}, gap={self.gap:.4f}, "
                f"peak_memory_bytes={self.peak_memory})")

    # the same figures with their units in the name
    @property
    def makespan_us(self) -> float:
        return self.makespan

    @property
    def exposed_us(self) -> float:
        return self.exposed

    @property
    def bound_us(self) -> float:
        return self.bound

    @property
    def exposed_bound_us(self) -> float:
        return self.exposed_bound

    @property
    def peak_memory_bytes(self) -> int:
        return self.peak_memory

    @property
    def exposed_bound(self) -> float:
        """The bound less the compute of the order's graph: for plans, a bound on this bucketing's orders only
        (another bucketing has other copies)."""
        return max(0.0, self.bound - self.best.graph.compute_total)

    @property
    def proven(self) -> bool:
        return meets(self.makespan, self.bound)

    @property
    def gap(self) -> float:
        """Relative gap, 0 exactly when the status is proven: on exposed communication over orders; on the
        makespan over plans (the copies make the compute differ between bucketings)."""
        if self.proven:
            return 0.0
        if self.over == "plans":
            return min(1.0, (self.makespan - self.bound) / self.makespan) if self.makespan > 0 else 0.0
        if self.exposed <= 0:
            return 0.0
        return min(1.0, max(0.0, (self.exposed - self.exposed_bound) / self.exposed))

    def summary(self) -> dict[str, Any]:
        return {"status": self.status.value, "method": self.method, "makespan_us": self.makespan,
                "exposed_us": self.exposed, "peak_memory": self.peak_memory, "bound_us": self.bound,
                "bound_over": self.over, "exposed_bound_us": self.exposed_bound, "gap": self.gap,
                "buckets": len(self.buckets), "memory_budget": self.memory_budget,
                "baseline": self.baseline, "stats": self.stats.phases, "message": self.message,
                "cut_by_wall_clock": self.cut_by_wall_clock, "stopped_by": self.stopped_by,
                **({"no_bucket_reason": self.plan_info.no_bucket_reason}
                   if self.plan_info is not None and not self.buckets else {})}

    def save(self, path: str, graph: Graph | None = None) -> None:
        """Write the order (with its buckets, transports and layout: a plan, schedule version 2 to 4) for `graph` (default:
        the graph solved; give the graph as read where that was priced anew: the file names its fingerprint)."""
        from overlapsat.schedules import save_schedule

        save_schedule(path, graph or self.graph, self.names, metrics=self.summary(), meta={"heuristics": self.heuristics},
                      buckets=self.buckets, transports=self.best.transports, layout=self.layout)


__all__ = ["GapBelow", "PlanInfo", "Progress", "Result", "Statistics", "Status", "StoppingRule", "meets"]
