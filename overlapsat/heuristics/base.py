"""What every heuristic pass returns, and the protocol a pass implements."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from overlapsat.graph import Graph
from overlapsat.simulate import order_ids


@dataclass
class PassResult:
    """An order (node ids) and the statistics the real pass would log."""

    name: str
    order: list[int]
    stats: dict[str, Any] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)  # set by the validator on the way out

    @property
    def valid(self) -> bool:
        return not self.violations

    def names(self, g: Graph) -> list[str]:
        return [g.names[i] for i in self.order]


class Heuristic(Protocol):
    """A pass: graph and starting order in, PassResult out."""

    def __call__(self, g: Graph, order: Sequence[str | int] | None = None) -> PassResult: ...


def start_order(g: Graph, order: Sequence[str | int] | None) -> list[int]:
    """The starting order as ids; the input order by default."""
    return order_ids(g, order)


F = TypeVar("F", bound=Callable[..., PassResult])


def validated(fn: F) -> F:
    """Every order a pass returns goes through the validator; its verdict travels with it.

    Ports may break the collective order and fake (ordering-only) edges as torch
    does (docs/heuristics.md), which is reported, never hidden; a broken data
    dependency would be a bug and raises.
    """
    from overlapsat.validate import validate

    @functools.wraps(fn)
    def wrapper(g: Graph, *args: Any, **kw: Any) -> PassResult:
        r = fn(g, *args, **kw)
        vs = validate(g, r.order, collective_order="group")
        def data_edge(v: Any) -> bool:
            u, w = (g.index[x] for x in v.nodes)
            return u in g.data_preds[w]

        broken = [v for v in vs if v.kind == "permutation" or (v.kind == "dependency" and data_edge(v))]
        if broken:
            raise AssertionError(f"{r.name} produced an order that breaks a data dependency: {broken[0]}")
        r.violations = [str(v) for v in vs]
        return r

    return wrapper  # type: ignore[return-value]
