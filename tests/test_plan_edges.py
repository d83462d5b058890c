"""A sample of the plan soak at the edges (tests/plan_soak.py) in the suite: atomic groups beside buckets,
budgets at the exact least peak of a bucketed graph and one byte below, sizes up to 2^50 B, every level, both
layouts, group-member prices and the copy-engine table, each seed's claims against brute force over every plan."""

import pytest

from tests.plan_soak import check


@pytest.mark.parametrize("seed", range(24))
def test_the_plan_claims_hold_at_the_edges(seed):
    out = check(seed, time_limit=1.0)
    assert out["failures"] == [], out
