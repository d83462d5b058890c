"""Each constraint family: a small feasible and a small infeasible case; hints; exactness."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from overlapsat import GraphBuilder, simulate
from overlapsat.solver import build, model_units
from tests.helpers import graphs, random_valid_order

SCALE = 100.0


def solve(md, **fix):
    for var, val in fix.values():
        md.m.add(var == val)
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = 5
    s.parameters.num_workers = 1
    return s, s.solve(md.m)


def two_compute_one_comm():
    b = GraphBuilder()
    b.compute("a", 1.0, writes={"A": 10})
    b.collective("c", group="g", duration=2.0, reads=["A"], writes={"C": 10})
    b.compute("x", 3.0, writes={"X": 10})
    b.wait("w", "c")
    b.compute("u", 1.0, reads=["C", "X"], writes={"U": 1}, outputs=["U"])
    return b.build()


def test_compute_stream_no_overlap():
    g = two_compute_one_comm()
    md = build(g, scale=SCALE, horizon=10_000)
    _, st_ = solve(md)
    assert st_ == cp_model.OPTIMAL
    md = build(g, scale=SCALE, horizon=10_000)
    s, st_ = solve(md, a=(md.issue[0], 0), x=(md.issue[2], 50))  # x inside a's 100-unit slot
    assert st_ == cp_model.INFEASIBLE


def test_dependencies():
    g = two_compute_one_comm()
    md = build(g, scale=SCALE, horizon=10_000)
    _, st_ = solve(md, c=(md.issue[1], 0))  # collective before its producer a
    assert st_ == cp_model.INFEASIBLE


def test_waits_block_until_transfer_end():
    g = two_compute_one_comm()
    md = build(g, scale=SCALE, horizon=10_000)
    s, st_ = solve(md)
    c, w = g.index["c"], g.index["w"]
    assert s.value(md.wait_end[w]) >= s.value(md.comm_start[c]) + 200
    md = build(g, scale=SCALE, horizon=10_000)
    # a 100 + issue slot 1 + x 300 + wait slot 1 + u 100 = 502 units when the comm hides fully
    _, st_ = solve(md, m=(md.makespan, 502))
    assert st_ == cp_model.OPTIMAL
    md = build(g, scale=SCALE, horizon=10_000)
    _, st_ = solve(md, m=(md.makespan, 501))
    assert st_ == cp_model.INFEASIBLE


def test_collective_order_group_and_global():
    b = GraphBuilder()
    b.compute("k", 5.0, writes={"K": 1})
    b.collective("c1", group="g1", duration=1.0, reads=["K"])  # needs k
    b.collective("c2", group="g2", duration=9.0)  # free
    b.wait("w1", "c1")
    b.wait("w2", "c2")
    g = b.build()
    md = build(g, scale=SCALE, horizon=10_000, collective_order="group")
    s, st_ = solve(md)
    assert st_ == cp_model.OPTIMAL and s.value(md.issue[2]) < s.value(md.issue[1])  # c2 raised above c1
    md = build(g, scale=SCALE, horizon=10_000, collective_order="global")
    _, st_ = solve(md, c2=(md.issue[2], 0))
    assert st_ == cp_model.INFEASIBLE


def test_atomic_groups():
    b = GraphBuilder()
    b.compute("a", 1.0)
    b.compute("b", 1.0)
    b.compute("c", 1.0)
    b.atomic("a", "b")
    g = b.build()
    md = build(g, scale=SCALE, horizon=10_000)
    _, st_ = solve(md, a=(md.issue[0], 0), c=(md.issue[2], 100))  # c right after a, before b
    assert st_ == cp_model.INFEASIBLE
    md = build(g, scale=SCALE, horizon=10_000)
    _, st_ = solve(md, c=(md.issue[2], 0))
    assert st_ == cp_model.OPTIMAL


def test_memory_budget():
    b = GraphBuilder()
    b.compute("p1", 1.0, writes={"B1": 100})
    b.compute("q1", 1.0, reads=["B1"], writes={"O1": 1}, outputs=["O1"])
    b.compute("p2", 1.0, writes={"B2": 100})
    b.compute("q2", 1.0, reads=["B2"], writes={"O2": 1}, outputs=["O2"])
    g = b.build()
    assert simulate(g).peak_memory == 102  # q2: O1 + B2 + O2
    md = build(g, scale=SCALE, horizon=10_000, memory_budget=102)
    _, st_ = solve(md)
    assert st_ == cp_model.OPTIMAL
    md = build(g, scale=SCALE, horizon=10_000, memory_budget=150)
    _, st_ = solve(md, p1=(md.issue[0], 0), p2=(md.issue[2], 100))  # p1 then p2: both live, 200 > 150
    assert st_ == cp_model.INFEASIBLE
    md = build(g, scale=SCALE, horizon=10_000, memory_budget=101)
    _, st_ = solve(md)
    assert st_ == cp_model.INFEASIBLE


@settings(max_examples=60, deadline=None)
@given(graphs(max_nodes=14), st.integers(0, 1000))
def test_hint_is_complete_and_feasible(g, seed):
    order = random_valid_order(g, random.Random(seed))
    budget = simulate(g, order).peak_memory
    md = build(g, scale=SCALE, horizon=model_units(g, order, SCALE), memory_budget=budget)
    md.hint_order(order)
    s = cp_model.CpSolver()
    s.parameters.fix_variables_to_their_hinted_value = True
    s.parameters.num_workers = 1
    s.parameters.max_time_in_seconds = 5
    st_ = s.solve(md.m)
    assert st_ in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    assert s.objective_value == model_units(g, order, SCALE)
    assert md.order_from(s) == order


@settings(max_examples=60, deadline=None)
@given(graphs(max_nodes=12))
def test_extracted_order_never_worse_than_objective(g):
    md = build(g, scale=SCALE, horizon=model_units(g, list(range(len(g))), SCALE))
    s = cp_model.CpSolver()
    s.parameters.num_workers = 1
    s.parameters.max_time_in_seconds = 5
    assert s.solve(md.m) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    order = md.order_from(s)
    assert simulate(g, order).makespan <= s.objective_value / SCALE + 1e-9


def test_solver_log_says_hint_complete_and_feasible():
    from overlapsat import load_graph, optimize
    from overlapsat.examples import bundled

    g = load_graph(bundled("tp_small"))  # the best heuristic is not optimal here, so CP-SAT runs
    r = optimize(g, time_limit=5, log_search=True)
    text = "\n".join(r.stats["log"])
    assert "The solution hint is complete and is feasible" in text


@pytest.mark.parametrize("order_kind", ["input", "random"])
def test_model_units_matches_fixed_solve(order_kind):
    from overlapsat.examples import fsdp_transformer

    g = fsdp_transformer(layers=1, seed=4)
    order = list(range(len(g))) if order_kind == "input" else random_valid_order(g, random.Random(1))
    assert model_units(g, order, SCALE) / SCALE >= simulate(g, order).makespan
