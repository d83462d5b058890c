"""The committed FX corpus (#12): the peer's order is a valid row at its own level, overlapsat is never worse
than it, and the peer's collective reordering is what the default level forbids. Needs no torch."""

import gzip
import json
import os

import pytest

from overlapsat import graph_from_dict, optimize, simulate, validate

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "fx_corpus",
                    "llama3_8b_L4_w64.json.gz")


def test_overlapsat_against_the_peer_on_a_committed_fx_graph():
    from overlapsat.simulate import peak_memory

    with gzip.open(PATH, "rt", encoding="utf-8") as f:
        d = json.load(f)
    g, peer = graph_from_dict(d["graph"]), d["overlap_scheduler"]
    assert len(g) == 984 and g.counts()["collective"] == 72
    base = peak_memory(g)
    budget = base + max(1 << 30, int((base + g.meta["primals_bytes"]) * 0.05))  # the peer's own rule
    assert validate(g, peer, budget, collective_order="free") == []
    assert any(v.kind == "collective_order" for v in validate(g, peer, collective_order="group"))
    r = optimize(g, time_limit=3, memory_budget=budget, collective_order="free", extra_orders={"overlap_scheduler": peer})
    assert validate(g, r.order, budget, collective_order="free") == []
    assert r.makespan <= simulate(g, peer).makespan + 1e-6
    assert r.bound <= r.makespan + 1e-6
    assert any(h["name"] == "overlap_scheduler" for h in r.heuristics)


@pytest.mark.parametrize("name", ["llama3_8b_L8_w64", "llama3_8b_L32_w64", "llama3_8b_L32_w256", "moe_L16_w64",
                                  "llama3_8b_2d_L8_tp8_w64", "moe_dsv3_L8_ep8_w64", "llama3_8b_2d_L32_tp8_w64_bwd",
                                  "moe_dsv3_L61_ep8_w128_bwd"])
def test_the_larger_fx_graphs_load_and_their_peer_orders_are_permutations(name):
    with gzip.open(PATH.replace("llama3_8b_L4_w64", name), "rt", encoding="utf-8") as f:
        d = json.load(f)
    g = graph_from_dict(d["graph"])
    assert sorted(d["overlap_scheduler"]) == sorted(g.names)
    assert d["bucketed"]["collectives"] <= g.counts()["collective"]
    if name.startswith(("llama3_8b_2d", "moe_dsv3")):  # two process groups: data parallel and TP or EP
        assert len(g.groups) == 2
    if name.startswith("moe_dsv3"):  # all_gather / reduce_scatter over data parallel, all_to_all over EP
        ops = {nd.group: set() for nd in g.nodes if nd.group}
        for nd in g.nodes:
            if nd.group:
                ops[nd.group].add(nd.op)
        assert sorted(map(sorted, ops.values())) == [["all_gather", "reduce_scatter"], ["all_to_all"]]
    if name.endswith("_bwd"):  # a backward graph alone: every weight gathered again, every gradient reduced
        ops = [nd.op for nd in g.nodes if nd.group]
        assert ops.count("all_gather") >= ops.count("reduce_scatter") - 1 > 100, (ops.count("all_gather"),
                                                                               ops.count("reduce_scatter"))


@pytest.mark.parametrize("name", ["llama3_8b_L4_w64", "llama3_8b_L32_w64", "moe_dsv3_L8_ep8_w64"])
def test_the_recorded_peer_buckets_are_plans_of_the_graph(name):
    """torch's scheduler's buckets and the TBB buckets (one gather and one reduce-scatter bucket per block)
    are legal buckets of the graph: bench_plan orders them as plans of the same problem."""
    from overlapsat.plan import Bucket, bucket_problems

    with gzip.open(PATH.replace("llama3_8b_L4_w64", name), "rt", encoding="utf-8") as f:
        d = json.load(f)
    g = graph_from_dict(d["graph"])
    tbb = [Bucket(tuple(b)) for b in d["tbb"]]
    assert tbb and bucket_problems(g.relaxed("free"), tbb) == []
    ops = {g.node(b.members[0]).op for b in tbb}
    assert ops == {"all_gather", "reduce_scatter"}
    from overlapsat.solver.plan_search import as_buckets

    torch_bs = as_buckets(g, d["bucketed"]["buckets"])  # torch lists members in its merge order
    members = [m for b in torch_bs for m in b.members]
    assert torch_bs and len(members) == len(set(members)) and set(members) <= set(g.names)
    assert bucket_problems(g.relaxed("free"), torch_bs) == []  # every one a legal bucket of the graph
    # torch's FSDP pre-bucketing alone (before a scheduler that does not bucket), and its overlap-preserving
    # bucketer run on overlapsat's own order: legal buckets of the graph too, each over gathers or reduce-scatters
    for key in ("prebucketed", "overlap_preserving"):
        bs = as_buckets(g, d[key]["buckets"])
        members = [m for b in bs for m in b.members]
        assert bs or (key, name) == ("prebucketed", "moe_dsv3_L8_ep8_w64"), key  # torch pre-buckets no MoE group
        assert len(members) == len(set(members)) and set(members) <= set(g.names), key
        assert bucket_problems(g.relaxed("free"), bs) == [], key
    assert d["prebucketed"]["makespan_us"] > 0 and d["overlap_preserving"]["level"] == "free"


def test_a_plan_is_never_longer_than_a_valid_order_it_is_given():
    """#50: under torch bucketed's own peak, on the 13k-node DeepSeek-V3 backward graph, the plan search alone
    (3 s) finds nothing better than the input order (8,009 ms), while torch's OverlapScheduler order reaches
    6,975 ms within that peak. Given that order (`extra_orders`), the plan is never longer, and within the budget."""
    from overlapsat import Problem, evaluate, optimize_plan
    from overlapsat.cost import cost_model

    with gzip.open(PATH.replace("llama3_8b_L4_w64", "moe_dsv3_L61_ep8_w128_bwd"), "rt", encoding="utf-8") as f:
        d = json.load(f)
    g, peer = graph_from_dict(d["graph"]), d["overlap_scheduler"]
    p = Problem.of(g, int(d["bucketed"]["peak_memory"]), "free")
    torch_row = evaluate(p.on(p.relaxed), "torch", g.order_indices(peer))
    assert torch_row.valid and torch_row.makespan == pytest.approx(6_975_402.151, rel=1e-9)  # the corpus's figure
    r = optimize_plan(p, cost_model("h200").duration, time_limit=3, extra_orders={"torch OverlapScheduler": peer})
    assert r.makespan <= torch_row.makespan + 1e-6
    assert validate(r.bucketed, r.order, p.budget, collective_order="free") == []


def test_an_extra_order_naming_nodes_the_graph_lacks_is_refused_by_name():
    from overlapsat import GraphError, Problem, optimize_plan
    from overlapsat.cost import cost_model

    with gzip.open(PATH, "rt", encoding="utf-8") as f:
        g = graph_from_dict(json.load(f)["graph"])
    with pytest.raises(GraphError, match=r"extra_orders: 'mine' names nodes this graph lacks(.|\n)*'nope'"):
        optimize_plan(Problem.of(g), cost_model("h200").duration, time_limit=1,
                      extra_orders={"mine": [*g.names[:-1], "nope"]})
    with pytest.raises(GraphError, match="extra_orders: 'input order as given' is not a usable name"):
        optimize_plan(Problem.of(g), cost_model("h200").duration, time_limit=1,
                      extra_orders={"input order as given": list(g.names)})
