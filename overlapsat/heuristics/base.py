"""What every heuristic pass returns, and the protocol a pass implements."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

import numpy as np

from overlapsat.graph import Graph
from overlapsat.simulate import order_ids


@dataclass
class PassResult:
    """What one pass returns: an order (node ids) and the statistics the real pass would log.

    Its verdict is computed on first use only: the portfolio evaluates each
    pipeline once (`overlapsat.evaluate`), so passes inside a pipeline are not
    validated twice.
    """

    name: str
    order: list[int]
    stats: dict[str, Any] = field(default_factory=dict)
    graph: Graph | None = field(default=None, repr=False, compare=False)
    _violations: list[str] | None = field(default=None, repr=False, compare=False)

    @property
    def violations(self) -> list[str]:
        if self._violations is None:
            from overlapsat.validate import validate

            assert self.graph is not None, "a PassResult built by hand has no graph to validate against"
            self._violations = [str(v) for v in validate(self.graph, self.order, collective_order="group")]
        return self._violations

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


def _data_edges(g: Graph) -> tuple[np.ndarray, np.ndarray]:
    key = "heuristics:data_edges"
    if key not in g._cache:
        g._cache[key] = (np.asarray([u for ps in g.data_preds for u in ps], dtype=np.int64),
                         np.asarray([v for v, ps in enumerate(g.data_preds) for _ in ps], dtype=np.int64))
    return g._cache[key]


def memoised(fn: F) -> F:
    """A pass that is a function of (graph, start order) only computes once per graph and start order:
    the portfolio runs the memory sorts alone and again inside reorder_for_peak_memory."""

    @functools.wraps(fn)
    def wrapper(g: Graph, order: Sequence[str | int] | None = None) -> PassResult:
        memo = g._cache.setdefault("heuristics:memo", {})
        key = (fn.__name__, None if order is None else tuple(start_order(g, order)))
        if key not in memo:  # kept without its graph: the graph's cache holding the graph is a reference cycle,
            # and a bucketed graph of a plan search would then wait for the cyclic collector with all its tables
            memo[key] = replace(fn(g, order), graph=None)
        return replace(memo[key], graph=g)  # checked already (by `validated`, inside)

    return wrapper  # type: ignore[return-value]


def validated(fn: F) -> F:
    """Every order a pass returns is checked to be a permutation that keeps every data dependency.

    Ports may break the collective order and fake (ordering-only) edges as torch
    does (docs/heuristics.md), which the verdict reports (lazily); a broken
    data dependency would be a bug and raises.
    """

    @functools.wraps(fn)
    def wrapper(g: Graph, *args: Any, **kw: Any) -> PassResult:
        r = fn(g, *args, **kw)
        if r.graph is g:  # checked already, by an inner validated pass or the memo's first call
            return r
        r.graph = g
        order = np.asarray(r.order, dtype=np.int64)
        n = len(g.nodes)
        if len(order) != n or (n and np.any(np.bincount(order, minlength=n) != 1)):
            raise AssertionError(f"{r.name} returned an order that is not a permutation of the graph's nodes")
        src, dst = _data_edges(g)
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n)
        bad = np.flatnonzero(pos[src] > pos[dst])
        if len(bad):
            u, w = int(src[bad[0]]), int(dst[bad[0]])
            raise AssertionError(f"{r.name} produced an order that breaks a data dependency: "
                                 f"{g.names[w]!r} before {g.names[u]!r}")
        return r

    return wrapper  # type: ignore[return-value]
