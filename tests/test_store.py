"""`overlapsat solve-cache` and the store: isolation, atomic writes, resume, locks, corrupt schedules, Ray."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from overlapsat.examples import bundled
from overlapsat.io import load_graph, save_graph
from overlapsat.schedules import load_schedule
from overlapsat.store import graph_lock, recorded, schedule_path, solve_store, usable_schedule
from overlapsat.validate import validate

ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ("fsdp_small", "moe_small", "ddp_small", "tp_small")


def make_store(path, names=SMALL):
    path.mkdir(exist_ok=True)
    fps = []
    for n in names:
        g = load_graph(bundled(n))
        save_graph(g, str(path / f"{g.fingerprint()}.graph.json"))
        fps.append(g.fingerprint())
    return fps


def cli(*args):
    return subprocess.run([sys.executable, "-m", "overlapsat", *args], capture_output=True, text=True, env=ENV,
                          timeout=600)


def test_every_graph_is_solved_and_one_bad_file_is_reported(tmp_path):
    store = tmp_path / "store"
    fps = make_store(store)
    (store / ("0" * 64 + ".graph.json")).write_text("{ truncated")
    outs = solve_store(str(store), time_limit=2, jobs=2)
    by = {o.fingerprint: o for o in outs}
    assert by["0" * 64].outcome == "error" and "JSON" in by["0" * 64].message
    for fp in fps:
        assert by[fp].outcome == "solved", by[fp]
        g = load_graph(str(store / f"{fp}.graph.json"))
        order, why = usable_schedule(str(store), fp, g)
        assert why == "ok" and validate(g, order) == []
    assert not [p for p in os.listdir(store) if p.startswith(".tmp-")]  # atomic writes leave nothing behind
    again = solve_store(str(store), time_limit=2)
    assert {o.outcome for o in again if o.fingerprint in fps} == {"has_schedule"}


def test_solve_cache_writes_plans_that_the_fx_pass_would_take_and_refuses_an_unknown_profile(tmp_path):
    """`solve-cache --plans h200`: each graph gets a plan (buckets and order) whose order is valid on its bucketed
    graph (what `install_fx(plans=True)` checks), and a second run keeps them."""
    from overlapsat.store import usable_stored

    store = tmp_path / "store"
    fps = make_store(store, ("fsdp_small", "tp_small"))
    r = cli("solve-cache", str(store), "--plans", "h200", "--time-limit", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert {o["outcome"] for o in json.loads(r.stdout)["graphs"]} == {"solved"}, r.stdout
    for fp in fps:
        g = load_graph(str(store / f"{fp}.graph.json"))
        data = json.loads((store / f"{fp}.schedule.json").read_text())
        assert data["metrics"]["bound_over"] == "plans" and "bucketing" in data["metrics"]["stats"]["plan"]
        sched, why = usable_stored(str(store), fp, g, "group", plans=True)
        assert why == "ok" and sched.buckets == data.get("buckets", [])
    # #52: each row gives the step's time and the plan's buckets beside the exposure (a plan may expose more and
    # be shorter), the same figures as the plan file's; a row without buckets says why
    rows = {o["fingerprint"]: o for o in json.loads(r.stdout)["graphs"]}
    for fp in fps:
        m = json.loads((store / f"{fp}.schedule.json").read_text())
        o = rows[fp]
        assert o["makespan_us"] == m["metrics"]["makespan_us"] and o["buckets"] == len(m.get("buckets", []))
        assert o["input_makespan_us"] == m["metrics"]["baseline"]["makespan"]
        assert bool(o["buckets"]) or o["message"].startswith("no bucket: "), o
    again = solve_store(str(store), time_limit=1, plans="h200")
    assert {o.outcome for o in again} == {"has_schedule"}
    r = cli("solve-cache", str(store), "--plans", "nosuchgpu", "--time-limit", "1")
    assert r.returncode != 0 and "nosuchgpu" in r.stderr and "Traceback" not in r.stderr


def test_solve_cache_keeps_each_plan_within_a_bucket_cap_and_refuses_one_without_plans(tmp_path):
    """`solve-cache --plans h200 --bucket-cap 1B`: no bucket can be that small, so every plan is unbucketed; a
    cap without `--plans` (it bounds plans only) and a ratio as a cap are refused by name before any work."""
    store = tmp_path / "store"
    fps = make_store(store, ("fsdp_small",))
    r = cli("solve-cache", str(store), "--plans", "h200", "--bucket-cap", "1B", "--time-limit", "2", "--json")
    assert r.returncode == 0, r.stderr
    for fp in fps:
        assert json.loads((store / f"{fp}.schedule.json").read_text()).get("buckets", []) == []
    for bad, why in ((("--bucket-cap", "1B"), "pass plans=PROFILE"),
                     (("--plans", "h200", "--bucket-cap", "2x"), "bucket cap '2x'")):
        r = cli("solve-cache", str(tmp_path / "other"), *bad, "--time-limit", "1")
        assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_corrupt_or_foreign_schedule_is_solved_again(tmp_path):
    store = tmp_path / "store"
    a, b = make_store(store, ("fsdp_small", "moe_small"))
    solve_store(str(store), time_limit=2)
    (store / f"{a}.schedule.json").write_text('{"format": "overlapsat-schedule", "vers')  # cut mid-write
    os.replace(store / f"{b}.schedule.json", store / "keep.json")
    os.replace(store / "keep.json", store / f"{b}.schedule.json")
    other = json.loads((store / f"{b}.schedule.json").read_text())
    other["graph_fingerprint"] = a  # a schedule of b filed under a's name
    (store / f"{a}.schedule.json").write_text(json.dumps(other))
    outs = {o.fingerprint: o for o in solve_store(str(store), time_limit=2)}
    assert outs[a].outcome == "replaced_corrupt" and "schedule" in outs[a].message
    assert outs[b].outcome == "has_schedule"
    g = load_graph(str(store / f"{a}.graph.json"))
    assert validate(g, load_schedule(str(store / f"{a}.schedule.json"), g).order) == []


def test_a_locked_graph_is_left_to_its_holder(tmp_path):
    store = tmp_path / "store"
    a, b = make_store(store, ("fsdp_small", "moe_small"))
    with graph_lock(str(store), a) as mine:
        assert mine
        outs = {o.fingerprint: o.outcome for o in solve_store(str(store), time_limit=2)}
    assert outs == {a: "locked", b: "solved"}
    assert not os.path.exists(schedule_path(str(store), a))
    assert {o.outcome for o in solve_store(str(store), time_limit=2)} == {"solved", "has_schedule"}  # lock released


def test_two_concurrent_runs_never_solve_one_graph_twice(tmp_path):
    store = tmp_path / "store"
    make_store(store)
    procs = [subprocess.Popen([sys.executable, "-m", "overlapsat", "solve-cache", str(store), "--time-limit", "3",
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
             for _ in range(2)]
    rows = []
    for p in procs:
        so, se = p.communicate(timeout=600)
        assert p.returncode == 0, se
        rows += json.loads(so)["graphs"]
    solved = [r["fingerprint"] for r in rows if r["outcome"] == "solved"]
    assert sorted(solved) == sorted(set(solved)) == sorted(recorded(str(store)))


def test_a_killed_run_resumes_and_keeps_what_it_finished(tmp_path):
    store = tmp_path / "store"
    fps = make_store(store, ("fsdp_small", "moe_small", "tp_large"))  # tp_large takes its full 60 s
    big = load_graph(bundled("tp_large")).fingerprint()
    p = subprocess.Popen([sys.executable, "-m", "overlapsat", "solve-cache", str(store), "--time-limit", "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    first = sorted(fps)[0]  # graphs are solved in fingerprint order
    assert first != big
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not os.path.exists(schedule_path(str(store), first)):
        time.sleep(0.1)
    time.sleep(5)  # into tp_large's solve
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    kept = sorted(fp for fp in fps if os.path.exists(schedule_path(str(store), fp)))
    assert first in kept and big not in kept
    assert not [x for x in os.listdir(store) if x.startswith(".tmp-")]  # no half-written schedule
    outs = {o.fingerprint: o.outcome for o in solve_store(str(store), time_limit=2)}  # the kernel freed the lock
    assert sorted(fp for fp, o in outs.items() if o == "has_schedule") == kept
    assert sorted(fp for fp, o in outs.items() if o == "solved") == sorted(set(fps) - set(kept))


def test_cli_solve_cache_table_and_errors(tmp_path):
    store = tmp_path / "store"
    make_store(store, ("fsdp_small",))
    r = cli("solve-cache", str(store), "--time-limit", "2")
    assert r.returncode == 0, r.stderr
    assert "| solved |" in r.stdout and "1 solved" in r.stdout
    (store / ("f" * 64 + ".graph.json")).write_text("[]")
    r = cli("solve-cache", str(store), "--time-limit", "2")
    assert r.returncode == 2 and "error ffffffffffff" in r.stdout and "1 has_schedule" in r.stdout
    r = cli("solve-cache", str(tmp_path / "nope"))
    assert r.returncode == 2 and "nope" in r.stderr


def test_bench_reads_a_store_names_rows_and_skips_bad_files(tmp_path):
    store = tmp_path / "store"
    make_store(store, ("fsdp_small", "moe_small"))
    solve_store(str(store), time_limit=2)  # schedule files in the store are not graphs
    (store / ("e" * 64 + ".graph.json")).write_text("{}")
    r = cli("bench", str(store), "--time-limit", "2", "--json")
    assert r.returncode == 2, r.stderr
    d = json.loads(r.stdout)
    names = sorted(x["graph"] for x in d["graphs"])
    assert names == sorted(load_graph(bundled(n)).name for n in ("fsdp_small", "moe_small"))
    assert len(d["skipped"]) == 1 and "e" * 64 in d["skipped"][0]["file"]


def test_ray_executor_on_a_local_instance(tmp_path):
    ray = pytest.importorskip("ray")
    store = tmp_path / "store"
    fps = make_store(store, ("fsdp_small", "moe_small"))
    (store / ("0" * 64 + ".graph.json")).write_text("{ bad")
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        outs = {o.fingerprint: o for o in solve_store(str(store), time_limit=2, jobs=2, executor="ray", workers=1)}
    finally:
        ray.shutdown()
    assert all(outs[fp].outcome == "solved" for fp in fps) and outs["0" * 64].outcome == "error"
    for fp in fps:
        g = load_graph(str(store / f"{fp}.graph.json"))
        assert usable_schedule(str(store), fp, g)[1] == "ok"


def test_solve_cache_with_interference_writes_valid_tie_broken_schedules(tmp_path):
    """--interference reaches every solve (in worker processes too): the schedules are valid and no longer in
    the plain model than the plain solve's on the same work; a bad value is refused before any graph is touched.
    The work, not a 2-s clock, ends both: under CI load a worker's 2-s solve once came out 8 % longer than a calm
    plain solve's, which only the clock can cause in deterministic mode."""
    from overlapsat import optimize, simulate
    from overlapsat.cost import H200_STEP

    store = tmp_path / "store"
    fps = make_store(store, ("fsdp_small", "moe_small"))
    p = cli("solve-cache", str(store), "--time-limit", "60", "--work", "1.2", "--jobs", "2", "--interference",
            "h200-step", "--json")
    assert p.returncode == 0, p.stderr
    for fp in fps:
        g = load_graph(str(store / f"{fp}.graph.json"))
        order, why = usable_schedule(str(store), fp, g)
        assert order is not None and validate(g, order) == [], why
        assert simulate(g, order).makespan <= optimize(g, time_limit=60, work_limit=1.2).makespan + 1e-9
    assert optimize(load_graph(bundled("fsdp_small")), time_limit=2, interference=H200_STEP).status.value
    bad = cli("solve-cache", str(tmp_path / "other"), "--interference", "fast")
    assert bad.returncode == 2 and "--interference" in bad.stderr and not (tmp_path / "other").exists()


ABORT_ON_MOE = """
import os, pickle, sys
from overlapsat.io import load_graph
from overlapsat.store import _worker_main
raw = sys.stdin.buffer.read()
store, fp, *_ = pickle.loads(raw)
if load_graph(os.path.join(store, fp + ".graph.json")).name.startswith("moe"):
    os.abort()  # as OR-Tools' CHECK failures kill a process
import io
sys.stdin = io.TextIOWrapper(io.BytesIO(raw))  # what _worker_main reads
_worker_main(sys.argv[1:])
"""


def test_a_graph_whose_solver_dies_costs_its_own_row_only(tmp_path):
    from overlapsat.store import _run_local

    store = tmp_path / "store"
    fps = make_store(store, ("fsdp_small", "moe_small", "tp_small"))
    moe = load_graph(bundled("moe_small")).fingerprint()
    for jobs in (1, 2):
        outs = {o.fingerprint: o for o in _run_local(str(store), sorted(fps), 2.0, jobs, {"workers": 1},
                                                    worker=[sys.executable, "-c", ABORT_ON_MOE])}
        assert outs[moe].outcome == "error" and "died" in outs[moe].message
        assert all(outs[fp].outcome in ("solved", "has_schedule") for fp in fps if fp != moe)
        for fp in fps:
            if fp != moe:
                os.unlink(schedule_path(str(store), fp))


@pytest.mark.parametrize("bad", ["deep", "digits"])
def test_a_schedule_file_that_cannot_be_read_is_solved_again(tmp_path, bad):
    """A schedule nested 200,000 deep (RecursionError) or holding a 6,000-digit integer once ended the whole
    solve-cache run with an internal error; it now counts as corrupt and is replaced."""
    store = tmp_path / "store"
    fps = make_store(store, ("fsdp_small", "tp_small"))
    text = "[" * 200_000 + "]" * 200_000 if bad == "deep" else '{"order": ' + "9" * 6000 + "}"
    (store / (fps[0] + ".schedule.json")).write_text(text)
    r = cli("solve-cache", str(store), "--time-limit", "2")
    assert r.returncode == 0, r.stderr
    outs = {o.fingerprint: o.outcome for o in solve_store(str(store), time_limit=2)}
    assert outs[fps[0]] == "has_schedule" and "internal error" not in r.stderr
    assert "replaced_corrupt" in r.stdout


def test_a_graphs_time_limit_counts_from_its_launch(tmp_path):
    """solve_store's graph processes start, import and load before solving: the time limit counts from the
    launch (decision 57), and the work budget still from the limit as given. A solve launched longer ago than its
    limit is cut at once, says so, and still writes a valid schedule."""
    from overlapsat.store import solve_one

    store = tmp_path / "store"
    (fp,) = make_store(store, ("tp_small",))
    out = solve_one(str(store), fp, 5.0, {}, started=time.time() - 100)
    assert out.outcome == "solved"
    sched = load_schedule(schedule_path(str(store), fp))
    assert sched.metrics["cut_by_wall_clock"] is True
    g = load_graph(str(store / f"{fp}.graph.json"))
    assert validate(g, [g.index[n] for n in sched.order]) == []


def test_a_pricing_mismatch_is_said_when_planning_and_when_applying(tmp_path, caplog):
    """#52: a graph recorded with one GPU's prices and planned with another's gets its plan, with a warning and
    a row message naming both and what to run; an FX pass that misses in a store of graphs priced otherwise warns
    once (a graph's fingerprint includes its prices, so no schedule there can match)."""
    import logging

    from overlapsat.store import recorded_pricings, solve_one

    store = tmp_path / "store"
    (fp,) = make_store(store, ("fsdp_small",))
    path = store / f"{fp}.graph.json"
    data = json.loads(path.read_text())
    data.setdefault("meta", {})["pricing"] = "h100_sxm"  # as the FX importer stamps it (torch/fx.py)
    path.write_text(json.dumps(data))
    assert recorded_pricings(str(store)) == {"h100_sxm"}
    with caplog.at_level(logging.WARNING, logger="overlapsat"):
        out = solve_one(str(store), fp, 2, {"plans": "h200"})
    assert out.outcome == "solved", out
    assert "recorded with pricing 'h100_sxm' but planned with 'h200'" in out.message
    assert "solve-cache --plans h100_sxm" in out.message and any("h100_sxm" in r.message for r in caplog.records)

    pytest.importorskip("torch")
    from overlapsat.torch import fx_apply

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="overlapsat"):
        fx_apply._warn_if_priced_apart(str(store), "h200")
        fx_apply._warn_if_priced_apart(str(store), "h200")  # once
        fx_apply._warn_if_priced_apart(str(store), "h100_sxm")  # the store's own pricing: nothing to say
    said = [r.message for r in caplog.records if "priced for" in r.message]
    assert len(said) == 1 and "'h100_sxm'" in said[0] and "profile='h100_sxm'" in said[0], said


def test_an_order_recorded_beside_a_graph_is_a_candidate_and_a_malformed_one_is_named(tmp_path):
    """The FX bridge records torch's OverlapScheduler order in a graph's meta (`TORCH_ORDER`); solve-cache gives
    it to `optimize` and `optimize_plan` as a candidate (the stored schedule lists it among its rows). One that
    names nodes the graph lacks, or is not a list, fails that graph's row with the key named."""
    from overlapsat.store import TORCH_ORDER

    store = tmp_path / "store"
    store.mkdir()
    g = load_graph(bundled("fsdp_small"))
    g.meta[TORCH_ORDER] = {"torch OverlapScheduler": list(g.names)}
    save_graph(g, str(store / f"{g.fingerprint()}.graph.json"))
    for plans in (None, "h200"):
        for p in store.iterdir():
            if p.name.endswith(".schedule.json"):
                p.unlink()
        # without the fill moves (decision 96), under which the plan has buckets and its rows are the bucketed
        # graph's, where the recorded order (of the graph as captured) is no candidate
        (out,) = solve_store(str(store), time_limit=2, plans=plans, fill_share=0)
        assert out.outcome == "solved", out
        names = [h["name"] for h in load_schedule(schedule_path(str(store), g.fingerprint())).meta["heuristics"]]
        assert "torch OverlapScheduler" in names, (plans, names)
    for bad, said in (({"mine": [*g.names[:-1], "nope"]}, r"\['mine'\] names 1 node\(s\) the graph lacks, e.g. 'nope'"),
                      ({"mine": "abc"}, "must map names to lists of node names")):
        other = tmp_path / f"bad{len(said)}"
        other.mkdir()
        g.meta[TORCH_ORDER] = bad
        save_graph(g, str(other / f"{g.fingerprint()}.graph.json"))
        (out,) = solve_store(str(other), time_limit=2)
        assert out.outcome == "error" and "extra_orders" in out.message, out
        assert re.search(said, out.message), out.message


def test_a_plan_over_its_default_budget_after_fusion_is_set_aside_and_solved_again_tighter(tmp_path):
    """Decision 82: the captured order's peak after fusion is recorded beside its graph; a plan found over it is
    set aside (apply keeps the captured order) and the next solve takes the FX budget less the excess, until
    one fits. A record that does not read is no record."""
    from overlapsat.store import fused_path, fused_record, record_fused_peak, record_over, usable_stored

    store = tmp_path / "store"
    (fp,) = make_store(store, ("moe_small",))  # an order below its captured peak is found in 2 s
    g = load_graph(str(store / f"{fp}.graph.json"))
    assert fused_record(str(store), fp) == {} and record_over(str(store), fp, 10, 1) is None  # nothing to add to
    record_fused_peak(str(store), fp, 1000)
    record_fused_peak(str(store), fp, 5)  # another rank's record: the first stays
    assert fused_record(str(store), fp) == {"captured_peak_after_fusion": 1000}
    assert [o.outcome for o in solve_store(str(store), time_limit=2, plans="h200")] == ["solved"]
    first = json.loads((store / f"{fp}.schedule.json").read_text())["metrics"]
    budget = first["memory_budget"]
    assert budget == first["baseline"]["peak_memory"]  # the default: the captured order's peak
    excess = budget // 50
    assert record_over(str(store), fp, budget, excess) == budget - excess
    assert record_over(str(store), fp, budget, 1) == budget - excess  # a smaller excess never loosens it
    sched, why = usable_stored(str(store), fp, g, "group", plans=True)
    assert sched is None and why.startswith("solved under a budget it went over") and str(budget - excess) in why
    outs = solve_store(str(store), time_limit=2, plans="h200")
    assert [o.outcome for o in outs] == ["replaced_over_budget"]
    second = json.loads((store / f"{fp}.schedule.json").read_text())["metrics"]
    assert second["memory_budget"] == budget - excess and second["peak_memory"] <= budget - excess
    sched, why = usable_stored(str(store), fp, g, "group", plans=True)
    assert why == "ok"  # the plan solved under the tighter budget is the one applied
    # a budget no plan reaches: no schedule is written, the stale one stays aside, the captured order stays
    record_over(str(store), fp, budget - excess, budget // 2)
    (out,) = solve_store(str(store), time_limit=2, plans="h200")
    assert out.outcome == "kept_captured" and "captured order stays" in out.message
    assert usable_stored(str(store), fp, g, "group", plans=True)[0] is None
    for bad in ("{ truncated", "[]", '{"captured_peak_after_fusion": true}', '{"captured_peak_after_fusion": -1}',
                '{"captured_peak_after_fusion": 1000}'):  # the last: read before decision 111, not on what is emitted
        with open(fused_path(str(store), fp), "w") as f:
            f.write(bad)
        assert fused_record(str(store), fp) == {}


def test_a_plan_the_moves_after_fusion_fitted_stays_where_no_tighter_plan_is_found(tmp_path):
    """Decision 88: a plan over its budget after fusion that the moves there brought back is still solved again
    tighter first; where nothing fits the tighter budget, it stays (`kept_moved`) and apply uses it, and its next
    compile does not record it over again. Without the moves' fit, the captured order stays (decision 82)."""
    from overlapsat.store import fused_record, record_fused_peak, record_over, usable_stored

    store = tmp_path / "store"
    (fp,) = make_store(store, ("moe_small",))
    g = load_graph(str(store / f"{fp}.graph.json"))
    record_fused_peak(str(store), fp, 1000)
    assert [o.outcome for o in solve_store(str(store), time_limit=2, plans="h200")] == ["solved"]
    budget = json.loads((store / f"{fp}.schedule.json").read_text())["metrics"]["memory_budget"]
    nxt = record_over(str(store), fp, budget, budget // 2, moved=True)  # half the peak: no order reaches it
    assert nxt == budget - budget // 2 and fused_record(str(store), fp)["moved"] == [budget]
    assert usable_stored(str(store), fp, g, "group", plans=True)[0] is None  # set aside until solved again
    (out,) = solve_store(str(store), time_limit=2, plans="h200")
    assert out.outcome == "kept_moved" and "decision 88" in out.message, out
    sched, why = usable_stored(str(store), fp, g, "group", plans=True)
    assert why == "ok" and sched.metrics["memory_budget"] == budget
    assert record_over(str(store), fp, budget, 10, moved=True) is None  # kept: not set aside again
    assert fused_record(str(store), fp)["next_fx_budget"] == nxt and fused_record(str(store), fp)["kept"] == [budget]
    assert [o.outcome for o in solve_store(str(store), time_limit=2, plans="h200")] == ["has_schedule"]
    # the same without the moves' fit: the captured order stays, the plan aside
    other = tmp_path / "other"
    (fp2,) = make_store(other, ("moe_small",))
    record_fused_peak(str(other), fp2, 1000)
    solve_store(str(other), time_limit=2, plans="h200")
    record_over(str(other), fp2, budget, budget // 2)
    (out,) = solve_store(str(other), time_limit=2, plans="h200")
    assert out.outcome == "kept_captured" and usable_stored(str(other), fp2, g, "group", plans=True)[0] is None


def test_a_given_budget_bounds_the_graph_after_fusion_and_is_tightened_as_the_default_is(tmp_path):
    """Decision 86: with the captured order's peak after fusion recorded, a budget given to solve-cache bounds the
    graph as Inductor emits it: a ratio is of that recorded peak, a size is those bytes. It is solved under an FX
    budget of the target plus what fusion removed from the captured order (hand-computed here), apply holds the
    plan to the target, and a plan over it is set aside and solved again tighter, as the default is (decision
    82). "none" and a store without the record keep the FX model's budget."""
    from overlapsat.simulate import peak_memory
    from overlapsat.store import after_fusion_budget, fused_record, record_fused_peak, record_over, usable_stored
    from overlapsat.torch.fx_apply import _budget_of

    store = tmp_path / "store"
    (fp,) = make_store(store, ("moe_small",))
    g = load_graph(str(store / f"{fp}.graph.json"))
    fx_peak = peak_memory(g)  # the captured order's peak by the FX model
    assert after_fusion_budget(str(store), fp, g, "1.2x") is None  # no record: the FX model's budget stands
    fused = fx_peak * 3 // 4  # fusion removed a quarter of the captured order's peak
    record_fused_peak(str(store), fp, fused)
    assert after_fusion_budget(str(store), fp, g, "none") is None and after_fusion_budget(str(store), fp, g, None) is None
    target = int(fused * 1.5)
    assert after_fusion_budget(str(store), fp, g, "1.5x") == (target, target + fx_peak - fused, False)
    assert after_fusion_budget(str(store), fp, g, f"{target}B") == (target, target + fx_peak - fused, False)
    assert after_fusion_budget(str(store), fp, g, "1x") == (fused, fx_peak, False)  # the default's figures
    (out,) = solve_store(str(store), time_limit=2, plans="h200", memory_budget="1.5x")
    assert out.outcome == "solved", out
    metrics = json.loads((store / f"{fp}.schedule.json").read_text())["metrics"]
    fx = target + fx_peak - fused
    assert metrics["memory_budget"] == fx and metrics["peak_memory"] <= fx
    rec = fused_record(str(store), fp)
    held = _budget_of(fp, metrics, rec, str(store))
    assert (held.budget, held.fx_budget, held.store) == (target, fx, str(store))  # apply holds it to the target
    # found over its target after fusion: set aside, and solved again under the FX budget less the excess
    excess = fx // 40
    assert record_over(str(store), fp, fx, excess, target) == fx - excess
    assert "next_fx_budget" not in fused_record(str(store), fp)  # the default's record is untouched
    sched, why = usable_stored(str(store), fp, g, "group", plans=True)
    assert sched is None and f"({target} B)" in why and f"under {fx - excess} B (decision 86)" in why
    assert after_fusion_budget(str(store), fp, g, "1.5x") == (target, fx - excess, True)
    (out,) = solve_store(str(store), time_limit=2, plans="h200", memory_budget="1.5x")
    assert out.outcome == "replaced_over_budget", out
    metrics = json.loads((store / f"{fp}.schedule.json").read_text())["metrics"]
    assert metrics["memory_budget"] == fx - excess and metrics["peak_memory"] <= fx - excess
    held = _budget_of(fp, metrics, fused_record(str(store), fp), str(store))
    assert (held.budget, held.fx_budget) == (target, fx - excess)
    assert usable_stored(str(store), fp, g, "group", plans=True)[1] == "ok"
    # a tightened FX budget that no plan reaches: the captured order stays, and says which budget it was
    record_over(str(store), fp, fx - excess, fx, target)
    (out,) = solve_store(str(store), time_limit=2, plans="h200", memory_budget="1.5x")
    assert out.outcome == "kept_captured" and f"budget of {target} B after fusion (decision 86)" in out.message, out


def test_a_tighter_fx_budget_below_the_memory_floor_is_raised_to_it_once(tmp_path):
    """Decision 95: the FX budget less the excess after fusion can fall below the graph's memory floor, where it is
    proven unreachable and the captured order would stay; the next solve then takes the floor itself, and only
    once: a plan solved at the floor that goes over too leaves the captured order."""
    from overlapsat.solver.memory_bound import peak_floor
    from overlapsat.store import fused_record, record_fused_peak, record_over

    store = tmp_path / "store"
    (fp,) = make_store(store, ("moe_small",))
    g = load_graph(str(store / f"{fp}.graph.json"))
    floor = peak_floor(g)[0]
    assert floor == 188_809_216  # L1_unpermute's step (decision 71), below the captured order's 197,165,056 B
    record_fused_peak(str(store), fp, 1000)
    assert [o.outcome for o in solve_store(str(store), time_limit=2, plans="h200")] == ["solved"]
    budget = json.loads((store / f"{fp}.schedule.json").read_text())["metrics"]["memory_budget"]
    assert record_over(str(store), fp, budget, budget - floor + 1) == floor - 1  # one byte below the floor
    (out,) = solve_store(str(store), time_limit=2, plans="h200")
    said = f"below the graph's memory floor, so it was solved at the floor, {floor} B (decision 95)"
    assert said in out.message, out
    if out.outcome == "replaced_over_budget":  # a plan at the floor: solved under it, and within it
        metrics = json.loads((store / f"{fp}.schedule.json").read_text())["metrics"]
        assert metrics["memory_budget"] == floor and metrics["peak_memory"] <= floor
    else:
        assert out.outcome == "kept_captured" and f"FX budget of {floor} B" in out.message, out
    # the plan at the floor went over after fusion too: the next budget is below the floor again, and stays there
    record_over(str(store), fp, floor, 1)
    assert floor in fused_record(str(store), fp)["over"]
    (out,) = solve_store(str(store), time_limit=2, plans="h200")
    assert out.outcome == "kept_captured" and "decision 95" not in out.message, out
    assert f"FX budget of {floor - 1} B" in out.message and "unreachable" in out.message, out


def test_a_plan_solved_at_the_memory_floor_is_within_it(tmp_path):
    """Decision 95, the branch where a plan exists at the floor: two branches whose big buffers the captured order
    holds together (128 MiB + a gather) can run one after the other, so the floor (the larger branch and the
    gather's 4 MiB held to its reader) is reached; solved there, the plan's order peaks at it by MODEL.md's rule
    written out again (`naive_peak`)."""
    from overlapsat.graph import Buffer, Graph, Node, NodeKind
    from overlapsat.solver.memory_bound import peak_floor
    from overlapsat.store import record_fused_peak, record_over, usable_stored
    from tests.helpers import naive_peak

    c, k, w, mb = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT, 2**20
    g = Graph((Node("k1", c, 5.0), Node("k3", c, 5.0),
               Node("ag", k, 8.0, group="dp", op="all_gather", nbytes=4 * mb, group_size=2),
               Node("w", w, 0.0, collective="ag"), Node("k2", c, 5.0), Node("k4", c, 5.0)),
              (Buffer("x", "k1", ("k2",), 64 * mb, 64 * mb), Buffer("y", "k3", ("k4",), 64 * mb, 64 * mb),
               Buffer("g", "ag", ("w", "k2"), 4 * mb, 4 * mb), Buffer("o2", "k2", (), mb, mb, output=True),
               Buffer("o4", "k4", (), mb, mb, output=True)), name="two_branches")
    floor = peak_floor(g)[0]
    assert floor == (64 + 4 + 1) * mb  # by hand: at k2, its input x, the gathered g it reads and its output o2
    store = tmp_path / "store"
    store.mkdir()
    fp = g.fingerprint()
    save_graph(g, str(store / f"{fp}.graph.json"))
    record_fused_peak(str(store), fp, 1000)
    assert [o.outcome for o in solve_store(str(store), time_limit=2, plans="h200")] == ["solved"]
    budget = json.loads((store / f"{fp}.schedule.json").read_text())["metrics"]["memory_budget"]
    assert budget == (64 + 64 + 4 + 1) * mb  # the captured order holds both branches at k2
    record_over(str(store), fp, budget, budget - floor + 1)
    (out,) = solve_store(str(store), time_limit=2, plans="h200")
    assert out.outcome == "replaced_over_budget" and "decision 95" in out.message, out
    sched, why = usable_stored(str(store), fp, g, "group", plans=True)
    assert why == "ok" and sched.metrics["memory_budget"] == floor
    assert not sched.buckets  # one collective: nothing to bucket
    assert naive_peak(g, [list(g.names).index(n) for n in sched.order]) == floor


def test_a_stores_worker_loads_or_tools_only_for_a_search_that_runs_cp_sat(tmp_path):
    """Decision 115: a worker's limit counts from its own start, so OR-Tools (and pandas with it) loads with the
    first CP-SAT phase. `fsdp_small`'s order is proven by a heuristic (no CP-SAT phase): the worker, run as
    solve-cache runs it, imports no CP-SAT module; `tp_small`'s search runs one, and loads it."""
    import pickle

    store = tmp_path / "store"
    fps = dict(zip(("fsdp_small", "tp_small"), make_store(store, ("fsdp_small", "tp_small"))))
    loaded = {}
    for name, fp in fps.items():
        job = pickle.dumps((str(store), fp, 5.0, {"workers": 1}, time.time()))
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "overlapsat.store", str(os.getpid())],
                           input=job, capture_output=True, env=ENV, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        out = pickle.loads(p.stdout)
        assert out.outcome == "solved", (name, out)
        err = p.stderr.decode()
        assert "overlapsat.solver.search" in err
        loaded[name] = "ortools.sat.python.cp_model" in err
    assert loaded == {"fsdp_small": False, "tp_small": True}
