"""Every claim the library prints, against brute force on random graphs (docs/solver.md, Soundness).

A fixed seeded sample of tests/brute.py's graphs (several groups, collectives
never waited, atomic groups, freeable inputs, outputs, Inductor's multi-output
split and arbitrary splits, the global collective chain, zero, equal and
non-representable durations, budgets from none to impossible).
tests/soak.py runs the same check on 10,000 graphs.
"""

import logging

import pytest

from tests.brute import FAILURES, check

SEEDS = range(20_000, 21_000)


@pytest.fixture(autouse=True)
def quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def test_no_false_claim_on_the_seeded_sample():
    totals: dict[str, int] = {}
    failures: list[str] = []
    for seed in SEEDS:
        r = check(seed, time_limit=2.0)
        for k, v in r["counts"].items():
            totals[k] = totals.get(k, 0) + v
        failures += [f"seed {seed}: {f}" for f in r["failures"]]
    assert failures == [], failures[:10]
    assert not any(totals.get(k) for k in FAILURES)
    # the sample exercises every outcome worth checking
    assert totals.get("infeasible_claimed", 0) > 10
    assert totals.get("status_optimal", 0) + totals.get("status_heuristic_optimal", 0) > 100
    assert totals.get("skipped_too_many_orders", 0) < 30


def test_the_check_catches_a_false_bound(monkeypatch):
    """The property can fail: an inflated bound is reported as a false claim."""
    import importlib

    from overlapsat.bounds import LowerBound

    opt = importlib.import_module("overlapsat.solver.search")

    real = opt.lower_bound
    monkeypatch.setattr(opt, "lower_bound", lambda g, co="group": LowerBound(real(g, co).makespan * 1.5 + 1, 0, 0, 0))
    bad = [f for seed in range(20_000, 20_040) for f in check(seed, time_limit=1.0)["failures"]]
    assert any(f.startswith(("false_bound", "false_optimal")) for f in bad)
