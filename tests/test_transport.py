"""Copy-engine transports (MODEL.md "Transport", decision 50): the measured table, its prices, the rules a
plan's transports keep, their file, the contended walk, and the plan's claims against brute force over every
bucketing and every transport of each all_gather."""

import itertools
import json
import os
import random
from dataclasses import replace

import pytest

from overlapsat import Graph, GraphError, Problem, validate
from overlapsat.cost import simulate_contended
from overlapsat.cost.interference import Interference
from overlapsat.cost.transport import H100_COPY_ENGINE, CopyEngine, copy_engine, load_copy_engine
from overlapsat.graph import Buffer, Node, NodeKind
from overlapsat.plan import materialize, transport_problems
from tests.test_plan import _PRICES, _gathers, few_bucketings, replace_dur

C, K, W = NodeKind.COMPUTE, NodeKind.COLLECTIVE, NodeKind.WAIT
RUNS = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "results", "gpu_2026-11-26")
RAW = os.path.join(RUNS, "run60_transport", "transport.json")  # the copy engine as the FX pass issues it
SYMMETRIC = os.path.join(RUNS, "run56_tp", "transport.json")  # its input already in symmetric memory
MIB = 2.0**20
# small sizes, so the brute-force graphs (1-24 kB gathers) cross every case: not offered below 2 kB, dearer up to
# about 3 kB, then cheaper, least at 4 kB
SMALL = CopyEngine(((2, ((2000.0, 1.3), (4000.0, 0.5), (16000.0, 0.8))),), contention_share=0.25, source="test")


def test_the_built_in_table_is_what_run_60s_raw_file_gives():
    """Independent of the constant: rebuilt from the run's rows of the compiled copy engine (medians over the two
    GEMM shapes); run 56's symmetric-input rows give another table, cheaper at every size."""
    t = load_copy_engine(RAW)
    assert t.ratios == H100_COPY_ENGINE.ratios and t.contention_share == H100_COPY_ENGINE.contention_share
    assert load_copy_engine(RAW, "copy_engine_ws").ratios != t.ratios
    assert max(y for _, y in load_copy_engine(SYMMETRIC, "copy_engine").ratios[0][1][1:]) < 0.9
    assert copy_engine("h100") is H100_COPY_ENGINE
    per_gather = []  # the overhead: each step's extra time per copy-engine gather against p in the same call
    for run in ("run59_regather", "run61_regather"):
        with open(os.path.join(RUNS, run, "results.json")) as f:
            d = json.load(f)
        ms = {c: d["configs"][c]["ranks"][0]["step_ms_median"] for c in ("p_ce", "p")}
        n = sum(g.get("copy_engine", 0) for g in d["prediction_p_ce"]["graphs"])
        per_gather.append((ms["p_ce"] - ms["p"]) * 1000 / n)
    assert H100_COPY_ENGINE.overhead_us == round(min(per_gather), 1)
    with pytest.raises(GraphError, match="unknown copy-engine table 'a100'"):
        copy_engine("a100")


def test_ratios_are_offered_only_where_measured_and_interpolated_in_log_bytes():
    t = H100_COPY_ENGINE
    assert t.ratio(32 * MIB - 1, 2) is None  # below the smallest size measured
    assert t.ratio(32 * MIB, 2) == 0.9937
    assert t.ratio(64 * MIB, 2) == pytest.approx((0.9937 + 1.018) / 2)  # halfway in log(bytes) from 32 to 128
    assert t.ratio(2**40, 2) == 1.018  # flat above the largest
    assert t.ratio(64 * MIB, 4) is None  # a group size not measured
    assert t.floor(2) == 0.9937 and t.floor(4) == 1.0
    assert not t.chooses(Node("big", K, 1.0, group="dp", op="all_gather", nbytes=int(128 * MIB), group_size=2),
                         "dp")  # dearer than NCCL at 128 MiB: NCCL stays


def _two_groups():
    nodes = [Node("a", C, 10.0),
             Node("ag", K, 100.0, group="dp", op="all_gather", nbytes=int(32 * MIB), group_size=2),
             Node("small", K, 5.0, group="dp", op="all_gather", nbytes=int(4 * MIB), group_size=2),
             Node("rs", K, 100.0, group="dp", op="reduce_scatter", nbytes=int(32 * MIB), group_size=2),
             Node("tp", K, 50.0, group="tp", op="all_gather", nbytes=int(16 * MIB), group_size=2),
             Node("w4", K, 50.0, group="w4", op="all_gather", nbytes=int(512 * MIB), group_size=4),
             Node("wa", W, collective="ag"), Node("ws", W, collective="small"), Node("wr", W, collective="rs"),
             Node("wt", W, collective="tp"), Node("ww", W, collective="w4")]
    return Graph(tuple(nodes), (Buffer("x", "a", ("ag", "small", "rs", "tp", "w4"), 8, 8),), name="two_groups")


def test_one_group_is_offered_and_its_large_gathers_are_repriced_by_hand():
    g = _two_groups()
    t = H100_COPY_ENGINE
    assert t.group_of(g) == "tp"  # dp also reduce-scatters (left to NCCL); w4's group size is not measured
    only_gathers = Graph(tuple(nd for nd in g.nodes if nd.name not in ("rs", "wr")), g.buffers[:0], name="g")
    assert t.group_of(only_gathers) == "dp"  # 36 MiB of gathers at a measured group size against tp's 16
    h = replace(t, overhead_us=0.0).repriced(g, "dp")
    d = {nd.name: nd.duration for nd in h.nodes}
    assert d["ag"] == pytest.approx(100.0 * 0.9937)  # 32 MiB: the measured ratio
    assert (d["small"], d["rs"], d["tp"], d["w4"]) == (5.0, 100.0, 50.0, 50.0)  # too small, not a gather, other
    assert SMALL.chosen(g, "dp", lambda nd: nd.duration) == ("ag", "small")  # its share, 0.8, held above 16 kB
    no_overhead = replace(t, overhead_us=0.0)
    assert no_overhead.chosen(g, "dp", lambda nd: nd.duration) == ("ag",)
    assert t.chosen(g, "dp", lambda nd: nd.duration) == ()  # 0.6 % of 100 us saved, 86.3 us paid: NCCL
    price = t.pricing(lambda nd: 20000.0, "dp")  # an NCCL price at which 0.63 % saved (126 us) beats 86.3 paid
    assert price(g.node("ag")) == pytest.approx(20000.0 * 0.9937 + 86.3) and price(g.node("tp")) == 20000.0
    assert price.floor(g.node("ag")) == 0.9937 and price.floor(g.node("rs")) == 1.0


@pytest.mark.parametrize("names, culprit", [
    (["ag"], None),
    (["ag", "small"], None),
    (["rs"], "is 'reduce_scatter'; the copy engine moves only all_gathers"),
    (["ag", "tp"], "more than one process group"),
    (["nope"], "'nope' is no collective"),
    (["a"], "'a' is no collective"),
    (["ag", "ag"], "named twice"),
])
def test_transport_rules_hold_and_a_broken_one_is_named(names, culprit):
    bad = transport_problems(_two_groups(), names)
    assert (bad == []) if culprit is None else any(culprit in p for p in bad), bad


def test_a_plan_file_with_transports_is_version_3_and_a_broken_one_is_refused(tmp_path):
    from overlapsat.schedules import load_schedule, save_schedule

    g = _two_groups()
    order = list(g.names)
    path = tmp_path / "s.json"
    s = save_schedule(path, g, order, transports=["ag"])
    d = json.loads(path.read_text())
    assert d["version"] == 3 and d["transports"] == {"copy_engine": ["ag"]}
    assert load_schedule(path, g).plan.transports == ("ag",) == s.plan.transports
    with pytest.raises(GraphError, match="more than one process group"):
        save_schedule(tmp_path / "t.json", g, order, transports=["ag", "tp"])
    assert not (tmp_path / "t.json").exists()
    d["version"] = 2
    path.write_text(json.dumps(d))
    with pytest.raises(GraphError, match="transports need version 3"):
        load_schedule(path, g)
    d["version"], d["transports"] = 3, {"copy_engine": ["rs"]}
    path.write_text(json.dumps(d))
    with pytest.raises(GraphError, match="the copy engine moves only all_gathers"):
        load_schedule(path, g)
    save_schedule(path, g, order)  # no transports: version 1, as before
    assert json.loads(path.read_text())["version"] == 1


def test_the_contended_walk_slows_compute_beside_a_copy_engine_transfer_by_its_share():
    """One 10 us transfer beside one 10 us kernel, compute slowed 2x beside a transfer. Hand-computed: beside
    NCCL the kernel does 5 us of work by t=10, then 5 more: 15. Share 0: 10. Share 0.5 (factor 1.5): 20/3 done
    by t=10, 10/3 left: 40/3."""
    g = Graph((Node("c", K, 10.0, group="dp", op="all_gather", nbytes=8, group_size=2), Node("k", C, 10.0),
               Node("w", W, collective="c")), name="pair")
    inter = Interference(compute_slowdown=2.0)
    assert simulate_contended(g, None, inter).makespan == pytest.approx(15.0)
    assert simulate_contended(g, None, inter, copy_engine=["c"], copy_engine_share=0.0).makespan == pytest.approx(10)
    assert simulate_contended(g, None, inter, copy_engine=["c"],
                              copy_engine_share=0.5).makespan == pytest.approx(40 / 3)
    with pytest.raises(GraphError, match="names no collective"):
        simulate_contended(g, None, inter, copy_engine=["x"])


SEEDS = int(os.environ.get("OVERLAPSAT_PLAN_SEEDS", "30"))


@pytest.mark.parametrize("seed", range(SEEDS))
def test_the_plan_with_transports_never_claims_more_than_brute_force_over_every_transport(seed, monkeypatch):
    """Every legal bucketing, and for each every assignment of NCCL or the copy engine to each offered all_gather
    of its bucketed graph (not only the cheaper one, which decision 50 picks), brute-forced: the plan's makespan
    is at least the best of them, its bound at most, an `optimal` is true, and its transports are legal."""
    from overlapsat.solver.plan_search import optimize_plan
    from tests.brute import brute_force

    g, co = _gathers(seed), ("group", "global", "free")[seed % 3]
    table = SMALL if seed % 4 < 2 else replace(SMALL, overhead_us=0.5)  # a fixed cost per copy-engine gather
    rnd = random.Random(seed)
    g = Graph(tuple(replace(nd, nbytes=rnd.choice([1000, 3000, 4000, 8000, 12000])) if nd.kind is K else nd
                    for nd in g.nodes), g.buffers, g.edges, name=g.name)
    price = _PRICES[seed % len(_PRICES)](rnd.choice([0.5, 5.0, 50.0]))
    g = Graph(tuple(replace_dur(nd, price) for nd in g.nodes), g.buffers, g.edges, name=g.name)
    pb = Problem.of(g, "none", co)
    rg = pb.relaxed
    best_any = None
    for bs in few_bucketings(rg):
        h = materialize(rg, list(bs), price)
        offered = [v for v, nd in enumerate(h.nodes) if table.offered(nd, "dp") and table.ratio(nd.nbytes, 2) is not None]
        for modes in itertools.product((False, True), repeat=len(offered)):
            nodes = list(h.nodes)
            for v, ce in zip(offered, modes):
                if ce:
                    nodes[v] = replace(nodes[v], duration=table.price(nodes[v], nodes[v].duration))
            hv = Graph(tuple(nodes), h.buffers, h.edges, h.atomic_groups, h.name, h.meta, h.fake_edges,
                       h.implied_edges)
            truth = brute_force(hv, co)
            if truth is None or not truth.orders:
                continue
            ms = truth.best(None)
            best_any = ms if best_any is None else min(best_any, ms)
    if best_any is None:
        pytest.skip("no plan brute force can list")
    if seed % 2:
        monkeypatch.setattr("overlapsat.solver.plan_search.EXHAUSTIVE_BUCKETINGS", 0)
    r = optimize_plan(pb, price, time_limit=5, max_evaluations=20, transport=table)
    assert validate(Problem(r.bucketed, None, co), list(r.plan.order)) == []
    assert transport_problems(r.bucketed, r.plan.transports) == []
    nccl = {nd.name: nd.duration for nd in g.nodes}  # a bucket's merged collective: `price`, by hand
    want = [nd.name for nd in r.bucketed.nodes if table.offered(nd, "dp") and table.ratio(nd.nbytes, 2) is not None
            and table.price(nd, n := nccl.get(nd.name, price(nd))) < n]
    assert list(r.plan.transports) == want and r.plan.fingerprint == g.fingerprint()
    assert r.makespan >= best_any - 1e-9
    assert r.bound <= best_any * (1 + 1e-9)
    if r.proven:
        assert r.makespan == pytest.approx(best_any, rel=1e-9)


def test_a_plan_with_transports_is_no_longer_than_without_and_a_priced_start_is_refused():
    """The forward half of an FSDP step (gathers only: a group that also reduce-scatters is left to NCCL), its
    gathers 24-96 MiB, priced by run 56's table (input in symmetric memory), where the copy engine is cheaper."""
    from overlapsat.cost import cost_model, reprice
    from overlapsat.examples.models import fsdp_transformer
    from overlapsat.solver.plan_search import optimize_plan

    g = fsdp_transformer(layers=2, hidden=1024, seq=256, world=2)
    assert H100_COPY_ENGINE.group_of(g) is None  # it reduce-scatters too
    g = Graph(tuple(replace(nd, nbytes=nd.nbytes * 64, op="all_gather") if nd.kind is K else nd
                    for nd in g.nodes), g.buffers, g.edges, name=g.name)
    m = cost_model("h100_sxm")
    g = reprice(g, m)
    pb = Problem.of(g, "none", "group")
    plain = optimize_plan(pb, m.duration, time_limit=2, max_evaluations=10)
    ce = optimize_plan(pb, m.duration, time_limit=2, max_evaluations=10,
                       transport=load_copy_engine(SYMMETRIC, "copy_engine"))
    assert ce.plan.transports and all(ce.bucketed.node(nm).op == "all_gather" for nm in ce.plan.transports)
    assert ce.makespan <= plain.makespan + 1e-9 and ce.bound <= plain.bound + 1e-9
    assert ce.stats["plan"]["transport"]["copy_engine"] == len(ce.plan.transports)
    with pytest.raises(GraphError, match="leave them out"):
        optimize_plan(pb, m.duration, time_limit=1, transport="h100", unbucketed=plain)


def test_the_bound_over_every_bucketing_scales_its_rate_by_the_least_copy_engine_share():
    """Two 5 kB gathers, price 5 us + 1 us per kB: a bucket's least per-byte price read from NCCL's (the base) is
    about 7.5 us per gather; SMALL's least share is 0.5, so each costs half of it in the relaxation (below its own
    copy-engine price, 10 us x 0.548), however the table's shares rise and fall between sizes."""
    from overlapsat.plan import any_bucketing_relaxation
    from tests.test_plan import two_gathers

    def base(nd):
        return 5.0 + nd.nbytes / 1000 if nd.kind is K else nd.bytes_accessed / 100

    g = two_gathers()
    plain, _ = any_bucketing_relaxation(g, base)
    ce, _ = any_bucketing_relaxation(SMALL.repriced(g, "dp"), SMALL.pricing(base, "dp"))
    assert plain.node("ag1").duration == pytest.approx(7.5, rel=1e-2)
    assert ce.node("ag1").duration == pytest.approx(0.5 * plain.node("ag1").duration, rel=1e-12)
    assert SMALL.repriced(g, "dp").node("ag1").duration == pytest.approx(10.0 * SMALL.ratio(5000, 2))
