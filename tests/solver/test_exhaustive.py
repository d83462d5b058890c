"""The listing of every order (solver/exhaustive.py) against brute force (tests/brute.py): the same best order
within every budget, proofs only where brute force agrees, and the live bytes it prunes by (`witness.PrefixSets`)
equal to the memory model's, step by step."""

from __future__ import annotations

import functools
import random

import pytest

from overlapsat.problem import Problem
from overlapsat.simulate import memory_curve
from overlapsat.solver.exhaustive import exhaustive
from overlapsat.solver.witness import PrefixSets
from tests import brute
from tests.helpers import naive_peak

SEEDS = range(80)
MAX_ORDERS = 2000  # brute force's listings above this are left out: the suite's time


@functools.cache
def cases() -> list[tuple[int, object, str, brute.Truth]]:
    out = []
    for seed in SEEDS:
        g, co = brute.edge_graph(seed, 8) if seed % 3 == 2 else brute.random_graph(seed, 8)
        truth = brute.brute_force(g, co, limit=MAX_ORDERS)
        if truth is not None:
            out.append((seed, g, co, truth))
    return out


def budgets(truth: brute.Truth) -> list[int | None]:
    """No budget, the least peak of any order (exactly), one byte less, and each order's peak between."""
    if not truth.orders:
        return [None]
    peaks = sorted({pk for _, _, pk in truth.orders})
    low = peaks[0]
    return [None, low, *([low - 1] if low > 1 else []), peaks[len(peaks) // 2], peaks[-1]]


def test_the_listing_finds_brute_forces_best_within_every_budget_and_proves_only_what_it_lists():
    seen = {"proven_none": 0, "pruned": 0, "atomic": 0, "levels": set()}
    for seed, g, co, truth in cases():
        seen["levels"].add(co)
        seen["atomic"] += bool(g.atomic)
        for b in budgets(truth):
            ex = exhaustive(Problem.of(g, b, co))
            want = truth.best(b)
            assert ex.complete, (seed, b)
            if want is None:
                assert ex.order is None, (seed, b)
                seen["proven_none"] += 1
            else:
                assert ex.order is not None and ex.makespan == pytest.approx(want, rel=1e-9, abs=1e-9), (seed, b)
                ms, pk = brute.sim(g, ex.order)
                assert ms == pytest.approx(want, rel=1e-9, abs=1e-9) and (b is None or pk <= b), (seed, b)
            seen["pruned"] += ex.pruned
    # the sample reaches what the listing prunes by: budgets no order meets, prefixes over one, atomic groups
    assert seen["proven_none"] >= 20 and seen["pruned"] >= 100 and seen["atomic"] >= 10
    assert seen["levels"] == {"free", "group", "global", "chain"}


def test_the_first_valid_order_is_found_exactly_where_one_exists():
    for seed, g, co, truth in cases():
        for b in budgets(truth):
            ex = exhaustive(Problem.of(g, b, co), first=True)
            assert (ex.order is not None) == (truth.best(b) is not None), (seed, b)
            if ex.order is not None:
                assert not ex.complete and ex.judged <= len(truth.orders)
                assert b is None or brute.sim(g, ex.order)[1] <= b


def test_live_bytes_step_by_step_are_the_memory_models():
    """Placed block by block (a node, or an atomic group's members), each block fits a budget at its highest
    post-alloc figure and not one byte under, and leaves the post-free figure of its last step; the highest is the
    order's peak (`naive_peak`, written from MODEL.md)."""
    rng = random.Random(5)
    for seed, g, co, truth in cases():
        if not truth.orders:
            continue
        order = rng.choice(truth.orders)[0]
        post_alloc, post_free = memory_curve(g, order)
        sets = PrefixSets(Problem.of(g, None, co).relaxed, co)  # the listing's graph: the level's own edges
        held = live = k = 0
        for v in order:
            if not sets.block[v]:  # a later member of an atomic group: placed with its first
                continue
            n = len(sets.block[v])
            high = max(post_alloc[k:k + n])
            assert sets.place(v, held, live, high - 1) is None, seed
            held, live = sets.place(v, held, live, high)
            k += n
            assert live == post_free[k - 1], seed
        assert k == len(order) and held == sets.full
        assert max(post_alloc) == naive_peak(g, order), seed
