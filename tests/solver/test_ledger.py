"""The plan search's one account of work (decision 79): prices by hand, and a search that never promises its phases
more than its time limit."""

import gzip
import json
import os

import pytest

from overlapsat import Problem, graph_from_dict, optimize_plan
from overlapsat.cost import cost_model
from overlapsat.solver import plan_search
from overlapsat.solver.ledger import FINAL_FIT, STEP_S, Ledger

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks",
                      "fx_corpus")


def test_the_ledger_prices_steps_by_the_graphs_size_and_stops_a_phase_at_its_share():
    led = Ledger(10.0, 1000)
    assert led.price("judge") == pytest.approx(0.02 + 1.1e-4 * 1000)  # 0.13 s, by hand
    assert led.price("move", 100) == pytest.approx(100 * 2.5e-7 * 1000)  # decision 120
    assert led.how_many("judge", 0.5) == 38  # 5 s / 0.13 s
    led.charge("judge", 38)
    assert led.spent_s == pytest.approx(4.94) and not led.affords("judge", 0.5) and led.affords("score", 0.5)
    led.charge_s("joint", 2.5)
    assert led.left_s(reserved=1.0) == pytest.approx(10 - 4.94 - 2.5 - 1.0)
    assert led.left_s(reserved=5.0) == 0.0
    assert led.stats()["counts"] == {"judge": 38, "joint": 1}


@pytest.mark.parametrize("name", ["llama3_8b_L4_w64", "moe_dsv3_L8_ep8_w64"])
def test_a_plan_searchs_phases_and_its_final_order_fit_the_time_limit(name):
    """Deterministic mode: what the phases spent by the ledger's prices, the final order's time limit (its share of
    what they left) and the bound's share add up to no more than the time limit; and each phase stopped by its
    share (the scores by 40 %, the judgments by 50 %, the moves by 70 %, one step's price past at most)."""
    with gzip.open(os.path.join(CORPUS, f"{name}.json.gz"), "rt", encoding="utf-8") as f:
        d = json.load(f)
    g = graph_from_dict(d["graph"])
    r = optimize_plan(Problem.of(g, int(d["bucketed"]["peak_memory"]), "free"), cost_model("h200").duration,
                      time_limit=6)
    led = r.stats["plan"]["ledger"]
    lift = plan_search.BOUND_SHARE * 6 if len(g.nodes) <= plan_search.LIFT_NODES else 0.0
    assert led["final_s"] == pytest.approx(max(plan_search.FINAL_SHARE_MIN * 6,
                                               FINAL_FIT * (6 - led["spent_s"] - lift)))
    assert led["spent_s"] + led["final_s"] + lift <= 6 + 1e-9
    n = len(g.nodes)
    judge = STEP_S["judge"][0] + STEP_S["judge"][1] * n
    assert led["by_step_s"]["judge"] == pytest.approx(led["counts"]["judge"] * judge)
    # the moves stop by 70 % of the limit (decision 120): at least MOVES_MIN are tried, and the ledger's end is the
    # other bound
    moves = led["counts"].get("move", 0)
    assert moves <= max(plan_search.MOVES_MIN, 0.7 * 6 / (STEP_S["move"][1] * n)) + 1


def test_a_callers_solved_bucketings_are_charged():
    """Decision 100: checking the caller's ordered bucketings (`solved`) is work of the call, charged at the
    ledger's "solved" price per bucketing, by hand 6e-5 s a node, before the phases."""
    from overlapsat import optimize
    from overlapsat.examples import generate
    from overlapsat.plan import materialize

    model = cost_model("h200")
    g = generate("fsdp", seed=1, layers=3).reprice(model)  # 1,015 bucketings: searched, not listed
    p = Problem.of(g, "none", "free")
    ag = [nd.name for nd in g.nodes if nd.op == "all_gather"][:2]
    bs = list(plan_search.as_buckets(p.relaxed, [ag]))
    h = materialize(p.relaxed, bs, plan_search.laid_out(model.duration, p.bucket_layout))
    solved = {"pair": ([ag], optimize(p.on(h), time_limit=2))}
    r = optimize_plan(p, model.duration, time_limit=5, solved=solved, max_evaluations=6)
    led = r.stats["plan"]["ledger"]
    assert led["counts"]["solved"] == 1 and abs(led["by_step_s"]["solved"] - 6e-5 * len(p.relaxed.nodes)) < 1e-9
    assert r.makespan <= solved["pair"][1].makespan + 1e-9  # never longer than what the caller gave
    none = optimize_plan(p, model.duration, time_limit=5, max_evaluations=6)
    assert "solved" not in none.stats["plan"]["ledger"]["counts"]


def test_the_bucket_moves_get_their_floor_where_the_phases_before_them_spent_more():
    """Decision 121: at 1 s of work on the 984-node graph the phases leave the moves phase its MOVES_MIN; the polish is then
    given the rest of MOVES_FLOOR of the ledger (by hand: 0.1 s / (2.5e-7 s x 984) = 406 moves, less the 30 given).
    What the polish then leaves (a fifth of a tenth of its share) cannot pay for ordering the bucketed graph again,
    so the moves' order is the plan, valid and within the budget, and no search runs that the clock would cut."""
    from overlapsat import validate

    with gzip.open(os.path.join(CORPUS, "llama3_8b_L4_w64.json.gz"), "rt", encoding="utf-8") as f:
        d = json.load(f)
    g = graph_from_dict(d["graph"])
    p = Problem.of(g, int(d["bucketed"]["peak_memory"]), "free")
    # a work limit of 1 s under a clock of 30 (decision 102): the ledger's total, and no clock cut under load
    r = optimize_plan(p, cost_model("h200").duration, time_limit=30, work_limit=1)
    ps = r.stats["plan"]
    assert ps["order_moves"]["given"] == plan_search.MOVES_MIN == 30  # the phases before left it its minimum
    assert int(0.1 * 1 / (2.5e-7 * 984)) == 406 and ps["polish"]["given"] == 406 - 30
    assert ps["polish"]["tried"] <= ps["polish"]["given"]
    assert ps["polish"]["used"]  # the moves shortened the final order (208.56 -> 207.83 ms when written)
    assert r.method == "bucket moves after the final order" and ps["polish"]["after_us"] == ps["polish"]["moves_us"]
    assert r.peak_memory <= p.budget and validate(r.bucketed, r.order, memory_budget=p.budget) == []


def test_moves_that_converge_leave_the_polish_no_floor_to_make_up():
    """Decision 121: the floor counts what the moves phase was given, not what it tried. At 4 s on the same graph the
    ledger (4 s of work) gives the moves phase more than 406 moves (0.7 x 4 s less what the phases before spent, at 2.46e-4 s a
    move), so the polish is given its own share alone, however early the moves converged."""
    with gzip.open(os.path.join(CORPUS, "llama3_8b_L4_w64.json.gz"), "rt", encoding="utf-8") as f:
        d = json.load(f)
    g = graph_from_dict(d["graph"])
    r = optimize_plan(Problem.of(g, int(d["bucketed"]["peak_memory"]), "free"), cost_model("h200").duration,
                      time_limit=30, work_limit=4)
    ps = r.stats["plan"]
    assert ps["order_moves"]["given"] >= 406
    final = ps["ledger"]["final_s"]  # the polish's moves: 0.75 of 0.2 of the final order's share, by the price
    assert ps["polish"]["given"] == max(plan_search.MOVES_MIN, int(0.75 * 0.2 * final / (2.5e-7 * 984)))


def test_a_final_order_does_not_run_again_passes_that_found_no_valid_order(monkeypatch):
    """Decision 122: where the whole portfolio judged the graph without buckets and none of its passes met the budget
    (only the order as given did), the final order of that graph is handed those passes, none, instead of running
    them again (on the 13,403-node graph at 10 s, 2-3 s of wall that the ledger had not priced, and the clock then
    cut the fits). Simulated here by passes that find nothing valid: the plan is the order as given, valid, within
    the budget, and its final `optimize` got an empty list of passes, not None (which would run them)."""
    from overlapsat import load_graph, validate
    from overlapsat.examples import bundled

    real = plan_search.run_all
    monkeypatch.setattr(plan_search, "run_all", lambda *a, **k: [r for r in real(*a, **k) if not r.valid])
    given: list[object] = []
    real_optimize = plan_search.optimize

    def spy(*a, **k):
        if "heuristic_results" in k:  # the final order's call
            given.append(k["heuristic_results"])
        return real_optimize(*a, **k)

    monkeypatch.setattr(plan_search, "optimize", spy)
    price = cost_model("h200")
    p = Problem.of(load_graph(bundled("fsdp_medium")).reprice(price)).with_default_budget()
    r = optimize_plan(p, price.duration, time_limit=30, work_limit=2)
    assert given == [[]] and r.buckets == ()
    assert r.peak_memory <= p.budget and validate(r.bucketed, r.order, memory_budget=p.budget) == []
