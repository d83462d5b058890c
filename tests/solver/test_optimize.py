"""optimize(): brute-force optima, budgets, collective order, limits, determinism, fallbacks."""

import logging
import time

import pytest
from hypothesis import given, settings

from overlapsat import (
    GraphBuilder,
    GraphError,
    InfeasibleBudgetError,
    Problem,
    Status,
    load_graph,
    load_schedule,
    optimize,
    simulate,
    validate,
)
from overlapsat.heuristics import run_all
from tests.helpers import all_valid_orders, graphs, random_graph, two_paths


@pytest.mark.parametrize("seed", range(30))
def test_matches_brute_force(seed):
    g = random_graph(seed, 9, groups=2, p_coll=0.35)
    best = min(simulate(g, o).makespan for o in all_valid_orders(g))
    r = optimize(g, time_limit=5)
    assert r.makespan == pytest.approx(best)
    assert r.bound <= best + 1e-9
    assert validate(g, r.order) == []
    assert r.status in (Status.OPTIMAL, Status.HEURISTIC_OPTIMAL)


def budget_graph():
    # hiding the collective means issuing it before big/shrink, so its 100 B output
    # lives beside B: peak 201 instead of 102
    b = GraphBuilder("budget")
    b.compute("big", 4.0, writes={"B": 100})
    b.compute("shrink", 4.0, reads=["B"], writes={"S": 1})
    b.compute("p", 0.5, writes={"P": 1})
    b.collective("c", group="g", duration=8.0, reads=["P"], writes={"C": 100})
    b.wait("w", "c")
    b.compute("u", 1.0, reads=["C", "S"], writes={"U": 1}, outputs=["U"])
    return b.build()


def test_memory_budget_forces_worse_makespan():
    g = budget_graph()
    free = optimize(g, time_limit=5)
    tight = optimize(g, time_limit=5, memory_budget="102B")
    assert free.peak_memory > 102 and tight.peak_memory <= 102
    assert tight.makespan > free.makespan + 1e-9
    for r, bud in ((free, None), (tight, 102)):
        best = min(simulate(g, o).makespan for o in all_valid_orders(g) if bud is None or simulate(g, o).peak_memory <= bud)
        assert r.makespan == pytest.approx(best)


def test_infeasible_budget_names_lowest_peak():
    """Below the memory floor (decision 71) the proof names the step and what it holds in every order: here the
    least peak itself, 102 B (reached under the budget 102B above)."""
    g = budget_graph()
    with pytest.raises(InfeasibleBudgetError, match=r"unreachable.*proven: the step of 'u' holds at least 102 B"):
        optimize(g, time_limit=5, memory_budget="50B")


def test_collective_order_enforced():
    b = GraphBuilder()
    b.compute("k", 5.0, writes={"K": 1})
    b.collective("c1", group="g1", duration=1.0, reads=["K"])
    b.collective("c2", group="g2", duration=9.0)
    b.wait("w1", "c1")
    b.wait("w2", "c2")
    b.compute("z", 5.0)
    g = b.build()
    grp = optimize(g, time_limit=5, collective_order="group")
    glob = optimize(g, time_limit=5, collective_order="global")
    assert grp.names.index("c2") < grp.names.index("c1")
    assert glob.names.index("c1") < glob.names.index("c2")
    assert validate(g, glob.order, collective_order="global") == []
    assert glob.makespan >= grp.makespan


def test_time_limit_honoured():
    from overlapsat.examples import generate

    g = generate("tp", nodes=600, seed=3)
    t = time.monotonic()
    r = optimize(g, time_limit=3.0)
    assert time.monotonic() - t < 3.0 + 1.5
    assert validate(g, r.order) == []


def test_deterministic():
    from overlapsat.examples import generate

    g = generate("fsdp", nodes=300, seed=5)
    a = optimize(g, time_limit=2.0, workers=2)
    b = optimize(g, time_limit=2.0, workers=2)
    assert a.order == b.order


@settings(max_examples=25, deadline=None)
@given(graphs(max_nodes=20))
def test_never_worse_than_best_heuristic(g):
    r = optimize(g, time_limit=2)
    hb = min(h.makespan for h in run_all(g) if h.valid)
    assert r.makespan <= hb + 1e-9
    assert validate(g, r.order) == []
    assert r.bound <= r.makespan + 1e-9


def test_progress_callback_and_result_round_trip(tmp_path):
    from overlapsat import load_graph
    from overlapsat.examples import bundled

    g = load_graph(bundled("tp_small"))  # not solved by a heuristic, so the search reports progress
    seen = []
    r = optimize(g, time_limit=5, on_progress=seen.append)
    assert seen and all(p.bound_us <= p.makespan_us + 1e-9 for p in seen)
    p = tmp_path / "s.json"
    r.save(p)
    s = load_schedule(p, g)
    assert s.order == r.names and s.metrics["status"] == r.status.value


def test_bad_options():
    g = random_graph(1, 5)
    for kw in ({"time_limit": 0}, {"time_limit": float("nan")}, {"collective_order": "x"}, {"workers": 0}):
        with pytest.raises(GraphError):
            optimize(g, **kw)


def test_stopping_rule_stops_early():
    from overlapsat import GapBelow
    from overlapsat.examples import generate

    g = generate("tp", nodes=300, seed=1)
    calls = []

    def rule(p):
        calls.append(p)
        return True  # stop at the first solution

    r = optimize(g, time_limit=10, stop_when=rule, deterministic=False)
    assert len(calls) == 1 and r.stats["stopped_by_rule"]
    assert validate(g, r.order) == []
    # GapBelow maps onto CP-SAT's own gap limit, so it also works in deterministic mode
    r2 = optimize(g, time_limit=10, stop_when=GapBelow(0.5))
    assert validate(g, r2.order) == [] and (r2.gap <= 0.5 or r2.stats.get("solver_status") == "FEASIBLE")
    assert GapBelow(0.5)(type(calls[0])(0.0, 100.0, 60.0)) and not GapBelow(0.1)(type(calls[0])(0.0, 100.0, 60.0))
    with pytest.raises(GraphError):
        GapBelow(1.5)


def test_result_is_small_and_its_plan_figures_are_typed():
    """Issue 49: `Result` holds the best plan, a bound, a status, what stopped it and typed statistics (PyVRP's
    size); the plan's figures are fields of `PlanInfo`, not string keys."""
    import dataclasses

    from overlapsat import PlanInfo, Problem, Result, Statistics, optimize_plan

    assert [f.name for f in dataclasses.fields(Result)] == ["graph", "best", "status", "bound", "stopped_by", "stats",
                                                            "plan_info"]
    from overlapsat.cost import cost_model
    from overlapsat.examples import bundled

    g = load_graph(bundled("fsdp_small"))
    r = optimize(g, time_limit=2)
    assert isinstance(r.stats, Statistics) and r.over == "orders" and r.plan_info is None
    assert r.method == r.stats.method and r.baseline["makespan"] == simulate(g).makespan
    assert "total_s" in r.stats and r.stats["work_used"] == r.stats.phases["work_used"]
    p = optimize_plan(Problem.of(g, memory_budget="none"), cost_model("h200").duration, time_limit=2)
    assert p.over == "plans" and isinstance(p.plan_info, PlanInfo)
    assert p.plan_info.unbucketed_us is None or p.plan_info.unbucketed_us >= p.makespan - 1e-6


def test_a_search_with_no_time_for_the_canonical_form_runs_on_the_given_order():
    """Decision 64: with less left of its clock than the canonical form costs, a search runs on the order as given;
    the answer is valid, flagged as cut by the clock (it may depend on the layout), and the caller's problem keeps
    its own views."""
    from overlapsat import Problem
    from overlapsat.examples import generate
    from overlapsat.solver.params import TimeBudget

    g = generate("fsdp", seed=1, layers=100)  # 2,800 nodes: the canonical form costs more than the 0.01 s left
    pb = Problem.of(g)
    r = optimize(pb, time_limit=5, clock=TimeBudget.left_of(5, 5 - 1e-6))
    assert r.stats.get("on_given_order") and r.cut_by_wall_clock and r.stopped_by in ("clock", "proof")
    assert not validate(g, r.order, r.memory_budget) and r.makespan <= r.baseline["makespan"] + 1e-6
    # the status alone (heuristic, timed out) does not say the order search never ran: the message does
    assert r.stopped_by == "proof" or r.message.startswith("the time limit ended the search before its order search")
    assert not pb.canonical_known
    full = optimize(pb, time_limit=5)
    assert not full.stats.get("on_given_order")


def test_a_canonical_input_order_fitted_is_not_reported_as_cut(caplog):
    """The canonical form's own order, over the budget and fitted under it, is renamed after the portfolio; the
    check for fits a deadline cut must pick the rows run_all fitted, or it reports a cut that never happened and
    calls a deterministic search "ended by the wall clock" (found on this 5-node graph, 0.03 s of 5)."""
    with caplog.at_level(logging.INFO):
        r = optimize(Problem.of(two_paths(), 100, "free"), time_limit=5)
    assert r.makespan == 19.0 and r.stopped_by == "proof" and not r.cut_by_wall_clock
    assert "wall clock" not in caplog.text and "not started past their share" not in caplog.text


@pytest.mark.parametrize("seed", range(12))
def test_an_order_given_as_a_result_keeps_its_figures_and_a_true_bound(seed):
    """Decision 121: `order_result` wraps a valid order without a search (the plan's polish, where its work cannot pay
    for ordering the graph again): its figures are the simulator's, its bound (the graph's compute) is below every
    valid order's makespan (brute force), and an order that is not valid is refused by name."""
    from overlapsat.solver.optimize import order_result

    g = random_graph(seed, 8, groups=2, p_coll=0.35)
    orders = list(all_valid_orders(g))
    least = min(simulate(g, o).makespan for o in orders)
    p = Problem.of(g, None, "free")
    r = order_result(p, "moves", orders[-1], "a note")
    assert r.makespan == pytest.approx(simulate(g, orders[-1]).makespan) and r.order == list(orders[-1])
    assert r.bound <= least + 1e-9 and r.method == "moves" and r.message == "a note"
    assert r.status == (Status.HEURISTIC_OPTIMAL if r.makespan <= r.bound + 1e-9 else Status.HEURISTIC_TIMEOUT)
    assert validate(g, r.order) == []
    for k in range(len(g.nodes) - 1):  # an adjacent swap that breaks a dependency (not a wait before its collective)
        bad = list(orders[-1])
        bad[k], bad[k + 1] = bad[k + 1], bad[k]
        try:
            simulate(g, bad)
        except GraphError:  # refused by the simulator already, by name
            continue
        if validate(p, bad) == []:
            continue
        with pytest.raises(GraphError, match="not a valid order"):
            order_result(p, "moves", bad, "a note")
        break
