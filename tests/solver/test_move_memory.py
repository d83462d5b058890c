"""The peak a bucket move's plan has, computed in the layout (solver/move_memory.py, decision 120), is the peak
of the bucketed graph `materialize` builds for it, walked by `simulate`: on random graphs whose buffers cover
the memory model (outputs, freeable inputs, unread buffers, collectives on constant inputs, sizes up to
2**50 B), both bucket layouts, every legal bucketing, every move offered, and chains of accepted moves."""

import os
import random
from dataclasses import replace

import pytest

from overlapsat import Buffer, Graph, Problem, simulate, validate
from overlapsat.graph import NodeKind
from overlapsat.plan import laid_out, materialize
from overlapsat.solver.bucket_moves import _Layout, _moves, order_preserving_search
from overlapsat.solver.move_memory import MoveMemory
from overlapsat.solver.plan_search import all_bucketings
from tests.helpers import random_valid_order
from tests.solver.test_joint import price, random_plan_graph

SEEDS = int(os.environ.get("OVERLAPSAT_MOVES_SEEDS", "30"))


def memory_graph(seed: int) -> Graph:
    """`random_plan_graph` with its buffers varied: some outputs, freeable inputs read by collectives and
    kernels, collectives' outputs read by their waits alone, an unread buffer, a collective whose input buffer
    is gone (a constant input), and sizes up to 2**50 B on some seeds."""
    g = random_plan_graph(seed)
    rng = random.Random(seed * 7 + 1)
    big = rng.random() < 0.3
    colls = [nd.name for nd in g.nodes if nd.kind is NodeKind.COLLECTIVE]
    kernels = [nd.name for nd in g.nodes if nd.kind is NodeKind.COMPUTE]
    bufs = []
    for b in g.buffers:
        if b.consumers and b.consumers[0] in colls and rng.random() < 0.2:
            continue  # the collective reads a constant input
        size = rng.choice([1, 7, 50, 2**40, 2**50 - 3]) if big else b.size_alloc
        readers = b.consumers
        if b.producer in colls and rng.random() < 0.3:
            readers = readers[:1]  # a collective's output read by its wait alone
        bufs.append(replace(b, consumers=readers, size_alloc=size,
                            size_free=size if rng.random() < 0.7 else max(0, size - 1), output=rng.random() < 0.15))
    for k in range(rng.randint(0, 3)):
        readers = tuple(dict.fromkeys(rng.sample(colls + kernels, rng.randint(0, 2))))
        size = rng.choice([3, 40, 2**50]) if big else rng.randint(1, 60)
        bufs.append(Buffer(f"in{k}", None, readers, rng.choice([0, size]), size, freeable_input=True))
    if rng.random() < 0.5:
        bufs.append(Buffer("unread", rng.choice(kernels), (), 11, 11))
    return Graph(g.nodes, tuple(bufs), g.edges, g.atomic_groups, g.name)


def _apply(bs, edit):
    order, new, gone = edit[:3]
    return tuple(sorted([b for b in bs if b not in gone] + new, key=lambda b: b.members)), order


@pytest.mark.parametrize("layout", ["copy", "coalesced"])
@pytest.mark.parametrize("seed", range(SEEDS))
def test_a_moves_peak_in_the_layout_is_the_peak_of_its_bucketed_graph(seed, layout):
    g = memory_graph(seed)
    pr = laid_out(price, layout)
    rng = random.Random(seed)
    checked = 0
    for bs in all_bucketings(g, 200):
        h = materialize(g, list(bs), pr)
        order = [h.names[v] for v in random_valid_order(h, rng, "free")]
        mem = MoveMemory(g, pr, bs, order)
        assert mem.peak(order, [], []) == simulate(h, order).peak_memory
        lay = _Layout(g, pr, bs, order)
        for _ in range(4):  # a chain of accepted moves: the account follows each
            edits = []
            pos = {nm: k for k, nm in enumerate(lay.order)}
            for move in _moves(lay, {}, pos, early=True):
                edit = move()
                if edit is None:
                    continue
                nbs, norder = _apply(tuple(lay.buckets), edit)
                h2 = materialize(g, list(nbs), pr)
                assert mem.peak(*edit) == simulate(h2, norder).peak_memory, (bs, nbs)
                edits.append(edit)
                checked += 1
            if not edits:
                break
            edit = rng.choice(edits)
            lay.accept(edit)
            mem.accept(*edit)
            h2 = materialize(g, list(lay.buckets), pr)
            assert mem.peak(lay.order, [], []) == simulate(h2, lay.order).peak_memory
    if not checked:
        pytest.skip("no move applies")


@pytest.mark.parametrize("seed", range(SEEDS))
def test_moves_under_a_budget_at_level_free_keep_it_and_agree_with_building_the_graph(seed):
    """At level free under a budget (the start's own peak: exactly at it), the moves checked in the layout
    reach the same plan as the moves confirmed by building and validating each plan, and it is within the
    budget."""
    from overlapsat.solver.plan_search import _confirmer

    g = memory_graph(seed)
    rng = random.Random(seed)
    for bs in list(all_bucketings(g, 200))[:6]:
        h = materialize(g, list(bs), price)
        order = [h.names[v] for v in random_valid_order(h, rng, "free")]
        budget = simulate(h, order).peak_memory
        built = order_preserving_search(g, price, bs, order, 10**6,
                                        confirm=_confirmer(Problem.of(g, budget, "free"), price))
        laid = order_preserving_search(g, price, bs, order, 10**6, budget=budget)
        assert (laid.buckets, laid.order, laid.makespan) == (built.buckets, built.order, built.makespan)
        h2 = materialize(g, list(laid.buckets), price)
        assert validate(Problem(h2, budget, "free"), laid.order) == []


def test_at_level_free_the_budget_is_the_moves_own_check_and_elsewhere_a_filter_before_the_confirmation():
    """Decision 120: at free under a budget, nothing is left to confirm but the bucket cap (no graph is built per
    move); at group, or without a budget, the confirmation is the one `confirmer` gives, and the budget is
    checked by the moves as well where there is one."""
    from overlapsat.solver.plan_checks import move_checks

    g = memory_graph(3)
    assert move_checks(Problem.of(g, 10**6, "free"), price) == (None, 10**6)
    confirm, budget = move_checks(Problem.of(g, "none", "free"), price)
    assert confirm is None and budget is None
    confirm, budget = move_checks(Problem.of(g, 10**6, "group"), price)
    assert confirm is not None and budget == 10**6
    capped = replace(Problem.of(g, 10**6, "free"), bucket_cap=1)  # the cap, a sum per bucket, is still confirmed
    confirm, budget = move_checks(capped, price)
    two = next(b for bs in all_bucketings(g, 200) for b in bs)
    assert budget == 10**6 and confirm is not None and confirm((two,), []) is False


@pytest.mark.parametrize("seed", range(SEEDS))
def test_the_moves_checks_together_are_validate_at_every_level_under_a_tight_budget(seed):
    """Decision 120: what `move_checks` leaves to confirm (the problem without its budget), and the move's peak
    in the layout within the budget, hold together exactly when `validate` accepts the move's plan at the level
    and budget, for every move from every legal bucketing and a random order valid at the level (the budget is
    that order's own peak: exactly at it)."""
    from overlapsat.solver.plan_checks import move_checks

    g = memory_graph(seed)
    rng = random.Random(seed)
    seen = {True: 0, False: 0}
    for level in ("free", "group", "global", "chain"):
        for bs in list(all_bucketings(g, 200))[:8]:
            h = materialize(g, list(bs), price)
            order = [h.names[v] for v in random_valid_order(h, rng, level)]
            budget = simulate(h, order).peak_memory
            confirm, checked = move_checks(Problem.of(g, budget, level), price)
            assert checked == budget
            mem, lay = MoveMemory(g, price, bs, order), _Layout(g, price, bs, order)
            for move in _moves(lay, {}, lay.pos, early=True):
                edit = move()
                if edit is None:
                    continue
                nbs, norder = _apply(tuple(lay.buckets), edit)
                truth = validate(Problem(materialize(g, list(nbs), price), budget, level), norder) == []
                ours = (confirm is None or confirm(nbs, norder)) and mem.peak(*edit) <= budget
                assert ours == truth, (level, bs, nbs)
                seen[truth] += 1
    if not seen[False]:
        pytest.skip("no move was refused here")
