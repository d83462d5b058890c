"""The contention polish (cost/polish.py) against brute force, and inside optimize.

Its promise: a valid order, no longer in MODEL.md's terms, no higher in
memory, never longer contended; so a certificate of the input order stands.
"""

import pytest

from overlapsat import GraphError, optimize, simulate, validate
from overlapsat.cost import Interference, simulate_contended
from overlapsat.cost.polish import polish_contended
from overlapsat.examples import fsdp_transformer
from tests.brute import brute_force, random_graph

SLOW = Interference(1.67, 1.36)


def test_polish_keeps_its_promise_against_brute_force():
    """On random graphs (several groups, coalesced collectives, multi-output buffers, launch and wait costs,
    every collective-order level): the result is one of brute force's valid orders, within its limits, no
    worse contended, and never below the best contended order brute force finds within the same limits."""
    improved = 0
    for seed in range(120):
        g, co = random_graph(seed, max_nodes=8)
        truth = brute_force(g, co)
        if truth is None or not truth.orders:
            continue
        start = min(truth.orders, key=lambda t: (t[1], t[0]))[0]  # a plain optimum, as the solver returns
        s0 = simulate(g, start)
        budget = s0.peak_memory if seed % 3 == 0 else None
        p = polish_contended(g, start, SLOW, memory_budget=budget, collective_order=co)
        assert any(o == p.order for o, _, _ in truth.orders), seed  # valid, by brute force's own rules
        assert validate(g, p.order, budget, collective_order=co) == []
        s = simulate(g, p.order)
        assert s.makespan <= s0.makespan and s.peak_memory <= s0.peak_memory, seed
        assert p.contended_after == simulate_contended(g, p.order, SLOW).makespan
        assert p.contended_after <= p.contended_before == simulate_contended(g, start, SLOW).makespan
        floor = min(simulate_contended(g, o, SLOW).makespan for o, ms, pk in truth.orders
                    if ms <= s0.makespan + 1e-9 and pk <= s0.peak_memory)  # brute force sums in its own order
        assert p.contended_after >= floor - 1e-9, seed
        assert polish_contended(g, start, SLOW, memory_budget=budget, collective_order=co) == p  # deterministic
        improved += p.contended_after < p.contended_before - 1e-9
    assert improved >= 1  # the property is not vacuous: some seeds do improve


def test_polish_refuses_bad_input():
    g, co = random_graph(3, max_nodes=8)
    order = list(range(len(g.nodes)))
    with pytest.raises(GraphError, match="interference"):
        polish_contended(g, order, (1.5, 1.2))
    with pytest.raises(GraphError, match="max_evaluations"):
        polish_contended(g, order, SLOW, max_evaluations=-1)
    bad = list(reversed(order))
    assert validate(g, bad, collective_order=co)  # a dependency runs backwards
    with pytest.raises(GraphError, match="order to polish"):
        polish_contended(g, bad, SLOW, collective_order=co)


def test_optimize_with_interference_keeps_the_certificate():
    """optimize(interference=) returns an order with the same status and bound, a makespan no longer, and a
    contended makespan no longer than the plain solve's; bad options are refused by name."""
    g = fsdp_transformer(layers=2, seed=1)
    plain = optimize(g, time_limit=3)
    r = optimize(g, time_limit=3, interference=SLOW)
    assert r.status == plain.status and r.bound == plain.bound and r.makespan <= plain.makespan
    assert validate(g, r.order, collective_order="group") == []
    pol = r.stats["contention_polish"]
    assert pol["contended_before_us"] == simulate_contended(g, plain.order, SLOW).makespan
    assert pol["contended_after_us"] == simulate_contended(g, r.order, SLOW).makespan <= pol["contended_before_us"]
    with pytest.raises(GraphError, match="interference"):
        optimize(g, time_limit=1, interference=1.5)
    with pytest.raises(GraphError, match="polish_evaluations"):
        optimize(g, time_limit=1, interference=SLOW, polish_evaluations=0)
