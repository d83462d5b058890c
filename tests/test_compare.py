"""compare(): every row re-checked against the simulator and validator."""

import pytest

from overlapsat import GraphError, compare, simulate, validate
from overlapsat.examples import tp_transformer


def test_rows_match_simulator_and_exact_is_best():
    g = tp_transformer(layers=1, seed=3)
    c = compare(g, time_limit=5, memory_budget="1.2x")
    assert c.rows[0].method == "input_order" and c.rows[-1].method == "exact"
    for r in c.rows:
        sim = simulate(g, r.order)
        assert r.makespan == pytest.approx(sim.makespan) and r.peak_memory == sim.peak_memory
        assert r.valid == (validate(g, r.order, c.memory_budget) == [])
    assert c.exact.valid and all(c.exact.makespan <= r.makespan + 1e-9 for r in c.rows if r.valid)
    assert c.bound <= c.exact.makespan + 1e-9
    ex = c.exact
    assert c.gap(ex) == pytest.approx(max(0.0, (ex.exposed - c.exposed_bound) / ex.exposed) if ex.exposed else 0.0)
    md = c.to_markdown()
    assert md.count("\n| ") == len(c.rows) + 1 and "lower bound" in md
    recs = c.records()
    assert [x["method"] for x in recs] == [r.method for r in c.rows]


def test_to_dataframe_optional():
    g = tp_transformer(layers=1, seed=3)
    c = compare(g, time_limit=2)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pandas"):
            c.to_dataframe()
    else:
        assert len(c.to_dataframe()) == len(c.rows)


def test_each_row_is_simulated_and_validated_once(monkeypatch):
    """One evaluated order per row: the table's figures are computed once, on the input graph."""
    import importlib

    ev = importlib.import_module("overlapsat.evaluate")
    from overlapsat import compare, load_graph
    from overlapsat.examples import bundled

    g = load_graph(bundled("tp_small"))
    calls = {"sim": 0, "val": 0}
    real_sim, real_val = ev.simulate, ev.validate

    def sim(graph, *a, **k):
        calls["sim"] += graph is g
        return real_sim(graph, *a, **k)

    def val(problem, *a, **k):  # evaluate hands the validator a Problem on g
        calls["val"] += problem.graph is g
        return real_val(problem, *a, **k)

    monkeypatch.setattr(ev, "simulate", sim)
    monkeypatch.setattr(ev, "validate", val)
    c = compare(g, time_limit=2)
    # each heuristic row once, plus the solver's answer once (it is the exact row)
    assert calls["sim"] == calls["val"] == len(c.rows)


def test_another_graph_is_a_row_apart_and_never_ranked():
    """torch's bucketed result is another graph: its row is simulated on that graph and kept out of the ranking."""
    from overlapsat import GraphBuilder

    g = tp_transformer(layers=1, seed=3)
    b = GraphBuilder("merged")
    b.compute("k", 1.0)
    b.collective("c", group="g", duration=2.0)
    b.wait("w", "c")
    other = b.build()
    c = compare(g, time_limit=2, other_graphs={"bucketed": other, "bucketed, hand order": (other, ["c", "k", "w"])})
    assert [r.method for r in c.other_rows] == ["bucketed", "bucketed, hand order"]
    assert [r.makespan for r in c.other_rows] == [3.0, 2.0]  # k then c: 1 + 2; c, k, w: the transfer hides k
    assert all(r.method not in ("bucketed", "bucketed, hand order") for r in c.rows)
    assert c.best_heuristic.sim.graph is g and c.exact.sim.graph is g
    md = c.to_markdown()
    assert "Other graphs" in md and "merged: 3 nodes, 1 collectives" in md
    recs = c.records()
    assert recs[-1]["other_graph"] == "merged" and recs[-1]["gap_to_bound"] is None
    with pytest.raises(Exception, match="expected a Graph"):
        compare(g, time_limit=1, other_graphs={"x": "not a graph"})


def test_contended_columns_are_simulate_contended_of_each_row():
    """compare(interference=) adds, per row, the contended walk of that row's order; the plain figures, the
    bound and the certificate stay MODEL.md's, and the table says the new columns are an estimate."""
    from overlapsat.compare import TIE_BROKEN
    from overlapsat.cost import Interference, simulate_contended

    g = tp_transformer(layers=1, seed=3)
    inter = Interference(1.5, 1.25)
    plain = compare(g, time_limit=2)
    c = compare(g, time_limit=2, interference=inter)
    ours = [r for r in c.rows if r.method not in (TIE_BROKEN, "exact")]
    # the heuristics are deterministic by work; the two exact solves may not be (the wall clock can cut one
    # under load), so the exact row is checked against its own order below, not against plain's
    assert [r.makespan for r in ours] == [r.makespan for r in plain.rows if r.method != "exact"]
    assert c.best_heuristic.method == plain.best_heuristic.method
    for r in c.rows:
        if r.method == TIE_BROKEN:  # the exact order's ties broken: no longer, no higher, shorter contended
            assert r.valid and r.makespan <= c.exact.makespan and r.peak_memory <= c.exact.peak_memory
            assert c.contended[r.method].makespan < c.contended["exact"].makespan
    for r, rec in zip(c.rows, c.records()):
        ref = simulate_contended(g, r.order, inter)
        assert rec["contended_makespan_us"] == ref.makespan and rec["contended_exposed_us"] == ref.exposed
        assert rec["makespan_us"] == pytest.approx(simulate(g, r.order).makespan)  # MODEL.md's, as without
    md = c.to_markdown()
    assert "contended makespan" in md and "an estimate" in md and "contended" not in plain.to_markdown()
    assert "compute 1.5x slower while" in md  # no GEMM table: the one factor, said as it is
    c.interference = Interference(1.5, 1.25, ((1e9, 2.0), (1e12, 1.2)))  # the note names a GEMM table's range
    assert "compute 1.5x slower (GEMMs by size: 1.2x to 2x) while" in c.to_markdown()
    with pytest.raises(GraphError, match="interference"):
        compare(g, time_limit=1, interference=(1.5, 1.2))


def test_tie_broken_row_appears_where_the_polish_moves():
    """A graph (tests/brute.py seed 139) whose exact order has a plain-model tie that contention breaks: the
    row is there, no longer in MODEL.md's terms than exact, valid, and shorter contended."""
    from overlapsat.compare import TIE_BROKEN
    from overlapsat.cost import Interference, simulate_contended
    from tests.brute import random_graph

    g, co = random_graph(139, max_nodes=8)
    inter = Interference(1.67, 1.36)
    c = compare(g, time_limit=1, collective_order=co, interference=inter)
    row = c.row(TIE_BROKEN)
    assert validate(g, row.order, c.memory_budget, collective_order=co) == []
    assert row.makespan <= c.exact.makespan and row.peak_memory <= c.exact.peak_memory
    assert simulate_contended(g, row.order, inter).makespan < simulate_contended(g, c.exact.order, inter).makespan
    assert TIE_BROKEN in c.to_markdown() and c.best_heuristic.method != TIE_BROKEN


def test_held_column_is_simulate_held_of_each_row():
    """compare(hold=) adds, per row, the held walk of that row's order (an estimate, said so), and changes
    nothing else; hold 0 reads MODEL.md's exposure back; a bad hold is refused before any solving."""
    from overlapsat import load_graph
    from overlapsat.cost import simulate_held
    from overlapsat.examples import bundled

    g = load_graph(bundled("tp_small"))
    plain = compare(g, time_limit=1)
    # (its exact row may differ from plain's: a 1 s solve can be cut by the wall clock; the hold is only
    # walked after the solve, so each row is checked against its own order)
    c = compare(g, time_limit=1, hold=0.7)
    held_any = False
    for r, rec in zip(c.rows, c.records()):
        ref = simulate_held(g, r.order, 0.7).exposed
        assert rec["held_exposed_us"] == ref >= r.exposed - 1e-9
        assert rec["exposed_us"] == pytest.approx(simulate(g, r.order).exposed)  # MODEL.md's, as without a hold
        held_any |= ref > r.exposed + 1e-6
    assert held_any  # the example's GEMMs hold some transfer back in some row
    md = c.to_markdown()
    assert "exposed, hold 0.7" in md and "simulate_held" in md and "hold" not in plain.to_markdown()
    zero = compare(g, time_limit=1, hold=0.0)
    assert all(abs(rec["held_exposed_us"] - rec["exposed_us"]) < 1e-6 for rec in zero.records())
    with pytest.raises(GraphError, match="hold must be a number in"):
        compare(g, time_limit=1, hold=1.5)


def test_plan_rows_sit_beside_the_table_and_the_plan_is_never_worse_than_torchs_greedy_peer():
    from overlapsat import compare, load_graph
    from overlapsat.cost.model import cost_model
    from overlapsat.examples import bundled

    model = cost_model("h200")
    g = load_graph(bundled("fsdp_medium")).reprice(model)
    from overlapsat.cost.interference import H200_STEP

    c = compare(g, time_limit=60, work_limit=0.5, plans=model.duration, interference=H200_STEP, memory_budget="none")
    rows = {r.method.split(" + ")[0]: r for r in c.other_rows}
    # each plan row is also walked at contended rates, on its own bucketed graph
    assert all(c.contended[r.method].makespan >= r.makespan - 1e-6 for r in c.other_rows)
    assert set(rows) == {"torch greedy buckets", "overlapsat plan"}
    assert all(r.valid for r in rows.values())
    assert rows["overlapsat plan"].makespan <= rows["torch greedy buckets"].makespan + 1e-9
    md = c.to_markdown()
    assert "overlapsat plan" in md and "the bound above does not apply" in md


def test_a_peer_bucketing_is_a_row_and_a_warm_start_and_the_plan_is_never_worse():
    """A TBB-like peer (all gathers in one bucket, all reduce-scatters in another): a row of its own, and the plan
    (which took it as a warm start and judged it with the same portfolio) is no longer."""
    from overlapsat import compare, load_graph
    from overlapsat.cost.model import cost_model
    from overlapsat.examples import bundled
    from overlapsat.plan import Bucket, bucket_problems

    model = cost_model("h200")
    g = load_graph(bundled("fsdp_medium")).reprice(model)
    by_op: dict = {}
    for c in g.coll_seq:
        by_op.setdefault(g.nodes[c].op, []).append(g.names[c])
    peer = [ms for ms in by_op.values() if len(ms) >= 2 and not bucket_problems(g, [Bucket(tuple(ms))])]
    assert peer
    c = compare(g, time_limit=60, work_limit=0.5, plans=model.duration, plan_peers={"block": peer})
    rows = {r.method.split(" + ")[0]: r for r in c.other_rows}
    assert set(rows) == {"torch greedy buckets", "block buckets", "overlapsat plan"}
    assert rows["overlapsat plan"].makespan <= rows["block buckets"].makespan + 1e-9
    with pytest.raises(GraphError, match="plans="):
        compare(g, time_limit=1, plan_peers={"block": peer})


def test_a_coalesced_plan_is_judged_against_torchs_copied_buckets():
    """compare(bucket_layout="coalesced"): overlapsat's plan row is the coalesced plan (its copy places are empty
    markers, MODEL.md "Buckets"), while torch's greedy row keeps the copies torch issues; each row's figure is
    the simulator's on its own graph, and the plan is no longer than torch's greedy buckets (coalescing them is
    one of the plans it could keep). The layout needs plans=, and a bad one is named."""
    from overlapsat import compare, load_graph, simulate
    from overlapsat.cost.model import cost_model
    from overlapsat.examples import bundled

    model = cost_model("h200")
    g = load_graph(bundled("fsdp_medium")).reprice(model)  # large enough for the searched path (its peer rows)
    c = compare(g, time_limit=60, work_limit=0.5, plans=model.duration, bucket_layout="coalesced",
                memory_budget="none")
    rows = {r.method.split(" + ")[0]: r for r in c.other_rows}
    assert set(rows) == {"torch greedy buckets", "overlapsat plan"}
    ops = {k: [n.op for n in r.sim.graph.nodes if (n.op or "").startswith("bucket_")] for k, r in rows.items()}
    plan_g, torch_g = rows["overlapsat plan"].sim.graph, rows["torch greedy buckets"].sim.graph
    assert ops["overlapsat plan"] and set(ops["overlapsat plan"]) == {"bucket_coalesced_in", "bucket_coalesced_out"}
    assert all(n.duration == 0 for n in plan_g.nodes if (n.op or "").startswith("bucket_"))
    assert ops["torch greedy buckets"] and set(ops["torch greedy buckets"]) == {"bucket_copy_in", "bucket_copy_out"}
    assert all(n.duration > 0 for n in torch_g.nodes if (n.op or "").startswith("bucket_copy"))
    for r in rows.values():
        assert r.valid and abs(simulate(r.sim.graph, r.order).makespan - r.makespan) <= 1e-6 * r.makespan
    assert rows["overlapsat plan"].makespan <= rows["torch greedy buckets"].makespan + 1e-9
    assert "coalesced bucket" in rows["overlapsat plan"].note
    with pytest.raises(GraphError, match="plans="):
        compare(g, time_limit=1, bucket_layout="coalesced")
    with pytest.raises(GraphError, match="bucket_layout.*'grouped'"):
        compare(g, time_limit=1, plans=model.duration, bucket_layout="grouped")


def test_the_exact_rows_work_is_the_time_limits_not_what_the_heuristics_left(monkeypatch):
    """Deterministic mode: the exact row's work budget comes from the time limit, so a slow machine (here the
    heuristics' rows slowed by 1.5 s) gets the same answer or a flagged cut, never a smaller budget silently (it
    was `left`, the clock the heuristics had left: under two CPU burners the README's graph lost its proof of
    optimality with no warning)."""
    import sys
    import time as _time

    from overlapsat import load_graph
    from overlapsat.examples import bundled

    cmp = sys.modules["overlapsat.compare"]  # the module (the package's `compare` is the function)
    seen = []
    real_optimize, real_run_all = cmp.optimize, cmp.run_all

    def spy(problem, **kw):
        seen.append(kw["time_limit"])
        return real_optimize(problem, **kw)

    monkeypatch.setattr(cmp, "optimize", spy)
    g = load_graph(bundled("tp_small"))
    compare(g, time_limit=4)
    monkeypatch.setattr(cmp, "run_all", lambda *a, **k: (_time.sleep(1.5), real_run_all(*a, **k))[1])
    compare(g, time_limit=4)
    assert seen[0] == seen[1] == 4


def test_the_plan_rows_work_is_the_time_limits_not_what_the_other_rows_left(monkeypatch):
    """Deterministic mode: the plan search's time limit (its work and its count of evaluations) is a fixed share
    of compare's, so rows that ran slower (the heuristics slowed by 1.5 s here) leave the same plan, not a smaller
    search (it was 0.8 x the clock left, which load moves)."""
    import sys
    import time as _time

    import overlapsat.solver.plan_search as ps
    from overlapsat import load_graph
    from overlapsat.cost import cost_model
    from overlapsat.examples import bundled

    cmp = sys.modules["overlapsat.compare"]
    seen, real_plan, real_run_all = [], ps.optimize_plan, cmp.run_all

    def spy(problem, price, **kw):
        seen.append(kw["time_limit"])
        return real_plan(problem, price, **kw)

    monkeypatch.setattr(ps, "optimize_plan", spy)
    model = cost_model("h200")
    g = load_graph(bundled("fsdp_small")).reprice(model)
    a = compare(g, time_limit=8, plans=model.duration, memory_budget="none")
    monkeypatch.setattr(cmp, "run_all", lambda *a, **k: (_time.sleep(1.5), real_run_all(*a, **k))[1])
    b = compare(g, time_limit=8, plans=model.duration, memory_budget="none")
    assert seen[0] == seen[1] == pytest.approx(8 * cmp.PLAN_NOMINAL_SHARE)
    pa, pb = (next(r for r in c.other_rows if r.method == "overlapsat plan") for c in (a, b))
    assert pa.makespan == pb.makespan and pa.order == pb.order


def test_heuristic_rows_the_clock_left_out_are_said(caplog):
    """Deterministic mode: rows the heuristics' deadline left out depend on load, not on work, so compare says so
    (decision 57); they were left out silently, and the exact row then started from fewer orders."""
    import logging

    from overlapsat import load_graph
    from overlapsat.examples import bundled
    from overlapsat.heuristics.portfolio import pipelines

    g = load_graph(bundled("tp_small"))
    with caplog.at_level(logging.WARNING, logger="overlapsat.compare"):
        c = compare(g, time_limit=0.005)
    ran = {r.method for r in c.rows}
    missing = [nm for nm in pipelines() if nm not in ran]
    said = [r.getMessage() for r in caplog.records if "ended by the wall clock" in r.getMessage()]
    assert missing, "the clock left every row in: this test needs a shorter limit"
    assert said and f"{len(missing)} rows not run" in said[0], said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="overlapsat.compare"):
        compare(g, time_limit=30, work_limit=0.2)
    assert not [r for r in caplog.records if "heuristics ended" in r.getMessage()]
