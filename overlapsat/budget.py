"""Memory budgets: absolute bytes or a ratio of the input order's peak."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from overlapsat.errors import GraphError
from overlapsat.graph import Graph

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


SIZE_END = 2**63  # a size in bytes lies in 0 .. SIZE_END - 1 (a signed 64-bit integer, as torch's sizes)


class _SizeOutOfRange(GraphError):
    """A number with a unit outside 0 .. 2**63 - 1 B: `resolve_size` passes the reason on under its option's name."""


@dataclass(frozen=True)
class MemoryBudget:
    """Exactly one of `bytes` or `ratio` (of the input order's peak)."""

    bytes: int | None = None
    ratio: float | None = None

    def __post_init__(self) -> None:
        if (self.bytes is None) == (self.ratio is None):
            raise GraphError("memory budget: give exactly one of bytes or ratio")
        if self.bytes is not None and (isinstance(self.bytes, bool) or not isinstance(self.bytes, int) or self.bytes < 0
                                       or self.bytes >= SIZE_END):
            raise GraphError(f"memory budget: bytes must be an integer from 0 to 2**63 - 1, got {self.bytes!r}")
        if self.ratio is not None and not (isinstance(self.ratio, (int, float)) and math.isfinite(self.ratio) and self.ratio > 0):
            raise GraphError(f"memory budget: ratio must be a finite number > 0, got {self.ratio!r}")

    def resolve(self, graph: Graph) -> int:
        if self.bytes is not None:
            return self.bytes
        from overlapsat.simulate import peak_memory

        return self.resolve_from(peak_memory(graph))

    def resolve_from(self, peak: int) -> int:
        """The budget against a known peak (the input order's, or the captured order's after fusion)."""
        if self.bytes is not None:
            return self.bytes
        # exact: the ratio as written (its shortest decimal form), so "1.0x" of a 2^50 B peak is that peak
        return math.floor(int(peak) * Fraction(repr(float(self.ratio))))  # type: ignore[arg-type]

    @classmethod
    def parse(cls, text: str) -> MemoryBudget:
        """'1.2x' is a ratio; '40GiB', '5e9B' or '123B' are sizes; a bare number is refused as ambiguous.

        The same text means the same on the command line and in Python (`resolve_budget`).
        """
        t = text.strip().lower().replace(" ", "")
        m = re.fullmatch(r"([0-9.eE+-]+)x", t)
        if m:
            try:
                ratio = float(m.group(1))
            except ValueError:  # not a number ('1.2.3x'): the general message below
                ratio = None
            if ratio is not None:
                if not (math.isfinite(ratio) and ratio > 0):
                    raise GraphError(f"memory budget {text!r}: a ratio of the input order's peak must be a finite "
                                     "number > 0, such as '1.2x'")
                return cls(ratio=ratio)
        m = re.fullmatch(r"([0-9.eE+-]+)([a-z]*)", t)
        if m and m.group(2) == "":  # '1.2' read as 1 byte surprised users who meant a ratio, as in Python
            raise GraphError(f"memory budget {text!r} is ambiguous: write '{text.strip()}x' for a ratio of the input "
                             f"order's peak, or give a unit for a size ('{text.strip()}B', '40GiB')")
        if m and m.group(2) in _UNITS:
            try:
                val = float(m.group(1)) * _UNITS[m.group(2)]
            except ValueError:
                val = float("nan")
            if math.isfinite(val) and 0 <= val < SIZE_END:
                return cls(bytes=int(val))
            if not math.isnan(val):  # a number with a unit, out of range: say which way
                raise _SizeOutOfRange(f"memory budget {text!r}: {SIZE_RANGE}")
        raise GraphError(f"memory budget {text!r}: expected a ratio like '1.2x' or a size like '40GiB'")


BudgetLike = MemoryBudget | int | str | None
SIZE_RANGE = "a size must be from 0 B to 2**63 - 1 B"  # what a number with a unit out of that range is told


NO_BUDGET = "none"  # a budget said to be none: a plan may then grow past the schedule it replaces (decision 63)


def is_none_said(budget: BudgetLike) -> bool:
    """Whether `budget` says "no budget" in words ("none"), as opposed to not being given (None)."""
    return isinstance(budget, str) and budget.strip().lower() == NO_BUDGET


def resolve_budget(graph: Graph, budget: BudgetLike) -> int | None:
    """Bytes, or None for no budget: an int (bytes), a string ('1.2x', '40GiB', '123B', or 'none') or a
    `MemoryBudget`.

    A float is refused: `1` (bytes) and `1.0` (once a ratio) differed by a dot. A ratio is written '1.2x' or
    MemoryBudget(ratio=1.2), as on the command line."""
    mb = as_budget(budget)
    return None if mb is None else mb.resolve(graph)


def as_budget(budget: BudgetLike) -> MemoryBudget | None:
    """`budget` as a MemoryBudget, None for no budget; what `resolve_budget` accepts, refused alike."""
    if budget is None or is_none_said(budget):
        return None
    if isinstance(budget, MemoryBudget):
        return budget
    if isinstance(budget, str):
        return MemoryBudget.parse(budget)
    if isinstance(budget, int) and not isinstance(budget, bool):
        return MemoryBudget(bytes=budget)
    if isinstance(budget, float):
        raise GraphError(f"memory budget {budget!r}: a float is ambiguous; write '{budget}x' or "
                         f"MemoryBudget(ratio={budget}) for a ratio of the input order's peak, or an int of bytes")
    raise GraphError(f"memory budget {budget!r}: expected bytes (an int), a string ('1.2x', '40GiB') or a "
                     "MemoryBudget")


def resolve_size(size: int | str | None, what: str) -> int | None:
    """Bytes from an int or a size string ('25MiB', '4e6B'; no ratio, and a bare number is refused as in a
    budget), None for none; `what` names the option in the error."""
    if size is None:
        return None
    if isinstance(size, str):
        if size.strip().lower().endswith("x"):
            raise GraphError(f"{what} {size!r}: a size ('25MiB', '4e6B'), not a ratio")
        try:
            return MemoryBudget.parse(size).resolve(None)  # type: ignore[arg-type]
        except _SizeOutOfRange:
            raise GraphError(f"{what} {size!r}: {SIZE_RANGE}") from None
        except GraphError:
            raise GraphError(f"{what} {size!r}: expected bytes (an int) or a size like '25MiB'") from None
    if isinstance(size, int) and not isinstance(size, bool) and 0 <= size < SIZE_END:
        return size
    raise GraphError(f"{what} {size!r}: expected bytes (an int >= 0) or a size like '25MiB'")
