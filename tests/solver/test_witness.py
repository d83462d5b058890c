"""The witness search against brute force: at the least peak of every valid order (tests/brute.py, written from
MODEL.md) it finds an order the validator accepts, and one byte lower it finds none."""

from __future__ import annotations

import pytest

import overlapsat as osat
from overlapsat.solver.witness import witness
from tests.brute import brute_force, edge_graph, random_graph


def _graphs():
    for seed in range(160):
        yield (edge_graph if seed % 2 else random_graph)(seed, max_nodes=9)


@pytest.mark.parametrize("k", range(4))
def test_witness_finds_an_order_at_the_least_peak_and_none_below(k: int) -> None:
    checked = 0
    for i, (g, co) in enumerate(_graphs()):
        if i % 4 != k:
            continue
        truth = brute_force(g, co, limit=50_000)
        if truth is None or not truth.orders:
            continue
        least = truth.min_peak
        w = witness(osat.Problem.of(g, least, co))
        assert w.complete and w.order is not None, (i, co)
        assert not osat.validate(g, w.order, least, collective_order=co), (i, co)
        below = witness(osat.Problem.of(g, least - 1, co)) if least > 0 else None
        assert below is None or (below.complete and below.order is None), (i, co)
        checked += 1
    assert checked > 25


def test_witness_with_no_budget_is_any_valid_order() -> None:
    g, co = random_graph(3, max_nodes=9)
    w = witness(osat.Problem.of(g, "none", co))
    assert w.order is not None and not osat.validate(g, w.order, collective_order=co)


def test_witness_stops_at_its_cap() -> None:
    g, co = random_graph(5, max_nodes=9)
    truth = brute_force(g, co)
    w = witness(osat.Problem.of(g, truth.min_peak - 1, co), max_steps=1)
    assert w.order is None and not w.complete
