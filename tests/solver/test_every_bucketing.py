"""Small spaces ordered whole, in two rounds (decision 107): every bucketing once, then the rest of the time to the
few unproven ones with the shortest orders, each from its first order."""

from dataclasses import replace

import pytest

from overlapsat import Problem
from overlapsat.solver import every_bucketing
from overlapsat.solver.bucketings import all_bucketings
from overlapsat.solver.every_bucketing import FIRST_ROUND, SECOND_ROUND
from overlapsat.solver.plan_bound import BOUND_SHARE
from overlapsat.solver.plan_search import optimize_plan
from tests.test_plan import _gathers, _latency


def _three_gathers():
    return next(_gathers(s) for s in range(50) if len(all_bucketings(_gathers(s).relaxed("free"), 32)) == 5)


def test_every_bucketing_is_ordered_once_then_the_shortest_unproven_again(monkeypatch):
    """Three independent gathers: five bucketings. With every first order's bound made 0 (none proven), the first
    round orders all five with an equal part of FIRST_ROUND of the time (less the bound's tenth); the second
    orders the three shortest again (fewer buckets first on a tie), with SECOND_ROUND's parts of the rest, each
    given its first order, and the plan is never longer than the best first order."""
    g = _three_gathers()
    real, calls = every_bucketing.optimize, []

    def recording(problem, params, **kw):
        res = real(problem, params, **kw)
        again = "the first round's order" in (kw.get("extra_orders") or {})
        calls.append((problem.graph, params.time_limit, again, res.makespan))
        return res if again else replace(res, bound=0.0)  # nothing proven in the first round

    monkeypatch.setattr(every_bucketing, "optimize", recording)
    limit = 4.0
    r = optimize_plan(Problem.of(g, "none", "free"), _latency(5.0), time_limit=limit)
    first = [c for c in calls if not c[2]]
    second = [c for c in calls if c[2]]
    assert len(first) == 5 and len(second) == 3
    avail = limit * (1 - BOUND_SHARE)
    assert all(t == pytest.approx(FIRST_ROUND * avail / 5) for _, t, _, _ in first)
    assert [t for _, t, _, _ in second] == pytest.approx([p * (1 - FIRST_ROUND) * avail for p in SECOND_ROUND])
    shortest = sorted(first, key=lambda c: (c[3], _buckets(c[0])))[:3]
    assert [c[0] for c in second] == [c[0] for c in shortest]
    assert r.makespan <= min(c[3] for c in first)


def _buckets(graph):
    return sum(nd.op == "bucket_copy_in" for nd in graph.nodes)


def test_a_bucketing_proven_optimal_or_beaten_by_its_bound_is_not_ordered_again(monkeypatch):
    """Unpatched, every first order of these small graphs is proven optimal: no second round, and the plan is
    what ordering each once gives."""
    g = _three_gathers()
    real, again = every_bucketing.optimize, []

    def recording(problem, params, **kw):
        again.append("the first round's order" in (kw.get("extra_orders") or {}))
        return real(problem, params, **kw)

    monkeypatch.setattr(every_bucketing, "optimize", recording)
    r = optimize_plan(Problem.of(g, "none", "free"), _latency(5.0), time_limit=4.0)
    assert len(again) == 5 and not any(again)
    assert r.gap == 0.0
