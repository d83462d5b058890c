"""The budget fit (heuristics/fit_budget.py, decision 68): hand-computed cases and a property on random graphs."""

from __future__ import annotations

import random

import pytest

from overlapsat import GraphBuilder, Problem, peak_memory, validate
from overlapsat.heuristics import run_all
from overlapsat.heuristics.fit_budget import _candidates, _next_in_sequence, fit_budget
from overlapsat.heuristics.portfolio import FITTED
from tests.helpers import random_graph, random_valid_order


def _prefetch_graph():
    """An activation A (100 B) read once, and a gather G (50 B) read after A is gone."""
    b = GraphBuilder("prefetch")
    b.compute("k0", 5, writes={"A": 100})
    b.compute("k2", 5, reads=["A"], writes={"B": 10})
    b.collective("c1", group="dp", op="all_gather", duration=20, writes={"G": 50})
    b.wait("w1", "c1")
    b.compute("k3", 5, reads=["G", "B"], writes={"out": 1}, outputs=["out"])
    return b.build()


def test_a_prefetch_across_the_peak_is_postponed_to_its_reader():
    g = _prefetch_graph()
    ids = [g.index[n] for n in ("c1", "k0", "k2", "w1", "k3")]  # raised: 50, 150, 160, 60, 61 B
    assert peak_memory(g, ids) == 160
    r = fit_budget(g, ids, 110, "group")
    assert [g.names[v] for v in r.order] == ["k0", "k2", "c1", "w1", "k3"]  # 100, 110, 60, 60, 61 B
    assert peak_memory(g, r.order) == 110 and r.stats["fits"] and r.stats["moves"] == 1


def test_the_last_reader_is_hoisted_when_postponing_does_not_help():
    b = GraphBuilder("hoist")
    b.compute("k0", 1, writes={"A": 100})
    b.compute("big", 1, writes={"Y": 100})
    b.compute("free", 1, reads=["A"], writes={"C": 10})
    b.compute("end", 1, reads=["Y", "C"], writes={"out": 1}, outputs=["out"])
    g = b.build()  # as built: 100, 200, 210 -> 110, 111 B
    # postponing k0 past "big" peaks at 200 B again (A is allocated beside Y): only the hoist lowers the excess
    r = fit_budget(g, list(range(4)), 110, "group")
    assert [g.names[v] for v in r.order] == ["k0", "free", "big", "end"]  # 100, 110 -> 10, 110, 111 B
    assert peak_memory(g, r.order) == 111 and r.stats["moves"] == 1 and not r.stats["fits"]
    r = fit_budget(g, list(range(4)), 111, "group")
    assert peak_memory(g, r.order) == 111 and r.stats["fits"]


def test_a_hoisted_reader_brings_the_ancestors_it_waits_for():
    b = GraphBuilder("chain")
    b.compute("k0", 1, writes={"A": 100})
    b.compute("big", 1, writes={"Y": 100})
    b.compute("view", 1, writes={"V": 0})
    b.compute("free", 1, reads=["A", "V"], writes={"C": 10})
    b.compute("end", 1, reads=["Y", "C"], writes={"out": 1}, outputs=["out"])
    g = b.build()
    assert fit_budget(g, list(range(5)), 111, "group").stats["fits"]
    moves = {tuple(g.names[v] for v in m.nodes): m.dest
             for m in _candidates(g, list(range(5)), 1, _next_in_sequence(g, "group"), {}, "group", 8)}
    assert moves == {("k0",): 2, ("view", "free"): 1}  # k0 before its reader; "free" with the view it reads


def test_the_portfolio_fits_an_over_budget_pass_and_ranks_it():
    g = _prefetch_graph()  # as built: 100, 110, 60, 60, 61 B; raise_comms puts the gather first (160 B)
    rows = {h.name: h for h in run_all(g, memory_budget="1.0x")}
    assert not rows["raise_comms"].valid and rows["raise_comms"].peak_memory == 160
    fitted = rows["raise_comms" + FITTED]
    assert fitted.valid and fitted.peak_memory == 110
    assert all(FITTED not in name for name in (h.name for h in run_all(g)))  # no budget: nothing to fit


@pytest.mark.parametrize("level", ["chain", "global", "group", "free"])
def test_fitted_orders_keep_every_rule_and_never_add_excess(level):
    """On random graphs (memory, atomic pairs, several groups and waits), from random valid orders, under
    budgets between the least and the largest peak seen: the fitted order breaks no rule but, at most, the
    budget, its excess over the budget summed over the steps is no larger, and "fits" is true exactly when its
    peak is within the budget."""
    rng = random.Random(68)
    checked = 0
    for seed in range(120):
        g = random_graph(seed, n=rng.randint(6, 16), groups=rng.choice([1, 2, 3]), atomic=seed % 3 == 0)
        orders = [random_valid_order(g, rng, level) for _ in range(6)]
        peaks = sorted(peak_memory(g, o) for o in orders)
        if peaks[0] == peaks[-1]:
            continue
        budget = rng.randint(peaks[0], peaks[-1] - 1)
        for o in orders:
            r = fit_budget(g, o, budget, level)
            assert sorted(r.order) == list(range(len(g.nodes)))
            p = Problem.of(g, None, level)
            assert validate(p, r.order) == [], (seed, level)
            assert _excess(g, r.order, budget) <= _excess(g, o, budget)
            assert r.stats["fits"] == (peak_memory(g, r.order) <= budget)
            checked += 1
    assert checked > 200


def _excess(g, order, budget):
    """Bytes over the budget summed over the steps, from MODEL.md's curve (written here, not imported)."""
    pos = {v: i for i, v in enumerate(order)}
    live, total = 0, 0
    for i, v in enumerate(order):
        freed = 0
        for j in range(len(g.buffers)):
            if g.b_prod[j] == v:
                live += g.b_alloc[j]
            if i == 0 and g.b_prod[j] < 0 and g.b_fin[j]:
                live += g.b_free[j]
        total += max(0, live - budget)
        for j in range(len(g.buffers)):
            if g.b_out[j] or (g.b_prod[j] < 0 and not g.b_fin[j]):
                continue
            readers = g.b_cons[j]
            last = max(pos[c] for c in readers) if readers else (pos[g.b_prod[j]] if g.b_prod[j] >= 0 else 0)
            if last == i:
                freed += g.b_free[j]
        live -= freed
    return total
