"""The validity checks of plans: arguments refused by name, a caller's ordered bucketings checked, and the
confirmation a bucket move or a model's plan must pass before it is kept (decisions 46 and 52)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from overlapsat.errors import GraphError
from overlapsat.evaluate import evaluate
from overlapsat.graph import Graph
from overlapsat.plan import Bucket, Pricing, bucket_problems, collective_sequence, materialize
from overlapsat.problem import Problem
from overlapsat.solver.bucket_moves import Confirm
from overlapsat.solver.bucketings import as_buckets
from overlapsat.solver.result import Result
from overlapsat.validate import validate


def check_call(problem: object, price: object, starts: object) -> None:
    """Refuse, by name, arguments of the wrong kind (a graph where a Problem is expected, warm starts that are
    not buckets of collectives by name) before any search."""
    if not isinstance(problem, Problem):
        raise GraphError(f"optimize_plan: expected a Problem (Problem.of(graph, budget, collective_order)), got "
                         f"{type(problem).__name__}")
    if not callable(price):
        raise GraphError(f"optimize_plan: price must be a pricing (node -> us), got {type(price).__name__}")
    if starts is None:
        return
    if not isinstance(starts, dict):
        raise GraphError(f"optimize_plan: starts must be a dict of name -> buckets, got {type(starts).__name__}")
    names = set(problem.graph.index)
    for name, bs in starts.items():
        if not isinstance(name, str):
            raise GraphError(f"optimize_plan: warm start names must be strings, got {name!r}")
        if isinstance(bs, (str, bytes)) or not isinstance(bs, (list, tuple)):
            raise GraphError(f"warm start {name!r}: expected a list of buckets, got {type(bs).__name__}")
        for b in bs:
            members = b.members if isinstance(b, Bucket) else b
            if isinstance(members, (str, bytes)) or not isinstance(members, (list, tuple)):
                raise GraphError(f"warm start {name!r}: a bucket must be a Bucket or a list of collective names, "
                                 f"got {b!r}")
            for m in members:
                if not isinstance(m, str) or m not in names:
                    raise GraphError(f"warm start {name!r}: {m!r} is not a node name of graph {problem.graph.name!r}")


def solved_plans(problem: Problem, price: Pricing, solved: dict[str, tuple[Sequence[Bucket | Sequence[str]], Result]]
                  ) -> dict[str, tuple[tuple[Bucket, ...], Result]]:
    """The caller's ordered bucketings, checked: legal buckets, and a result on the very graph they make here
    (the same prices), whose order is valid at the problem's level and budget. Raises GraphError naming one that
    is not."""
    g, out = problem.relaxed, {}
    for name, (given, res) in solved.items():
        bs = tuple(sorted(as_buckets(g, given), key=lambda b: g.index[b.members[0]]))
        bad = bucket_problems(g, bs) or problem.over_cap(bs)
        if bad:
            raise GraphError.from_problems(f"solved {name!r}: illegal buckets, or outside the bucket policy", bad)
        h = materialize(g, list(bs), price)
        if not res.graph.same_as(h):
            raise GraphError(f"solved {name!r}: its result is not of the graph its buckets make here (another "
                             "graph, or other prices)")
        bad = validate(problem.on(h), res.order, limit=1)
        if bad:
            raise GraphError(f"solved {name!r}: not a valid order at this level and budget ({bad[0]})")
        out[name] = (bs, res)
    return out


def sequences(problem: Problem) -> list[list[int]] | None:
    """The collective sequences `problem`'s level keeps, by input index (None at free)."""
    g = problem.relaxed
    return None if problem.collective_order == "free" else \
        g.group_colls if problem.collective_order == "group" else [g.coll_seq]


def confirmer(problem: Problem, price: Pricing) -> Confirm | None:
    """What a bucket move must pass before it is kept (decisions 46 and 52): within the bucket cap (a sum per
    bucket, checked first), then the level's and the budget's check (`_level_check`). None where nothing is to be
    checked."""
    check = level_check(problem, price)
    if problem.bucket_cap is None:
        return check
    return lambda bs, order: not problem.over_cap(bs) and (check is None or check(bs, order))


def move_checks(problem: Problem, price: Pricing) -> tuple[Confirm | None, int | None]:
    """What a bucket move must pass, as `confirmer` and the budget the moves check themselves (decision 120): a
    move's peak (`MoveMemory`) is exact, so what is left to confirm is the problem without its budget (at level
    free nothing but the bucket cap: a move's order is valid by construction there)."""
    return confirmer(replace(problem, budget=None), price), problem.budget


def early_merges(problem: Problem) -> bool | None:
    """Whether the bucket moves also merge at the earlier collective's place (torch's), where the level alone would
    not ask for it (None): under a budget (decision 124). An order fitted to a tight budget seldom overlaps two
    transfers of one key, so the merges at the later place, which need that overlap, find nothing there; without a
    budget, at free, early merges grew a 16k-node step's buckets huge."""
    return True if problem.budget is not None else None


def level_check(problem: Problem, price: Pricing) -> Confirm | None:
    """None at level free without a budget: the edit is a valid order by construction there. Without a budget
    at levels group and global, the edit keeps every dependency by construction as well, so the collective
    sequences of its bucketed graph are compared with the order's (`collective_sequence`, a third of building
    the graph). Otherwise the edited plan is built and validated at the problem's level and budget."""
    level, g = problem.collective_order, problem.relaxed
    if level == "free" and problem.budget is None:
        return None
    if problem.budget is None and level in ("group", "global"):
        def in_sequence(bs: tuple[Bucket, ...], order: list[str]) -> bool:
            try:
                seq = collective_sequence(g, bs, price)
            except GraphError:  # buckets that depend on each other both ways
                return False
            group = {nd.name: nd.group if level == "group" else "" for nd in seq}
            mine: dict[str | None, list[str]] = {}
            for nm in order:
                if nm in group:
                    mine.setdefault(group[nm], []).append(nm)
            want: dict[str | None, list[str]] = {}
            for nd in seq:
                want.setdefault(group[nd.name], []).append(nd.name)
            return mine == want

        return in_sequence

    def valid(bs: tuple[Bucket, ...], order: list[str]) -> bool:
        return valid_plan(problem, price, bs, order) is not None

    return valid


def valid_plan(problem: Problem, price: Pricing, bs: Sequence[Bucket],
                order: list[str]) -> tuple[Graph, list[int]] | None:
    """The bucketed graph of `bs` and `order` in its node ids, where the buckets are legal (`materialize` checks
    them) and within the bucket policy, and the order is valid at the problem's level and budget; None
    otherwise."""
    if problem.over_cap(bs):
        return None
    try:
        h = materialize(problem.relaxed, list(bs), price)
        ids = [h.index[nm] for nm in order]
    except (GraphError, KeyError):  # illegal buckets, or a name the bucketed graph does not have
        return None
    return None if validate(problem.on(h), ids, limit=1) else (h, ids)


def checked(problem: Problem, price: Pricing, buckets: tuple[Bucket, ...] | None,
             order: list[str] | None) -> tuple[tuple[Bucket, ...], Graph, float] | None:
    """A plan found by a search that does not see the whole problem (the joint model's, at free without a
    budget; the bucket moves'), if it is legal and valid at the problem's level and budget: its buckets, bucketed
    graph and makespan."""
    if buckets is None or order is None:
        return None
    g = problem.relaxed
    bs = tuple(sorted(buckets, key=lambda b: g.index[b.members[0]]))
    found = valid_plan(problem, price, bs, order)
    if found is None:
        return None
    h, ids = found
    return bs, h, evaluate(problem.on(h), "joint model", ids).makespan


__all__ = ["check_call", "checked", "confirmer", "early_merges", "level_check", "sequences", "solved_plans", "valid_plan"]
