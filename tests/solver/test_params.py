"""SolveParams is checked once, naming the culprit; the time budget flags a wall-clock cut."""

import logging

import pytest

from overlapsat import GraphError, load_graph, optimize
from overlapsat.examples import bundled
from overlapsat.solver import SolveParams, TimeBudget


@pytest.mark.parametrize("kw,culprit", [
    ({"time_limit": 0}, "time_limit"), ({"time_limit": float("nan")}, "time_limit"),
    ({"workers": 0}, "workers"), ({"workers": 1.5}, "workers"), ({"collective_order": "none"}, "collective_order"),
    ({"collective_order": "fifo"}, "collective_order"),
    ({"work_limit": -1}, "work_limit"), ({"lns_window": 100, "lns_max_window": 50}, "lns_max_window"),
    ({"deterministic": "yes"}, "deterministic"), ({"lns_min_nodes": 0}, "lns_min_nodes"),
])
def test_bad_options_name_the_culprit(kw, culprit):
    with pytest.raises(GraphError, match=culprit):
        SolveParams(**kw)


def test_unknown_option_and_mixed_forms():
    g = load_graph(bundled("tp_small"))
    with pytest.raises(GraphError, match="unknown solver option.*time_limt"):
        optimize(g, time_limt=3)
    with pytest.raises(GraphError, match="either as params or as keywords"):
        optimize(g, SolveParams(), time_limit=3)


def test_work_limit_defaults_to_a_rate_of_the_time_limit():
    assert SolveParams(time_limit=10, work_per_second=0.8).total_work == pytest.approx(8.0)
    assert SolveParams(time_limit=10, work_limit=2.0).total_work == 2.0


def test_time_budget_flags_a_wall_clock_cut_in_deterministic_mode():
    now = [0.0]
    tb = TimeBudget(SolveParams(time_limit=1.0, work_limit=5.0), clock=lambda: now[0])
    assert not tb.exhausted(True)
    tb.spend(1.0)
    now[0] = 0.9  # within the time limit: the work binds
    assert not tb.exhausted(True) and not tb.cut_by_wall_clock
    now[0] = 1.0  # at the time limit: cut, and flagged (decision 57: the limit is a wall-clock promise)
    assert tb.exhausted(True) and tb.cut_by_wall_clock
    tb = TimeBudget(SolveParams(time_limit=100.0, work_limit=1.0), clock=lambda: 0.0)
    tb.spend(1.0)
    assert tb.exhausted(True) and not tb.cut_by_wall_clock


def test_a_phase_budget_ends_by_its_parents_deadline_and_flags_the_parent():
    now = [0.0]
    parent = TimeBudget(SolveParams(time_limit=1.0, work_limit=5.0), clock=lambda: now[0])
    now[0] = 0.5
    child = TimeBudget(SolveParams(time_limit=10.0, work_limit=5.0), parent=parent)
    assert child.deadline == parent.deadline == 1.0 and child.wall_left() == pytest.approx(0.5)
    # a deterministic phase is not cut at its own share of the time (its work ends it), a timed one is
    assert TimeBudget(SolveParams(time_limit=0.1, work_limit=5.0), parent=parent).deadline == 1.0
    assert TimeBudget(SolveParams(time_limit=0.1, deterministic=False), parent=parent).deadline == pytest.approx(0.6)
    now[0] = 1.0
    assert child.exhausted(True) and child.cut_by_wall_clock and parent.cut_by_wall_clock


def test_optimize_warns_and_flags_when_the_clock_cuts(caplog):
    g = load_graph(bundled("tp_small"))
    with caplog.at_level(logging.WARNING):
        r = optimize(g, time_limit=0.3, work_limit=1000.0)
    assert r.cut_by_wall_clock
    assert any("wall clock" in rec.message for rec in caplog.records)


def test_a_budget_started_at_the_calls_entry_counts_what_came_before(monkeypatch):
    """Decision 105: what a call checks before its budget exists (the memory floor: 0.25-0.45 s at 7-13k nodes)
    counts against its limit. `optimize_plan` and `optimize` take the time at entry, and their budget starts there,
    before the floor's check, not after it."""
    import importlib
    import time

    import overlapsat.solver.plan_search as ps
    import overlapsat.solver.search as search_mod
    from overlapsat import Problem
    from overlapsat.cost import cost_model

    tb = TimeBudget(SolveParams(time_limit=5.0), clock=lambda: 100.0, started=98.0)
    assert tb.deadline == 103.0 and tb.elapsed() == 2.0 and tb.wall_left() == 3.0

    opt = importlib.import_module("overlapsat.solver.optimize")
    for mod, budget_mod in ((ps, ps), (opt, search_mod)):
        events: list[tuple[str, float | None]] = []
        real_floor = mod.check_floor

        def floor(*a, real=real_floor, ev=events, **k):
            ev.append(("floor", time.monotonic()))
            return real(*a, **k)

        class Recording(TimeBudget):
            def __init__(self, *a, started=None, ev=events, **k):
                ev.append(("budget", started))
                super().__init__(*a, started=started, **k)

        monkeypatch.setattr(mod, "check_floor", floor)
        monkeypatch.setattr(budget_mod, "TimeBudget", Recording)
        p = Problem.of(load_graph(bundled("fsdp_small")), "1.0x", "group")
        if mod is ps:
            ps.optimize_plan(p, cost_model("h200").duration, time_limit=3.0, joint=False)
        else:
            optimize(p, time_limit=3.0)
        floor_at = next(t for what, t in events if what == "floor")
        started = next(t for what, t in events if what == "budget")
        assert started is not None and started <= floor_at, events


def test_workers_for_a_deterministic_search_are_said_once_per_call_not_dropped_silently(caplog):
    """Decision 118: `workers` > 1 stays valid with a deterministic search (which runs one CP-SAT worker, decision
    84), but the call says so once: not once per inner search of a plan or per budget of a frontier."""
    from overlapsat import Problem, optimize_plan, plan_frontier
    from overlapsat.cost import cost_model

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "workers=" in r.getMessage()]

    g = load_graph(bundled("tp_small"))
    price = cost_model("h200").duration
    with caplog.at_level(logging.WARNING):
        optimize(g, time_limit=30, work_limit=0.05, workers=3)
        assert said() == ["workers=3: a deterministic search runs one CP-SAT worker, never interleaved (decision 84), "
                          "so that its plan is the same on any machine; pass deterministic=False to use 3"]
        caplog.clear()
        optimize_plan(Problem.of(g), price, time_limit=30, work_limit=0.05, workers=2)
        assert len(said()) == 1  # the plan's inner searches run on its clock and say nothing more
        caplog.clear()
        plan_frontier(g, price, budgets=["1.0x", None], time_limit=30, work_limit=0.05, workers=2)
        assert len(said()) == 1
        caplog.clear()
        optimize(g, time_limit=30, work_limit=0.05, workers=1)
        optimize(g, time_limit=2, workers=2, deterministic=False)
        assert said() == []
