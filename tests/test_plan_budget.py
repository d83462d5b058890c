"""Plans within the memory a user has (decision 63) and the speed-memory trade-off (`plan_frontier`)."""

from __future__ import annotations

import json
import math
import random

import pytest

import overlapsat as osat
from overlapsat import Problem, optimize_plan
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.frontier import plan_frontier
from tests.test_cli import run

H200 = cost_model("h200").duration
DEFAULT = "the input order's peak (the default)"


@pytest.mark.parametrize("example", ["fsdp_small", "fsdp_medium", "tp_small", "moe_small"])
def test_a_plan_given_no_budget_never_peaks_above_the_input_order(example):
    """The input order's peak is recomputed here by a simulator of MODEL.md written for the tests
    (`tests/helpers.naive_peak`), and the plan's order is validated on its bucketed graph under it."""
    from tests.helpers import naive_peak

    g = osat.load_graph(bundled(example))
    input_peak = naive_peak(g, list(range(len(g.nodes))))
    r = optimize_plan(Problem.of(g), H200, time_limit=2)
    assert r.memory_budget == input_peak and r.plan_info.budget_source == DEFAULT
    ix = r.bucketed.index
    assert naive_peak(r.bucketed, [ix[n] for n in r.names]) <= input_peak
    assert not osat.validate(r.bucketed, [ix[n] for n in r.names], input_peak)
    free = optimize_plan(Problem.of(g, "none"), H200, time_limit=2)
    assert free.memory_budget is None and free.plan_info.budget_source == "none"
    given = optimize_plan(Problem.of(g, "1.5x"), H200, time_limit=2)
    assert given.plan_info.budget_source == "given" and given.peak_memory <= given.memory_budget


def test_where_only_the_input_order_fits_the_plan_is_the_input_order():
    """At the input order's peak, a graph whose every other order peaks higher (a chain of kernels and a
    gather whose output lives across them when moved): the plan must still exist, with no bucket."""
    from overlapsat import Buffer, Graph, Node, NodeKind

    C, K, W = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT
    nodes = (Node("a", C, 5.0), Node("ag", K, 20.0, group="dp", op="all_gather", nbytes=1 << 20, group_size=2),
             Node("w", W, 0.0, collective="ag"), Node("b", C, 5.0), Node("c", C, 5.0))
    bufs = (Buffer("xa", "a", ("b",), 100, 100), Buffer("y", "ag", ("w", "c"), 1000, 1000),
            Buffer("xb", "b", ("c",), 100, 100))
    g = Graph(nodes, bufs, name="tight")
    r = optimize_plan(Problem.of(g), H200, time_limit=1)
    assert r.peak_memory <= osat.peak_memory(g) and r.buckets == ()


def test_the_cli_shows_the_peak_beside_the_budget_and_its_source(tmp_path):
    out = tmp_path / "p.json"
    r = run("plan", "fsdp_medium", "--profile", "h200", "--time-limit", "3", "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "(budget 7.66 GiB, the input order's peak (the default))" in r.stdout
    r = run("plan", "fsdp_medium", "--profile", "h200", "--time-limit", "3", "--out", str(out), "--json",
            "--memory-budget", "none")
    got = json.loads(r.stdout)
    assert got["budget_source"] == "none" and got["memory_budget"] is None


def test_compare_keeps_a_peer_over_the_budget_and_marks_it():
    """fsdp_medium: torch's greedy buckets peak at 12.58 GiB with their best pass, above the input order's
    7.66 GiB and above 1.2 x that: the row stays, marked; the plan row stays within the budget."""
    g = osat.load_graph(bundled("fsdp_medium")).reprice(cost_model("h200"))
    for budget, limit in ((None, osat.peak_memory(g)), ("1.2x", int(osat.peak_memory(g) * 1.2))):
        c = osat.compare(g, time_limit=20, work_limit=0.3, plans=H200, memory_budget=budget)
        rows = {r.method.split(" + ")[0]: r for r in c.other_rows}
        assert "torch greedy buckets" in rows and "OVER THE BUDGET" in rows["torch greedy buckets"].note
        assert rows["overlapsat plan"].peak_memory <= limit


def test_an_unbucketed_result_over_the_default_budget_is_left_out_not_refused():
    g = osat.load_graph(bundled("fsdp_medium"))
    free = osat.optimize(g, time_limit=2)
    assert free.peak_memory > osat.peak_memory(g)  # the premise: the order search spends memory
    r = optimize_plan(Problem.of(g), H200, time_limit=2, unbucketed=free)
    assert r.peak_memory <= osat.peak_memory(g)


def _plans_by_brute_force(seed: int):
    """Every plan of a small graph brute force can list (tests/plan_soak.py's graphs): (buckets, truth)."""
    from overlapsat.errors import GraphError
    from overlapsat.plan import materialize
    from tests.brute import brute_force
    from tests.plan_soak import edge_plan_graph
    from tests.test_plan import few_bucketings

    g = edge_plan_graph(seed)
    rg = Problem.of(g, "none", "group").relaxed
    out = []
    for bs in few_bucketings(rg):
        try:
            h = materialize(rg, list(bs), H200)
        except GraphError:
            continue
        truth = brute_force(h, "group")
        if truth is not None and truth.orders:
            out.append(truth)
    return g, out


@pytest.mark.parametrize("seed", range(8))
def test_the_frontier_against_brute_force_over_every_plan(seed):
    """At each budget of the frontier: the plan is within the budget and no shorter than the best plan brute
    force finds within it; the bound is no higher than that best; "optimal" only where it equals it; and along
    the frontier the makespan never rises as the budget rises, nor the bound as the budget falls."""
    g, plans = _plans_by_brute_force(seed)
    if not plans:
        pytest.skip("no plan brute force can list")
    least = min(t.min_peak for t in plans)
    rnd = random.Random(seed)
    budgets = sorted({least, rnd.choice(plans).min_peak, max(t.min_peak for t in plans)})
    fr = plan_frontier(g, H200, budgets=[*budgets, None], time_limit=6, collective_order="group")
    assert [p.budget for p in fr.points] == [*budgets, None]
    assert fr.peak_floor <= least  # "no plan peaks below it" (decision 71) holds over every plan
    for p in fr.points:
        best = min((b for t in plans if (b := t.best(p.budget)) is not None), default=None)
        assert best is not None and p.result is not None, p
        assert p.budget is None or p.peak <= p.budget
        assert p.makespan >= best - 1e-9 * max(1.0, best)
        assert p.bound <= best * (1 + 1e-9) + 1e-9
        if p.status == "optimal":
            assert math.isclose(p.makespan, best, rel_tol=1e-9, abs_tol=1e-9)
    ms = [p.makespan for p in fr.points]
    assert all(a >= b - 1e-9 for a, b in zip(ms, ms[1:]))
    bounds = [p.bound for p in fr.points]
    assert all(a >= b - 1e-9 for a, b in zip(bounds, bounds[1:]))


def test_the_default_frontier_and_its_picture(tmp_path):
    pytest.importorskip("matplotlib")
    g = osat.load_graph(bundled("fsdp_medium"))
    fr = plan_frontier(g, H200, time_limit=12)
    labels = " ".join(p.label for p in fr.points)
    assert "input order's peak" in labels and "torch bucketed's peak" in labels and fr.points[-1].budget is None
    assert fr.points[0].budget is not None and fr.points[0].budget <= osat.peak_memory(g)
    md = fr.to_markdown()
    assert md.count("\n| ") == len(fr.points) + 2  # the header, its rule, a row per budget
    assert 0 < fr.peak_floor <= fr.points[0].budget and "no plan peaks below" in md
    assert fr.plot(tmp_path / "f.png").endswith("f.png") and (tmp_path / "f.png").stat().st_size > 1000
    r = run("frontier", "fsdp_small", "--profile", "h200", "--time-limit", "6", "--budgets", "1.0x", "none",
            "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [p["label"] for p in got["points"]] == ["1.0x", "no budget"]
