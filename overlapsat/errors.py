"""The one exception type users see for bad graphs, schedules and files."""

from __future__ import annotations


class GraphError(ValueError):
    """Bad input: a malformed graph, file or schedule.

    The message names the culprit (node, buffer, field or file) so a user can
    fix it without reading overlapsat's source.
    """

    def __init__(self, message: str, *, problems: list[str] | None = None) -> None:
        self.problems = list(problems) if problems else [message]
        super().__init__(message)

    @classmethod
    def from_problems(cls, what: str, problems: list[str], limit: int = 20) -> GraphError:
        shown = problems[:limit]
        more = len(problems) - len(shown)
        lines = [f"{what}: {len(problems)} problem(s)"] + [f"  - {p}" for p in shown]
        if more:
            lines.append(f"  ... and {more} more")
        return cls("\n".join(lines), problems=problems)


class InfeasibleBudgetError(GraphError):
    """A memory budget that no order of the graph can meet: raised only when proven."""


class NoValidOrderError(GraphError):
    """No order within the memory budget was found in the time limit; not a proof that none exists."""
