"""What every heuristic pass returns, and the protocol a pass implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from overlapsat.graph import Graph
from overlapsat.simulate import order_ids


@dataclass
class PassResult:
    """An order (node ids) and the statistics the real pass would log."""

    name: str
    order: list[int]
    stats: dict[str, Any] = field(default_factory=dict)

    def names(self, g: Graph) -> list[str]:
        return [g.names[i] for i in self.order]


class Heuristic(Protocol):
    """A pass: graph and starting order in, PassResult out."""

    def __call__(self, g: Graph, order: Sequence[str | int] | None = None) -> PassResult: ...


def start_order(g: Graph, order: Sequence[str | int] | None) -> list[int]:
    """The starting order as ids; the input order by default."""
    return order_ids(g, order)
