"""One evaluated plan: an order (and the buckets whose graph it orders), simulated and validated once, then
carried everywhere.

The portfolio's rows, `compare`'s table, `optimize`'s candidates and a plan's
best are all `Evaluated`, so no figure is recomputed (or recomputed
differently) later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from overlapsat.graph import Graph
from overlapsat.problem import Problem
from overlapsat.simulate import SimResult, simulate
from overlapsat.validate import validate

if TYPE_CHECKING:
    from overlapsat.plan import Bucket


@dataclass
class Evaluated:
    """An order with its simulation and every violation (empty: valid). `order` holds node ids of `sim.graph`:
    the graph as given, or for a plan the graph its `buckets` make (`plan.materialize`); `transports` names that
    graph's collectives moved by copy engine."""

    name: str
    order: list[int]
    sim: SimResult
    violations: list[str]
    runtime_s: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    buckets: tuple[Bucket, ...] = ()
    transports: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (f"Evaluated({self.name!r}, makespan_us={self.makespan:.3f}, exposed_us={self.exposed:.3f}, "
                f"peak_memory_bytes={self.peak_memory}, valid={self.valid})")

    @property
    def makespan(self) -> float:
        return self.sim.makespan

    makespan_us = makespan

    @property
    def exposed(self) -> float:
        return self.sim.exposed

    @property
    def peak_memory(self) -> int:
        return self.sim.peak_memory

    @property
    def exposed_us(self) -> float:
        return self.sim.exposed

    @property
    def peak_memory_bytes(self) -> int:
        return self.sim.peak_memory

    @property
    def valid(self) -> bool:
        return not self.violations

    @property
    def method(self) -> str:
        return self.name

    @property
    def exposed_pct(self) -> float:
        return 100.0 * self.exposed / self.makespan if self.makespan > 0 else 0.0

    @property
    def graph(self) -> Graph:
        """The graph `order` indexes (bucketed, for a plan)."""
        return self.sim.graph

    def names(self, g: Graph | None = None) -> list[str]:
        g = g or self.sim.graph
        return [g.names[i] for i in self.order]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "makespan": self.makespan, "exposed": self.exposed, "peak_memory": self.peak_memory,
                "valid": self.valid, "violations": self.violations, "runtime_s": self.runtime_s}


def evaluate(problem: Problem, name: str, order: Sequence[int], *, runtime_s: float = 0.0,
             stats: dict[str, Any] | None = None, note: str = "") -> Evaluated:
    """`order` (node ids of `problem.graph`) validated against the problem and simulated: one row."""
    ids = list(order)
    g = problem.graph
    vs = validate(problem, ids, limit=5)
    return Evaluated(name, ids, simulate(g, ids), [str(v) for v in vs], runtime_s, dict(stats or {}), note)


def evaluate_named(problem: Problem, orders: dict[str, Sequence[str | int]]) -> list[Evaluated]:
    """Orders from elsewhere (torch's FX OverlapScheduler, a hand-written one), by name, evaluated as rows."""
    return [evaluate(problem, nm, problem.graph.order_indices(o)) for nm, o in orders.items()]


def only_over_budget(h: Evaluated) -> bool:
    """Whether `h` breaks no rule but the memory budget (or none)."""
    return all(v.startswith("[memory]") for v in h.violations)


def rank_key(e: Evaluated) -> tuple[bool, float, int, tuple[int, ...]]:
    """Valid first, then makespan, peak, and the order itself: a total, deterministic ranking."""
    return (not e.valid, e.makespan, e.peak_memory, tuple(e.order))
