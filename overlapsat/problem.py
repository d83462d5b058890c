"""What is being solved: one graph under one memory budget, one collective-order policy and one bucket policy.

The three travelled together by hand through every layer, each re-deriving its
own views (the relaxed graph, the canonical form, the budget in bytes). A
`Problem` resolves them once and owns the derived views, so the heuristics,
the evaluator, the listing and the search all read the same ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

from overlapsat.budget import BudgetLike, resolve_budget, resolve_size
from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE_ORDERS, Graph
from overlapsat.simulate import peak_memory

if TYPE_CHECKING:
    from overlapsat.plan import Bucket


@dataclass(frozen=True, eq=False)
class Problem:
    """A graph, its memory budget in bytes (None: none), its collective-order policy, and its bucket policy:
    `bucket_cap`, the most bytes a bucket may merge (None: no cap; MODEL.md "Buckets"), which bounds the plans
    `optimize_plan` may choose, as torch's `bucket_cap_mb` bounds its bucketers' (a hard cap here), and
    `bucket_layout`, how its plans issue a bucket: "copy" (torch's: one buffer, copied in and out) or
    "coalesced" (one group call on the members' own buffers; decision 55).

    Build one with `Problem.of`, which resolves a budget given as a ratio or a
    size; the fields are final. `graph` is the graph as given (Inductor's chain
    edges kept: the ported passes see them, as Inductor's do); `relaxed` is the
    graph every claim is judged on. `budget_default`: no budget was given (as
    opposed to one said to be "none"), so a plan gets the default, the input
    order's peak (`with_default_budget`, decision 63); an order does not.
    """

    graph: Graph
    budget: int | None = None
    collective_order: str = "group"
    bucket_cap: int | None = None
    bucket_layout: str = "copy"
    budget_default: bool = False

    def __post_init__(self) -> None:
        from overlapsat.plan import check_layout

        check_layout(self.bucket_layout, "bucket_layout")
        if self.collective_order not in COLLECTIVE_ORDERS:
            raise GraphError(f"collective_order must be one of {', '.join(COLLECTIVE_ORDERS)}; "
                             f"got {self.collective_order!r}")
        if self.budget is not None and (isinstance(self.budget, bool) or not isinstance(self.budget, int)
                                        or self.budget < 0):
            raise GraphError(f"Problem.budget is bytes (an int >= 0) or None; got {self.budget!r} "
                             "(use Problem.of for a ratio or a size)")
        if self.bucket_cap is not None and (isinstance(self.bucket_cap, bool) or not isinstance(self.bucket_cap, int)
                                            or self.bucket_cap < 0):
            raise GraphError(f"Problem.bucket_cap is bytes (an int >= 0) or None; got {self.bucket_cap!r} "
                             "(use Problem.of for a size such as '25MiB')")

    @classmethod
    def of(cls, graph: Graph, memory_budget: BudgetLike = None, collective_order: str = "group",
           bucket_cap: int | str | None = None, bucket_layout: str = "copy") -> Problem:
        """The problem of `graph`: a ratio budget is of the graph's input-order peak, resolved exactly, once;
        `bucket_cap` is bytes or a size ('25MiB')."""
        return cls(graph, resolve_budget(graph, memory_budget), collective_order,
                   resolve_size(bucket_cap, "bucket cap"), bucket_layout, memory_budget is None)

    def with_default_budget(self) -> Problem:
        """A plan's problem: where no budget was given, the input order's peak (decision 63: a plan the user did
        not ask to grow never peaks above the order it replaces); otherwise this problem."""
        if not self.budget_default or self.budget is not None:
            return self
        return replace(self, budget=peak_memory(self.graph))

    @property
    def budget_source(self) -> str:
        """Where the budget comes from, in words: what a plan's summary says beside its peak."""
        if self.budget is None:
            return "none"
        return "the input order's peak (the default)" if self.budget_default else "given"

    @cached_property
    def relaxed(self) -> Graph:
        """The graph under the policy: Inductor's chain edges only at "chain" (decision 14)."""
        return self.graph.relaxed(self.collective_order)

    @property
    def canonical(self) -> Problem:
        """The same problem on the canonical form of the relaxed graph (canonical.py): a search on it answers
        the same for every file layout. `to_given` maps its node ids to `relaxed`'s."""
        return self if self.__dict__.get("is_canonical") else self._canonical_form

    def own_canonical(self) -> Problem:
        """This problem on its relaxed graph, as its own canonical form: for a graph whose node order is already the
        same for every file layout (the plan search's canonical graph, a bucketed graph built from it), so that a
        search on it neither builds another form nor runs the passes twice."""
        q = self.on(self.relaxed)
        q.__dict__["is_canonical"] = True  # a flag: the problem in its own cache would be a reference cycle
        return q

    @property
    def canonical_known(self) -> bool:
        """Whether `canonical` costs nothing now: computed already, or this problem is its own."""
        return bool(self.__dict__.get("is_canonical")) or "_canonical_form" in self.__dict__

    @cached_property
    def _canonical_form(self) -> Problem:
        from overlapsat.canonical import kept_canonical

        cg = kept_canonical(self.relaxed, self.collective_order)
        cp = self.on(cg)
        # the canonical form's own canonical form is itself: not computed again
        return cp.own_canonical() if cp.relaxed.names == cg.names else cp

    @cached_property
    def to_given(self) -> list[int]:
        """For a canonical problem's node ids: the ids of the same nodes in the problem it came from."""
        return [self.relaxed.index[nm] for nm in self.canonical.graph.names]

    def on(self, graph: Graph) -> Problem:
        """The same budget and policies on another graph (a copy with other durations, a bucketed graph)."""
        return replace(self, graph=graph)

    def over_cap(self, buckets: Sequence[Bucket]) -> list[str]:
        """Why `buckets` are outside the bucket policy: each one merging more bytes than `bucket_cap` ([]: none,
        or no cap). Sizes are read off `graph` (the unbucketed graph the buckets are of)."""
        if self.bucket_cap is None:
            return []
        node = self.graph.node
        out = []
        for b in buckets:
            total = sum(int(node(m).nbytes) for m in b.members)
            if total > self.bucket_cap:
                out.append(f"bucket {b.name} merges {total:,} B, above the bucket cap of {self.bucket_cap:,} B")
        return out


def as_problem(x: Problem | Graph, memory_budget: BudgetLike = None, collective_order: str | None = None) -> Problem:
    """A `Problem` as given, or built from a graph and the two options (the public functions take either)."""
    if isinstance(x, Problem):
        if memory_budget is not None or (collective_order is not None and collective_order != x.collective_order):
            raise GraphError("a Problem carries its budget and collective order: pass them to Problem.of, not again")
        return x
    if not isinstance(x, Graph):
        raise GraphError(f"expected a Graph or a Problem, got {type(x).__name__}")
    return Problem.of(x, memory_budget, collective_order or "group")


__all__ = ["Problem", "as_problem"]
