"""Decision 101, a search's overhead: the cyclic collector is paused for a whole search, so a search must leave no
reference cycles (what it drops is freed at once) and restore the collector as it found it; and Inductor's passes
run once on a graph, not again on the same graph under another name."""

import gc

import pytest

from overlapsat import Problem, optimize, validate
from overlapsat.cost import cost_model
from overlapsat.examples import generate
from overlapsat.solver.plan_search import optimize_plan
from tests.solver.test_joint import price


@pytest.fixture
def collector_off():
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


def _graph():
    return generate("fsdp", seed=3, layers=8)  # LNS windows, the joint model's candidates, the portfolio


def test_an_order_search_leaves_no_reference_cycles(collector_off):
    """Before: every LNS window's CP-SAT model (ortools binds its CamelCase aliases to it), each graph the
    portfolio ran on (its pass memo held the graph) and each canonical problem (its own cache) were cycles."""
    # CP-SAT models were built (on fsdp the passes meet the bound first; here the fill moves, since decision 114)
    r = optimize(Problem.of(generate("tp", seed=3, layers=4)), time_limit=30, work_limit=1, fill_share=0)
    assert r.stats["lns"]["windows"] > 0
    del r
    assert gc.collect() == 0


def test_a_plan_search_leaves_no_reference_cycles(collector_off):
    r = optimize_plan(Problem.of(_graph()), price, time_limit=3)
    assert r.stats["plan"]["bucketings_scored"] > 0
    del r
    assert gc.collect() == 0


@pytest.mark.parametrize("on", [True, False])
def test_a_search_pauses_the_collector_and_leaves_it_as_found(on):
    seen = []
    was = gc.isenabled()
    (gc.enable if on else gc.disable)()
    try:
        optimize_plan(Problem.of(_graph()), price, time_limit=1, on_phase=lambda _: seen.append(gc.isenabled()))
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen and not any(seen)
    assert after is on


@pytest.fixture
def portfolio_runs(monkeypatch):
    """Each run of Inductor's passes inside `optimize`'s portfolio phase, by the graph's node count."""
    from overlapsat.solver import search

    runs, real = [], search.run_all

    def counted(problem, *args, **kwargs):
        runs.append(len(problem.graph.nodes))
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(search, "run_all", counted)
    return runs


def test_a_problem_that_is_its_own_canonical_form_runs_the_passes_once(portfolio_runs):
    g = _graph()
    a = optimize(Problem.of(g), time_limit=1)
    assert len(portfolio_runs) == 2  # from the input order, and from the canonical form
    portfolio_runs.clear()
    own = Problem.of(g).canonical
    assert own.canonical is own
    b = optimize(own, time_limit=1)
    assert len(portfolio_runs) == 1
    assert not validate(g, a.order, a.memory_budget) and not validate(own.graph, b.order, b.memory_budget)


def test_the_final_order_starts_from_the_orders_the_portfolio_judged(portfolio_runs, monkeypatch):
    """The plan search's final `optimize` on the bucketing the whole portfolio judged best gets its orders (and
    its graph): the passes do not run again there, nor a second time on another form of the same graph. (Only
    the plan search's own `optimize` calls count: the bound's lift, where the clock lets it run, orders another
    graph.)"""
    from overlapsat.solver import plan_search

    inside, real = [], plan_search.optimize

    def final(*args, **kwargs):
        before = len(portfolio_runs)
        out = real(*args, **kwargs)
        inside.append(len(portfolio_runs) - before)
        return out

    monkeypatch.setattr(plan_search, "optimize", final)
    r = optimize_plan(Problem.of(_graph()), cost_model("h200").duration, time_limit=60, work_limit=3)
    polish = r.stats["plan"].get("polish", {})
    assert not r.cut_by_wall_clock
    assert r.stats["plan"]["bucketings_judged"] > 1 and r.plan.buckets
    assert inside[0] == 0 and sum(inside) == (1 if "after_us" in polish else 0)
