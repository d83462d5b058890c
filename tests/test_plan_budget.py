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


@pytest.mark.parametrize("limit", [0, -1.0, math.nan, math.inf])
def test_the_frontier_names_a_time_limit_no_search_takes(limit, tmp_path):
    """`plan` refuses these limits by name; the frontier used to share max(0.01, limit) among its budgets and run
    (2 s for `--time-limit 0`). Now both the function and the command refuse them, before any search, and the
    picture asked for is not written."""
    with pytest.raises(osat.GraphError, match="time_limit must be a positive finite number"):
        plan_frontier("fsdp_small", H200, time_limit=limit)
    r = run("frontier", "fsdp_small", "--profile", "h200", "--time-limit", str(limit), "--plot",
            str(tmp_path / "f.png"))
    assert r.returncode == 2 and "time_limit must be a positive finite number" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "f.png").exists()


def test_the_frontiers_budgets_share_what_is_left_of_one_clock(monkeypatch):
    """Each budget's plan search gets an equal share of what is left when it starts, so one that runs long costs
    the ones after it, not the limit (a 10-s frontier of a 13.4k-node graph took 20.1 s when the shares were fixed
    up front and the default budgets' portfolios ran unlimited). A fake clock: each search takes twice its share."""
    import overlapsat.frontier as fr_mod

    now = [0.0]
    monkeypatch.setattr(fr_mod.time, "monotonic", lambda: now[0])
    got = []

    def fake_plan(pb, price, time_limit, **options):
        got.append(time_limit)
        now[0] += 2 * time_limit
        raise osat.GraphError("no plan found (fake)")

    monkeypatch.setattr(fr_mod, "optimize_plan", fake_plan)
    fr = plan_frontier(osat.load_graph(bundled("fsdp_small")), H200, time_limit=9.0, budgets=["1.0x", "2.0x", None])
    assert got == pytest.approx([3.0, 1.5, 0.01]) and len(fr.points) == 3


def test_a_callers_clock_sets_the_frontiers_deadline_and_its_limit_as_given_what_it_searches(monkeypatch):
    """The command counts its limit from its start (loading included): the frontier takes its clock for the
    deadline, while the rows it searches are priced by the limit as given, so they do not depend on how long the
    loading took. A fake clock: 4 s are left of a 9-s limit; each search takes twice its share."""
    import overlapsat.frontier as fr_mod
    from overlapsat.solver.params import SolveParams, TimeBudget

    now = [0.0]
    monkeypatch.setattr(fr_mod.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(fr_mod, "LEAST_PLAN_S_PER_NODE", 3.0 / 57)  # 3 s a search at fsdp_small's 57 nodes
    got = []

    def fake_plan(pb, price, time_limit, **options):
        assert "clock" not in options  # each search has its share, not the caller's clock
        got.append(time_limit)
        now[0] += 2 * time_limit
        raise osat.GraphError("no plan found (fake)")

    monkeypatch.setattr(fr_mod, "optimize_plan", fake_plan)
    clock = TimeBudget(SolveParams(time_limit=4.0), clock=lambda: now[0])
    fr = plan_frontier(osat.load_graph(bundled("fsdp_small")), H200, time_limit=9.0, budgets=["1.0x", "2.0x", None],
                       clock=clock)
    assert all(p.searched for p in fr.points)  # 9 s has room for three 3-s searches; 4 s would have for one
    assert got == pytest.approx([4 / 3, 2 / 3, 0.01])


def test_a_frontiers_budgets_build_the_graphs_canonical_form_and_bounds_once(monkeypatch):
    """Each budget's search is a problem of its own on one graph: the canonical form and the analytical bound are
    kept on the (frozen) graph, not on each problem, so they are built once (three times before: a 2-s frontier of
    `moe_dsv3_L16_ep8_w128`, 4,166 nodes, took 3.76 s beside two CPU-bound processes, 2.12 s after)."""
    import overlapsat.bounds as bounds_mod
    import overlapsat.canonical as canonical_mod

    made, bounded = [], []
    canonical, bound = canonical_mod.canonical_graph, bounds_mod._lower_bound
    monkeypatch.setattr(canonical_mod, "canonical_graph", lambda g, level="group": made.append(g) or canonical(g, level))
    monkeypatch.setattr(bounds_mod, "_lower_bound", lambda g, level: bounded.append(g) or bound(g, level))
    g = osat.load_graph(bundled("fsdp_small"))
    fr = plan_frontier(g, H200, time_limit=9.0, budgets=["1.0x", "2.0x", None], collective_order="group")
    assert all(p.searched and p.result is not None for p in fr.points)
    assert sum(x is g.relaxed("group") for x in made) == 1, len(made)
    assert bounded and all(sum(x is y for y in bounded) == 1 for x in bounded)  # each graph's bound built once


def test_a_frontier_too_short_for_every_budget_searches_the_default_one_and_says_so(monkeypatch):
    """Where the limit has no room for every budget's plan search at this size (priced per node, not read off the
    clock, so the same rows come on any machine), the input order's peak is searched first, and the rows left out
    say so; a higher budget shows the lower one's plan, marked as not searched, never as "shorter"."""
    import overlapsat.frontier as fr_mod

    monkeypatch.setattr(fr_mod, "LEAST_PLAN_S_PER_NODE", 2.0 / 57)  # 2 s a search at fsdp_small's 57 nodes
    g = osat.load_graph(bundled("fsdp_small"))
    fr = plan_frontier(g, H200, time_limit=3.0)  # 0.75 x 3 s leaves room for one
    searched = [p.label for p in fr.points if p.searched]
    assert len(searched) == 1 and "input order's peak" in searched[0], [p.label for p in fr.points]
    md = fr.to_markdown()
    assert "not searched" in md and "shorter" not in md
    for p in fr.points:
        if not p.searched:
            assert p.result is None and "not searched" in p.error or p.result is not None and p.from_budget
    assert [r["searched"] for r in fr.records()] == [p.searched for p in fr.points]
    fr = plan_frontier(g, H200, time_limit=9.0)  # room for three
    assert all(p.searched for p in fr.points)
    # the budget a plan gets by default is found by its bytes, whatever its row is called
    fr = plan_frontier(g, H200, time_limit=3.0, budgets=["0.9x", "1.0x", None])
    assert [p.label for p in fr.points if p.searched] == ["1.0x"], [(p.label, p.searched) for p in fr.points]


def test_the_default_budgets_say_when_the_clock_left_passes_out(caplog):
    """The default budgets' two portfolio runs get the frontier's work limit and a deadline; passes the deadline
    left out make the budgets depend on the machine, and a warning says so."""
    from overlapsat.frontier import default_budgets

    p = Problem.of(osat.load_graph(bundled("fsdp_small")), "none", "group")
    with caplog.at_level("WARNING", logger="overlapsat.frontier"):
        cut = default_budgets(p, H200, work_limit=1000, deadline=0.0)  # every pass after the input order left out
    assert "left" in caplog.text and "passes out of the default budgets" in caplog.text
    assert ("input order's peak" in " ".join(lab for lab, _ in cut)) and cut[-1] == ("no budget", None)
    caplog.clear()
    with caplog.at_level("WARNING", logger="overlapsat.frontier"):
        default_budgets(p, H200)
    assert "default budgets" not in caplog.text


def test_a_frontier_with_no_room_to_find_the_default_budgets_shows_the_input_orders_peak_and_none(monkeypatch,
                                                                                                  caplog):
    """The lowest peak found and torch bucketed's peak take two portfolio runs; where a quarter of the limit has
    no room for them at this size (priced per node), the frontier shows the two budgets it can name for free,
    and a warning says what it left out."""
    import overlapsat.frontier as fr_mod

    monkeypatch.setattr(fr_mod, "DEFAULTS_S_PER_NODE", 1.0)
    monkeypatch.setattr(fr_mod, "default_budgets", lambda *a, **k: pytest.fail("the portfolios ran"))
    g = osat.load_graph(bundled("fsdp_small"))
    with caplog.at_level("WARNING", logger="overlapsat.frontier"):
        fr = plan_frontier(g, H200, time_limit=4.0)
    assert [(p.label, p.budget) for p in fr.points] == [("input order's peak", osat.peak_memory(g)),
                                                          ("no budget", None)]
    assert "leaves no room to find the lowest peak" in caplog.text


def _gathers_behind_a_reduce():
    """By hand (us, no launches; `_LINEAR` prices a collective at 0.005 us a byte and a copy at nothing, so a bucket
    costs its members' sum and never shortens a plan). k0 (10) feeds rs (10); seven all_gathers (1,000 B: 5 each),
    each read by its own kernel m_i (5), follow rs in the group's order; n (1) reads rs. Under "group" every
    gather transfers after rs (10-20), the last ending at 55, and its kernel at 60: every plan takes 60. The
    relaxation over every bucketing is ordered at "free": the gathers first (0-35, m_i as each lands), rs 35-45
    and n 45-46, the compute stream's work. Seven gathers of one key: more bucketings than are ordered one by one
    (32) and more than the joint model offers every subset of (6), so no exact bound over plans is computed."""
    from overlapsat.graph import Buffer, Graph, Node, NodeKind

    c, k, w = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT
    nodes = [Node("k0", c, 10.0), Node("rs", k, 10.0, group="dp", op="reduce_scatter", nbytes=2000, group_size=2)]
    nodes += [Node(f"ag{i}", k, 5.0, group="dp", op="all_gather", nbytes=1000, group_size=2) for i in range(7)]
    nodes += [Node("w_rs", w, collective="rs"), *(Node(f"w_ag{i}", w, collective=f"ag{i}") for i in range(7))]
    nodes += [*(Node(f"m{i}", c, 5.0) for i in range(7)), Node("n", c, 1.0)]
    bufs = [Buffer("x", "k0", ("rs",), 100, 100), Buffer("r", "rs", ("w_rs", "n"), 100, 100)]
    bufs += [Buffer(f"y{i}", f"ag{i}", (f"w_ag{i}", f"m{i}"), 100, 100) for i in range(7)]
    return Graph(tuple(nodes), tuple(bufs), (), name="gathers_behind_a_reduce")


def _linear(nd):
    from overlapsat.graph import NodeKind

    return nd.nbytes * 0.005 if nd.kind is NodeKind.COLLECTIVE else 0.0


def test_a_plan_says_how_much_of_its_gap_the_bounds_relaxation_cannot_reach(tmp_path):
    """Decision 113: the plan (60, optimal under "group" though not proven) and the relaxation's reach (46, the
    work, so the bound is 46 too) are the figures computed by hand above; the note names the 23.3 % between them,
    in the result, the frontier's table and `overlapsat plan`."""
    from overlapsat.solver.plan_bound import reach_note

    g = _gathers_behind_a_reduce()
    r = optimize_plan(Problem.of(g, "none", "group"), _linear, time_limit=60, work_limit=2.5)
    assert math.isclose(r.makespan, 60.0), r
    assert math.isclose(r.plan_info.relaxation_reach_us, 46.0) and math.isclose(r.bound, 46.0), r.plan_info
    note = reach_note(r.bound, r.makespan, r.plan_info.relaxation_reach_us, r.memory_budget)
    assert r.memory_budget is None
    assert "an order of 46.0 us with no budget" in note and "23.3% of the plan's makespan" in note, note
    assert "an order of 46.0 us within the budget" in reach_note(r.bound, r.makespan, 46.0, 10**6)
    assert r.stats["plan"]["relaxation_reach_us"] == r.plan_info.relaxation_reach_us
    free = optimize_plan(Problem.of(g, "none", "free"), _linear, time_limit=60, work_limit=2.5)  # meets the bound
    assert math.isclose(free.makespan, 46.0) and free.proven
    assert reach_note(free.bound, free.makespan, free.plan_info.relaxation_reach_us, None) == ""
    fr = plan_frontier(g, _linear, budgets=[None], time_limit=60, work_limit=2.5, collective_order="group")
    assert fr.records()[0]["relaxation_reach_us"] == fr.points[0].reach_us
    assert f"- none: {note}" in fr.to_markdown()
    osat.save_graph(g, tmp_path / "g.json")  # the command prices it by the profile: its own figures, the same shape
    out = run("plan", str(tmp_path / "g.json"), "--profile", "h200", "--memory-budget", "none", "--time-limit", "60",
              "--work", "2.5", "--out", str(tmp_path / "p.json"))  # work-bound: beside load a 5-s clock cut it once
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "the relaxation over every bucketing has an order" in ln)
    saved = json.loads((tmp_path / "p.json").read_text())["metrics"]["stats"]["plan"]["relaxation_reach_us"]
    assert saved is not None and f"an order of {saved:.1f} us with no budget" in line, (line, saved)


@pytest.mark.parametrize(("bound", "makespan", "reach", "said"), [
    (21.0, 40.0, 21.0, True), (30.0, 40.0, 25.0, False),  # a bound from elsewhere already passes the reach
    (21.0, 40.0, 40.0, False), (21.0, 40.0, None, False), (40.0, 40.0, 21.0, False)])
def test_the_reach_note_speaks_only_of_a_gap_its_relaxation_cannot_close(bound, makespan, reach, said):
    from overlapsat.solver.plan_bound import reach_note

    assert bool(reach_note(bound, makespan, reach, None)) is said and bool(reach_note(bound, makespan, reach, 1)) is said
