"""The overlap a budget leaves (decision 71, solver/memory_bound.py): a hand-computed case, then brute force over
every order of random graphs at the edges of the input space, at their least peak and between."""

import pytest

from overlapsat import GraphBuilder, Problem, lower_bound, optimize
from overlapsat.solver import memory_bound
from overlapsat.solver.memory_bound import overlap_capacity_bound, peak_floor
from overlapsat.solver.plan_bound import OVERLAP_SHUT_BY_BUDGET, analytical_over_bucketings
from tests import brute
from tests.helpers import two_paths


def test_a_budget_that_shuts_the_overlap_lifts_the_bound_to_the_optimum():
    g = two_paths()
    # below 120 B the transfer cannot run beside k: k, then c's 8 us alone, then m: 10 + 8 + 1
    assert overlap_capacity_bound(g, 100) == 19.0
    assert lower_bound(g, "free").makespan == 11.0  # the analytical bounds do not read the budget
    res = optimize(Problem.of(g, 100, "free"), time_limit=5)
    assert res.makespan == 19.0 and res.bound == 19.0 and res.gap == 0.0  # proven: the order meets the bound
    # at 120 B c runs beside k: 11 us, and the bound is the work
    assert overlap_capacity_bound(g, 120) == 11.0
    assert optimize(Problem.of(g, 120, "free"), time_limit=5).makespan == 11.0


def test_the_plan_bound_reads_the_budget_and_says_so():
    g = two_paths()
    _, bound, notes = analytical_over_bucketings(Problem.of(g, 100, "free"), lambda nd: nd.duration)
    assert bound == 19.0 and OVERLAP_SHUT_BY_BUDGET in notes
    _, bound, notes = analytical_over_bucketings(Problem.of(g, None, "free"), lambda nd: nd.duration)
    assert bound == 11.0 and OVERLAP_SHUT_BY_BUDGET not in notes


def _cases(seeds):
    """(seed, graph, budget, best makespan within it or None) at the least peak, a byte below it, and between."""
    for seed in seeds:
        g, _ = brute.edge_graph(seed) if seed % 2 else brute.random_graph(seed)
        truth = brute.brute_force(g, "free")
        if truth is None:
            continue
        peaks = sorted({pk for _, _, pk in truth.orders})
        for budget in {peaks[0], peaks[0] - 1, peaks[len(peaks) // 3], peaks[len(peaks) // 2]}:
            yield seed, g, budget, truth.best(budget)


def test_never_above_the_best_order_within_the_budget_and_sometimes_above_the_analytical_bound():
    lifted = checked = 0
    for seed, g, budget, best in _cases(range(0, 240)):
        bound = overlap_capacity_bound(g, budget)
        assert bound >= sum(g.work) * (1 - 1e-12)
        if best is not None:
            checked += 1
            assert bound <= best * (1 + 1e-9) + 1e-9, (seed, budget, bound, best)
        lifted += bound > lower_bound(g, "free").makespan * (1 + 1e-9) + 1e-9
    assert checked > 500 and lifted > 20  # it is exercised, and it adds something


def test_the_check_catches_a_floor_that_counts_too_much(monkeypatch):
    """The property can fail: a memory floor inflated by one byte shuts pairs that fit, and brute force sees it."""
    real = memory_bound._memory_floor
    monkeypatch.setattr(memory_bound, "_memory_floor", lambda g: [f + 1 for f in real(g)])
    false = [seed for seed, g, budget, best in _cases(range(0, 240))
             if best is not None and overlap_capacity_bound(g, budget) > best * (1 + 1e-9) + 1e-9]
    assert false


@pytest.mark.parametrize("size", [2**50 + 12345, 3 * 2**48])
def test_exact_at_two_to_the_fifty(size):
    """Sizes near 2^50 B: the floor is summed in integers, so a budget one byte short shuts the pair."""
    b = GraphBuilder("big")
    b.input("x", size, freeable=True)
    b.compute("k", 10.0, reads=["x"], writes={"y": size})
    b.collective("c", group="g", duration=8.0, writes={"z": size})
    b.wait("w", "c")
    b.compute("m", 1.0, reads=["y", "z"])
    g = b.build()
    assert overlap_capacity_bound(g, 3 * size) == 11.0
    assert overlap_capacity_bound(g, 3 * size - 1) == 19.0


def test_the_live_bytes_are_summed_exactly_over_thousands_of_buffers_near_two_to_the_fifty():
    """The floor sums each step's live buffers in blocks (one matrix product, decision 104's record): exact for
    4,096 buffers of up to 2^50 B, against Python's integers, over more steps than one block holds."""
    import random

    import numpy as np

    rng = random.Random(7)
    sizes = [rng.choice([2**50 - rng.randrange(1000), rng.randrange(2**33), 1, 2**32 - 1, 2**32]) for _ in range(4096)]
    weights = (np.asarray([w >> 32 for w in sizes], dtype=np.int64),
               np.asarray([w & 0xFFFFFFFF for w in sizes], dtype=np.int64))
    sets = [0, (1 << 4096) - 1] + [rng.getrandbits(4096) for _ in range(2 * memory_bound.ROWS + 3)]
    got = memory_bound._weighted(sets, 4096, weights)
    assert got == [sum(w for k, w in enumerate(sizes) if x >> k & 1) for x in sets]


def test_the_floor_is_never_above_the_least_peak_and_often_meets_it():
    """`peak_floor` against brute force's least peak over every order (so every budget below it is unreachable)."""
    met = checked = 0
    for seed in range(0, 240):
        g, _ = brute.edge_graph(seed) if seed % 2 else brute.random_graph(seed)
        truth = brute.brute_force(g, "free")
        if truth is None:
            continue
        floor, node = peak_floor(g)
        checked += 1
        assert floor <= truth.min_peak, (seed, floor, truth.min_peak, node)
        met += floor == truth.min_peak
    assert checked > 150 and met > 20


def test_the_search_reads_the_overlap_the_budget_leaves_only_where_its_limit_pays_for_it(monkeypatch):
    """Decision 71's bound costs about MEMORY_BOUND_S a node (a max-flow): at 0.3 s on 13,403 nodes it alone ran
    the call past 1.1 x its limit + 1 s. The search now reads it where the time limit (not the clock, so the bound
    is the same on any machine) is at least its price, and keeps the analytical bound otherwise."""
    from overlapsat.solver import search

    calls = []
    real = search.overlap_capacity_bound
    monkeypatch.setattr(search, "overlap_capacity_bound", lambda g, b: calls.append(b) or real(g, b))
    g = two_paths()
    optimize(Problem.of(g, 100, "free"), time_limit=2)
    assert calls == [100]
    calls.clear()
    monkeypatch.setattr(search, "MEMORY_BOUND_S", 1.0)  # 1 s a node: above a 2-s limit at this graph's size
    res = optimize(Problem.of(g, 100, "free"), time_limit=2)
    assert calls == [] and res.makespan == 19.0 and res.bound <= 19.0  # still a bound, and still the same plan
