"""Decision 94: under a budget, a bucketing whose memory floor is above the budget is set aside before the
portfolio judges it. Brute force over every order of the bucketed graph is the reference: a bucketing set aside
has no order within the budget, and the plan stays valid and within it."""

import math

import pytest

from overlapsat import Problem, optimize_plan, peak_memory, validate
from overlapsat.plan import Bucket, bucket_problems, materialize
from overlapsat.solver import plan_search
from overlapsat.solver.memory_bound import peak_floor
from tests.helpers import all_valid_orders, naive_peak
from tests.solver.test_room import fsdp_step, price


def least_peak(g) -> int:
    """The least peak of any order of `g` at `free` (brute force, MODEL.md's rule written out again)."""
    return min(naive_peak(g, order) for order in all_valid_orders(g, "free"))


@pytest.mark.parametrize("seed", range(40))
def test_a_start_set_aside_below_its_floor_has_no_order_within_the_budget(seed, monkeypatch):
    monkeypatch.setattr(plan_search, "EXHAUSTIVE_BUCKETINGS", 0)  # the warm starts' path, not every bucketing
    g = fsdp_step(seed)
    gathers = Bucket(tuple(nd.name for nd in g.nodes if nd.op == "all_gather"))
    if len(gathers.members) != 2 or bucket_problems(g, [gathers]):
        pytest.skip("too many orders for brute force, or no legal bucket of every gather")
    budget = least_peak(g)  # the least peak of the unbucketed graph, exactly
    h = materialize(g, [gathers], price)
    truth = least_peak(h)  # every order of the one-bucket start
    r = optimize_plan(Problem.of(g, budget, "free"), price, work_limit=0.3, starts={"every gather": [gathers]})
    plan = r.plan_info
    unreachable = r.stats["plan"]["bucketings_unreachable"]
    if peak_floor(h)[0] > budget:  # the screen's own reading: it must set the start aside, and be right to
        assert truth > budget
        assert unreachable >= 1 and r.stats["plan"]["starts"]["every gather"] == math.inf
    assert not validate(Problem.of(r.bucketed, budget, "free"), r.order), plan
    assert peak_memory(r.bucketed, r.order) <= budget


def test_the_screen_sets_a_start_aside_on_some_seed():
    """The test above can fail: on some seed the one-bucket start's floor is above the least unbucketed peak."""
    fired = 0
    for seed in range(40):
        g = fsdp_step(seed)
        gathers = Bucket(tuple(nd.name for nd in g.nodes if nd.op == "all_gather"))
        if len(gathers.members) != 2 or bucket_problems(g, [gathers]):
            continue
        fired += peak_floor(materialize(g, [gathers], price))[0] > least_peak(g)
    assert fired >= 1
