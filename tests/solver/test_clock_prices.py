"""Decision 105: what a search costs before it can stop is priced, and the clock is asked before it starts. A 2-s
plan took 6.4 s at 36,401 nodes (7.0 s traced: the memory floor twice, the canonical form, the overlap bound, the
order search's time scale) and 4.3 s on a 187-node graph beside two CPU-bound processes (the joint model's build).
Each test fails before the decision."""

import math

import pytest

from overlapsat import Problem, load_graph
from overlapsat.cost import cost_model
from overlapsat.examples import bundled
from overlapsat.solver import joint, search
from overlapsat.solver.params import SolveParams, TimeBudget
from overlapsat.solver.plan_search import optimize_plan, plan_canonical

H200 = cost_model("h200").duration


def _spent(limit: float = 2.0) -> TimeBudget:
    """A clock whose deadline has passed: every step that asks it is refused."""
    now = [0.0]
    tb = TimeBudget(SolveParams(time_limit=limit), clock=lambda: now[0])
    now[0] = limit + 1.0
    return tb


def test_the_floor_is_not_read_where_the_order_as_listed_fits_the_budget(monkeypatch):
    """The order as listed is an order: where it peaks within the budget the floor cannot exceed it (0.2-0.8 s a read
    at 8-36k nodes); below that order's peak the floor is read and proves what it proves, as before."""
    g = load_graph(bundled("fsdp_small"))
    reads = []
    real = search.peak_floor
    monkeypatch.setattr(search, "peak_floor", lambda gr: reads.append(1) or real(gr))
    search.check_floor(Problem.of(g, "1.0x", "group"))
    assert reads == []
    floor = real(g.relaxed("free"))[0]
    with pytest.raises(Exception, match="unreachable"):
        search.check_floor(Problem.of(g, floor - 1, "group"))
    assert reads == [1]
    # the plan search's canonical form of a problem that passed is not read again by its final order
    q = search.floor_checked(Problem.of(g, floor, "group"))
    search.check_floor(q)
    assert reads == [1]


def test_the_joint_model_is_built_only_where_its_limit_and_the_clock_have_room_for_the_build():
    """Building the joint model in Python took 1.1 s on a 187-node graph with 102 candidates, for a 0.5-s share;
    priced from the graph's size and the candidates' count, it is skipped where its price is over half its limit,
    and where the caller's clock has less left than the price (a cut, said in deterministic mode)."""
    p = Problem.of(load_graph(bundled("ddp_small")), "none", "group")
    g = p.graph.relaxed("free")
    price = joint.build_price(len(g.nodes), len(joint.candidates(g).buckets))
    assert 0.1 < price < 1.0  # 57 candidates on 101 nodes: about 0.4 s
    short = joint.solve_joint(p, H200, SolveParams(time_limit=price))  # half of it: not enough
    assert "building it is priced" in short.stats["skipped"]
    tb = _spent()
    late = joint.solve_joint(p, H200, SolveParams(time_limit=30.0), clock=tb)
    assert "the clock left" in late.stats["skipped"] and tb.cut_by_wall_clock


def test_a_plan_search_with_no_time_for_the_canonical_form_searches_the_order_as_given_and_says_so():
    """The canonical form cost 1.2 s at 36,401 nodes; a plan search whose clock has less left searches the order
    as given (as `optimize` does, decision 64), flags the cut, and the plan says it may depend on the layout."""
    p = Problem.of(load_graph(bundled("fsdp_small")), "1.0x", "group")
    tb = _spent()
    q, on_given = plan_canonical(p, tb)
    assert on_given and q.relaxed.names == p.relaxed.names and tb.cut_by_wall_clock
    q, on_given = plan_canonical(p, TimeBudget(SolveParams(time_limit=5.0)))
    assert not on_given and q.relaxed.names != p.relaxed.names
    q, on_given = plan_canonical(p, _spent())  # built already: it costs nothing, and is used
    assert not on_given
    p = Problem.of(load_graph(bundled("fsdp_small")), "1.0x", "group")
    r = optimize_plan(p, H200, time_limit=1e-3)  # every clock is spent before the search starts
    assert r.plan_info.depends_on_input_order and r.cut_by_wall_clock
    assert r.stats["plan"].get("canonical_form") is False


def test_the_order_search_does_not_start_where_its_time_scale_would_end_past_the_deadline():
    """The order search's time scale took 0.9 s at 36,401 nodes and started with 0.4 s left; with less left than
    its price it is not started, and the message says what ended the search."""
    p = Problem.of(load_graph(bundled("fsdp_medium")), None, "group")
    s = search.Search.of(p, SolveParams(time_limit=5.0), clock=_spent(5.0))
    s.best = s.best or search.evaluate(s.cp, "topological_order", list(range(len(s.cp.graph.nodes))))
    search.order_search(s)
    assert "ended the search before its order search" in s.message and s.tb.cut_by_wall_clock
    assert math.isfinite(s.best.makespan)


def test_the_late_bound_under_a_budget_is_started_only_where_the_clock_has_its_price(monkeypatch):
    """Under a budget the analytical bound over every bucketing costs 5-10e-5 s a node (the floor, the overlap
    bound, the pairs kept apart: 3.5 s at 36,401 nodes at its least peak), not the 1.5e-5 its early gate reads.
    Where no early bound was computed, the late one asks the clock at the budgeted price: priced past what is
    left, the plan reports the kernels' total instead and says the clock chose it; the unbudgeted price (set to 0
    here, so that it always fits) no longer decides."""
    import overlapsat.solver.plan_search as ps

    g = load_graph(bundled("fsdp_medium")).reprice(cost_model("h200"))
    monkeypatch.setattr(ps, "EARLY_BOUND_SHARE", -1.0)  # no early bound
    monkeypatch.setattr(ps, "BUDGETED_BOUND_S_PER_NODE", 1e3)  # priced past any clock
    monkeypatch.setattr(ps, "BOUND_S_PER_NODE", 0.0)
    budgeted = optimize_plan(Problem.of(g, "1.0x", "group"), H200, time_limit=2)
    assert any("the clock left no time for the bound" in n for n in budgeted.plan_info.bound_notes)
    assert budgeted.bound == pytest.approx(sum(nd.duration for nd in g.nodes if nd.kind.name == "COMPUTE"))


def test_a_whole_model_whose_work_is_below_half_its_start_is_not_started():
    """Decision 119: CP-SAT's start on a whole model (0.29-0.66 s at 449 nodes) lies outside its deterministic count;
    a deterministic 1-s plan of `fsdp_medium` gave its final order 0.09 units of work and took 0.79 s, past the call's
    deadline (flagged, the plan then the clock's). A model whose work is below half of its priced start is not
    started; with more work, or in timed mode, or with no valid order to keep, it runs as before."""
    from overlapsat import optimize

    g = load_graph(bundled("fsdp_medium"))
    small = dict(time_limit=60, fill_share=0, lns_min_window_nodes=10**6)  # the whole model alone after the portfolio
    start = search.WHOLE_START_S + search.WHOLE_START_S_PER_NODE * len(g.nodes)
    r = optimize(Problem.of(g, "none"), work_limit=0.4 * start, **small)
    assert r.stats.get("model_skipped", "").startswith("its work") and f"on {len(g.nodes)} nodes" in r.stats["model_skipped"]
    assert "solver_status" not in r.stats and not r.cut_by_wall_clock and r.status.value != "optimal"
    r = optimize(Problem.of(g, "none"), work_limit=2.0, **small)
    assert "model_skipped" not in r.stats and "solver_status" in r.stats
    r = optimize(Problem.of(g, "none"), deterministic=False, time_limit=2.0, fill_share=0, lns_min_window_nodes=10**6)
    assert "model_skipped" not in r.stats and "solver_status" in r.stats


def test_a_step_priced_at_the_whole_limit_is_left_out_on_every_machine_and_is_no_clock_cut():
    """Decision 128: a step whose price alone takes the call's whole time limit has no room on any machine, even
    at the call's first moment, so leaving it out gives the same answer everywhere: not flagged as a cut. A
    2-s `optimize` of 50,000 independent kernels (canonical form 2.25 s, what follows the passes 2.0 s) warned
    that its order may differ across machines while every machine returns the input order, proven optimal. A
    step priced within the limit that the clock leaves no room for is still a cut, as before."""
    now = [0.0]
    tb = TimeBudget(SolveParams(time_limit=2.0), clock=lambda: now[0])
    assert tb.beyond_limit(2.0) and not tb.beyond_limit(1.99)
    now[0] = 1.5
    assert tb.cut(2.0) and not tb.cut_by_wall_clock  # beyond the limit: skipped everywhere
    assert not tb.cut(0.4) and tb.cut(0.6) and tb.cut_by_wall_clock  # within it: the clock decided
    child = TimeBudget(SolveParams(time_limit=0.1), parent=TimeBudget(SolveParams(time_limit=2.0)))
    assert not child.beyond_limit(1.0) and child.beyond_limit(2.0)  # the call's limit, not a phase's share

    p = Problem.of(load_graph(bundled("fsdp_small")), "1.0x", "group")
    price = search.CANONICAL_S_PER_NODE * len(p.relaxed.nodes)
    by_limit = TimeBudget(SolveParams(time_limit=price / 2))
    q, on_given = plan_canonical(p, by_limit)
    assert on_given and q.relaxed.names == p.relaxed.names and not by_limit.cut_by_wall_clock
    s = search.Search.of(p, SolveParams(time_limit=price / 2))
    assert s.on_given_order and not s.tb.cut_by_wall_clock
    s = search.Search.of(p, SolveParams(time_limit=5.0), clock=_spent(5.0))
    assert s.on_given_order and s.tb.cut_by_wall_clock

    from overlapsat import Graph, optimize
    from overlapsat.graph import Node, NodeKind

    g = Graph(nodes=tuple(Node(f"n{i}", NodeKind.COMPUTE, duration=1.0 + i % 7) for i in range(50_000)))
    r = optimize(g, time_limit=2.0)
    assert not r.cut_by_wall_clock and r.status.value == "heuristic_optimal"
    assert r.stats["on_given_order"] and r.stats["portfolio_left_out_by_limit"]
