"""Plans inside torch.compile (`install_fx(plans=True)`, overlapsat.torch.fx_plan): buckets merged with torch's
own utilities, the plan's order applied, on two gloo ranks; numerics match eager; a rank without the plan
makes both keep Inductor's graph."""

import os
import shutil

import pytest

from tests.torch.scripts import CATCH_WARNINGS as CATCH
from tests.torch.scripts import run_ranks


def _ranks(phase, tmp_path, stores):
    return run_ranks("plan_ranks.py", phase, tmp_path, stores, tag="_" + os.path.basename(stores[1]))


def _save_plan(store, layout="copy", budget=None):
    """Every gather in one bucket and both reduce-scatters in another (torch's greedy bucketer with no cap),
    ordered by `optimize` on the bucketed graph of `layout`: the plan file `overlapsat plan` would write
    (`budget`: the memory budget its metrics say it was solved under)."""
    from overlapsat import Problem, load_graph, optimize, save_schedule
    from overlapsat.cost import cost_model
    from overlapsat.heuristics.bucketing import greedy_buckets
    from overlapsat.plan import laid_out, materialize
    from overlapsat.store import graph_path, recorded, schedule_path

    (fp,) = recorded(str(store))
    g = load_graph(graph_path(str(store), fp))
    bs = greedy_buckets(g.relaxed("group"), 10**12)
    assert sorted(len(b.members) for b in bs) == [2, 3]
    h = materialize(g.relaxed("group"), bs, laid_out(cost_model("h200").duration, layout))
    r = optimize(Problem.of(h, "none", "group"), time_limit=2, deterministic=True)
    metrics = {"memory_budget": budget, "peak_memory": r.peak_memory} if budget is not None else None
    save_schedule(schedule_path(str(store), fp), g, r.names, buckets=bs, layout=layout, metrics=metrics)


@pytest.mark.compile
@pytest.mark.slow
def test_two_ranks_apply_a_plan_with_torchs_merges_or_coalesced_and_match_eager(tmp_path):
    pytest.importorskip("torch")
    with_plan, without = tmp_path / "store", tmp_path / "store_without"
    with_plan.mkdir()
    cap = _ranks("capture", tmp_path, [with_plan, with_plan])
    assert all(c["matches_eager"] for c in cap) and cap[0]["gathers"] == 3 and cap[0]["reduce_scatters"] == 2
    shutil.copytree(with_plan, without)  # the same recorded graph, no plan
    _save_plan(with_plan)

    both = _ranks("apply", tmp_path, [with_plan, with_plan])
    for r, c in zip(both, cap):  # one merged gather and one merged reduce-scatter, the same results as eager
        assert r["gathers"] == 1 and r["reduce_scatters"] == 1, r
        assert r["matches_eager"] and r["warnings"] == [], r
        assert r["values"] == c["values"]  # bitwise Inductor's unbucketed graph's: members keep their order

    split = _ranks("apply", tmp_path, [with_plan, without])  # rank 1 has no plan: neither buckets, none hangs
    for r in split:
        assert r["gathers"] == 3 and r["reduce_scatters"] == 2 and r["matches_eager"], r
    assert len(split[0]["warnings"]) == 1 and "did not agree" in split[0]["warnings"][0], split[0]
    assert split[1]["warnings"] == [], split[1]

    # decision 55: the same buckets coalesced, one `*_coalesced` functional collective each (one NCCL group
    # call) on the members' own tensors: one gather call and one reduce-scatter call, no bucket buffer, and
    # results still bitwise Inductor's unbucketed graph's (each tensor is reduced alone, as unbucketed)
    coalesced = tmp_path / "store_coalesced"
    shutil.copytree(without, coalesced)
    _save_plan(coalesced, layout="coalesced")
    both = _ranks("apply", tmp_path, [coalesced, coalesced])
    for r, c in zip(both, cap):
        assert r["gathers"] == 1 and r["reduce_scatters"] == 1 and r["coalesced"] == 2, r
        assert r["matches_eager"] and r["warnings"] == [] and r["values"] == c["values"], r


# one gloo rank in a fresh interpreter, Inductor's caches off, overlapsat's warnings collected; G the world group
ONE_RANK = r"""
import logging, os, sys, tempfile
from tests.torch.scripts import use_kernel_cache
use_kernel_cache()
import torch, torch.distributed as dist
import torch._inductor.config as icfg
import torch.distributed._functional_collectives as funcol
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
from tests.torch.scripts import turn_graph_caches_off
turn_graph_caches_off()  # compiled kernels are kept
from torch._inductor.utils import run_and_get_code
""" + CATCH + r"""
G = dist.group.WORLD
"""

FAULT_SCRIPT = ONE_RANK + r"""
import overlapsat.torch.fx_apply as fa
from overlapsat.torch.fx_apply import install_fx
from tests.torch.test_fx_plan import _save_plan
def step(w1, w2, w3, x):
    a, b = funcol.all_gather_tensor(w1, 0, G), funcol.all_gather_tensor(w2, 0, G)
    c = funcol.all_gather_tensor(w3, 0, G)
    o = torch.tanh(torch.relu(x @ a.T) @ b) @ c.T
    return funcol.reduce_scatter_tensor(o * 2, "sum", 0, G), funcol.reduce_scatter_tensor(torch.sin(o), "sum", 0, G)
args = tuple(torch.randn(16, 16) for _ in range(4))
ref = step(*args)
store = tempfile.mkdtemp()
install_fx("capture", store)
torch.compile(step)(*args)
_save_plan(store)
def gathers(code):
    return sum("_c10d_functional.all_gather_into_tensor" in ln and not ln.strip().startswith(("assert", "#"))
               for ln in code.splitlines())
for case in ("plans off", "merge fails", "applied", "over its budget"):
    warnings.clear()
    if case == "over its budget":  # solved, it says, under 1 kB: the graph torch's merges make peaks above it
        _save_plan(store, budget=1024)
    if case == "merge fails":
        real = fa.merge_plan
        def boom(*a, **k):
            raise RuntimeError("merge broke")
        fa.merge_plan = boom
    install_fx("apply", store, plans=case != "plans off")
    torch._dynamo.reset()
    out, codes = run_and_get_code(lambda: torch.compile(step)(*args))
    if case == "merge fails":
        fa.merge_plan = real
    same = all(bool(torch.allclose(a, b, atol=1e-4)) for a, b in zip(out, ref))
    print(case, same, gathers(codes[0][codes[0].find("def call("):]), " // ".join(warnings), sep="\t")
"""


@pytest.mark.compile
def test_a_plan_the_pass_cannot_apply_keeps_inductors_graph_with_one_warning():
    """plans off: the plan is not applied, one warning says how to apply it; a merge that fails (on the dry
    run's copy) leaves the graph as it came, one warning; then applied: one gather; a plan whose merged graph
    peaks above the budget it was solved under: the graph as it came, one warning."""
    pytest.importorskip("torch")
    from tests.torch.scripts import run_script

    p = run_script(FAULT_SCRIPT)
    rows = {ln.split("\t")[0]: ln.split("\t")[1:] for ln in p.stdout.splitlines() if ln.count("\t") == 3}
    assert rows["plans off"][:2] == ["True", "3"] and "plans=True" in rows["plans off"][2], rows
    assert rows["merge fails"][:2] == ["True", "3"] and rows["merge fails"][2].count("merge broke") == 1, rows
    assert "//" not in rows["merge fails"][2], rows
    assert rows["applied"] == ["True", "1", ""], rows
    over = rows["over its budget"]  # decision 66: the budget is checked on the graph torch's merges make
    assert over[:2] == ["True", "3"] and over[2].count("above the budget of 1.00 KiB") == 1, rows


def test_with_plans_every_compile_takes_part_and_a_bad_option_is_named(tmp_path):
    """plans=True skips Inductor's caches (a rank that loaded a cached graph would miss the exchange its peers
    wait in), as "free" does; plans must be a bool."""
    pytest.importorskip("torch")
    from overlapsat.errors import GraphError
    from overlapsat.torch.fx_apply import FxSchedulePass

    assert FxSchedulePass(str(tmp_path), plans=True).uuid() is None
    assert FxSchedulePass(str(tmp_path)).uuid()
    with pytest.raises(GraphError, match="plans must be True or False"):
        FxSchedulePass(str(tmp_path), plans="yes")


# the stored plan applied in a fresh compile: `applied` (graphs the pass applied), `code` (the compiled call),
# `n_gathers` (NCCL gathers in it), `out`
APPLIED = r"""
applied = []
p = install_fx("apply", store, plans=True)
p.on_apply = lambda gr, o: applied.append(len(o))
torch._dynamo.reset()
out, codes = run_and_get_code(lambda: torch.compile(step)(*args))
code = codes[0][codes[0].find("def call("):]
n_gathers = sum("_c10d_functional.all_gather_into_tensor" in ln and not ln.strip().startswith(("assert", "#"))
                for ln in code.splitlines())
"""

PIN_SCRIPT = ONE_RANK + r"""
from overlapsat import Problem, load_graph, optimize, save_schedule
from overlapsat.cost import cost_model
from overlapsat.plan import Bucket, materialize
from overlapsat.store import graph_path, recorded, schedule_path
from overlapsat.torch.fx_apply import install_fx
def step(w1, w2, x, y):
    a, b = funcol.all_gather_tensor(w1, 0, G), funcol.all_gather_tensor(w2, 0, G)
    z = torch.relu(y @ y)  # independent of the gathers: the plan hides it behind the bucket's transfer
    return (x @ a.T) @ b + z.sum()
args = (torch.randn(64, 64), torch.randn(64, 64), torch.randn(64, 64), torch.randn(512, 512))
ref = step(*args)
store = tempfile.mkdtemp()
install_fx("capture", store)
torch.compile(step)(*args)
(fp,) = recorded(store)
g = load_graph(graph_path(store, fp))
gathers = [g.names[c] for c in g.coll_seq]
bs = [Bucket(tuple(gathers))]
h = materialize(g.relaxed("group"), bs, cost_model("h200").duration)
r = optimize(Problem.of(h, "none", "group"), time_limit=2, deterministic=True)
c_in, coll, wait, c_out = bs[0].nodes
from overlapsat.validate import validate
def with_gemm_inside(order):  # the GEMM that needs no gather moved to just after the bucket's collective
    for nm in order:
        if nm in g.index and g.node(nm).gemm_like:
            o = [x for x in order if x != nm]
            o.insert(o.index(coll) + 1, nm)
            if not validate(h, o, collective_order="group", limit=1):
                return o
    return order
order = with_gemm_inside(list(r.names))
inside = [nm for nm in order[order.index(coll) + 1: order.index(wait)] if nm in g.index and g.node(nm).gemm_like]
save_schedule(schedule_path(store, fp), g, order, buckets=bs)
""" + APPLIED + r"""
print("result", len(inside), len(applied), n_gathers, bool(torch.allclose(out, ref, atol=1e-3)),
      " // ".join(warnings), sep="\t")
"""


@pytest.mark.compile
def test_a_plan_whose_order_pins_a_gemm_inside_a_bucket_is_applied():
    """A plan whose order puts a GEMM between a bucket's collective and its wait needs pins (control
    dependencies), whose dry run ran on a copy of the graph with no module and failed, so every such plan was
    kept out with a warning (found on the GPU step harness, 2026-11-26): now applied, one merged gather, eager's
    numbers."""
    pytest.importorskip("torch")
    from tests.torch.scripts import run_script

    p = run_script(PIN_SCRIPT)
    (row,) = [ln.split("\t")[1:] for ln in p.stdout.splitlines() if ln.startswith("result\t")]
    inside, applied, gathers, same, warned = row
    assert int(inside) >= 1, row  # the order did pin a GEMM inside the bucket's transfer
    assert (applied, gathers, same, warned) == ("1", "1", "True", ""), row


def test_merge_plan_sorts_a_merged_graph_torch_left_out_of_order(monkeypatch):
    """torch's merge inserts a bucket after its last member; where the first member's users come before that,
    torch 2.11 (no `_sort_bucket_region`) leaves the graph out of topological order, and the importer refused
    it: a plan bucketing the re-gathers of two transformer blocks was kept out on 2 H100s (2026-11-26).
    merge_plan sorts the merged graph before reading it; the plan's order then places every node."""
    torch = pytest.importorskip("torch")
    import torch._inductor.fx_passes.bucketing as tb
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from overlapsat import Problem, optimize, validate
    from overlapsat.cost import cost_model
    from overlapsat.plan import Bucket, Plan, materialize
    from overlapsat.torch.fx import import_fx
    from overlapsat.torch.fx_plan import is_collective, merge_plan
    from tests.torch.test_fx import _trace

    if hasattr(tb, "_sort_bucket_region"):  # torch 2.11's merge: no sort after it
        monkeypatch.setattr(tb, "_sort_bucket_region", lambda *a, **k: None)

    def f(w1, w2, x):
        h = torch.relu(x @ funcol.all_gather_tensor(w1, 0, dist.group.WORLD).T)  # before the second gather
        return h @ funcol.all_gather_tensor(w2, 0, dist.group.WORLD)

    gm = _trace(f, torch.randn(8, 16), torch.randn(8, 16), torch.randn(4, 16))
    g = import_fx(gm)
    bs = (Bucket(tuple(g.names[c] for c in g.coll_seq)),)
    h = materialize(g.relaxed("group"), bs, cost_model("h200").duration)
    order = optimize(Problem.of(h, "none", "group"), time_limit=1, deterministic=True).names
    merged, placed, _ = merge_plan(gm.graph, g, Plan(tuple(order), bs, g.fingerprint()), import_fx)
    assert sum(1 for n in gm.graph.nodes if is_collective(n)) == 1
    assert validate(merged, placed, collective_order="free") == []


def test_a_copy_engine_transport_swaps_the_gather_in_place_and_is_refused_off_cuda():
    """`apply_transports` puts torch's copy-engine all_gather where the gather was, with its input and group: the
    wait reads it, and the agreed sequence names its op (a rank that kept NCCL's would disagree). On CPU
    tensors `transport_nodes` refuses, naming the node and the device."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from overlapsat import GraphError
    from overlapsat.torch.agree import collective_sequence
    from overlapsat.torch.fx_plan import apply_transports, is_wait, transport_nodes
    from tests.torch.test_fx import _trace

    def f(w, x):
        return x @ funcol.all_gather_tensor(w, 0, dist.group.WORLD).T

    gm = _trace(f, torch.randn(8, 16), torch.randn(4, 16))
    (ag,) = [n for n in gm.graph.nodes if "all_gather_into_tensor" in str(n.target)]
    inp, group = ag.args[0], ag.args[2]
    with pytest.raises(GraphError, match=f"transport of '{ag.name}': its output is not on a CUDA device"):
        transport_nodes(gm.graph, [ag.name])
    (new,) = apply_transports(gm.graph, [ag])
    assert new.target is torch.ops.symm_mem._low_contention_all_gather.default and new.args == (inp, group)
    assert [u for u in new.users if is_wait(u)] and ag not in gm.graph.nodes
    assert collective_sequence(gm.graph) == [f"{new.name} (_low_contention_all_gather)"]


CE_SCRIPT = PIN_SCRIPT.split("c_in, coll, wait, c_out")[0] + r"""
c_in, coll, wait, c_out = bs[0].nodes
save_schedule(schedule_path(store, fp), g, list(r.names), buckets=bs, transports=[coll])
""" + APPLIED + r"""
print("result", len(applied), n_gathers, "low_contention" in code, bool(torch.allclose(out, ref, atol=1e-3)),
      " // ".join(warnings), sep="\t")
"""


@pytest.mark.compile
def test_a_plan_whose_copy_engine_cannot_apply_stands_on_nccl_with_one_warning():
    """A version-3 plan (a bucket whose gather takes the copy engine) on CPU tensors: the copy engine moves CUDA
    memory only, so the dry run keeps the gather on NCCL, one warning says so, and the plan's bucket and order
    are applied with eager's numbers."""
    pytest.importorskip("torch")
    from tests.torch.scripts import run_script

    p = run_script(CE_SCRIPT)
    (row,) = [ln.split("\t")[1:] for ln in p.stdout.splitlines() if ln.startswith("result\t")]
    applied, gathers, swapped, same, warned = row
    assert (applied, gathers, swapped, same) == ("1", "1", "False", "True"), row
    assert warned.count("copy-engine all_gathers stay on NCCL") == 1 and "not on a CUDA device" in warned, row
    assert "//" not in warned, row


def test_merge_plan_issues_a_coalesced_bucket_as_one_group_call_with_a_wait_per_member():
    """Decision 55 on a traced graph: the two gathers become one `all_gather_into_tensor_coalesced` of both
    shards, in the members' order, a getitem and a wait per member; no copy node; the plan's order places every
    node and is valid on the merged graph. Members of different operations are refused by name before any change."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from overlapsat import GraphError, Problem, optimize, validate
    from overlapsat.cost import cost_model
    from overlapsat.plan import Bucket, Plan, laid_out, materialize
    from overlapsat.torch.fx import import_fx
    from overlapsat.torch.fx_plan import coalesce, is_collective, is_wait, merge_plan
    from tests.torch.test_fx import _trace

    def f(w1, w2, x):
        h = torch.relu(x @ funcol.all_gather_tensor(w1, 0, dist.group.WORLD).T)
        return h @ funcol.all_gather_tensor(w2, 0, dist.group.WORLD)

    gm = _trace(f, torch.randn(8, 16), torch.randn(8, 16), torch.randn(4, 16))
    g = import_fx(gm)
    bs = (Bucket(tuple(g.names[c] for c in g.coll_seq)),)
    h = materialize(g.relaxed("group"), bs, laid_out(cost_model("h200").duration, "coalesced"))
    order = optimize(Problem.of(h, "none", "group"), time_limit=1, deterministic=True).names
    shards = [n for n in gm.graph.nodes if n.op == "placeholder"][:2]
    merged, placed, _ = merge_plan(gm.graph, g, Plan(tuple(order), bs, g.fingerprint(), layout="coalesced"),
                                   import_fx)
    (coll,) = [n for n in gm.graph.nodes if is_collective(n)]
    assert coll.target is torch.ops._c10d_functional.all_gather_into_tensor_coalesced.default
    assert list(coll.args[0]) == shards  # the shards themselves: nothing copied into a buffer
    assert sum(is_wait(n) for n in gm.graph.nodes) == 2 and not any("cat" in str(n.target) for n in gm.graph.nodes)
    assert validate(merged, placed, collective_order="free") == [] and len(merged.waits_of[merged.index[coll.name]]) == 2

    def mixed(w, x):
        a = funcol.all_gather_tensor(w, 0, dist.group.WORLD)
        return funcol.reduce_scatter_tensor(x @ a.T, "sum", 0, dist.group.WORLD)

    gm2 = _trace(mixed, torch.randn(8, 16), torch.randn(8, 16))
    colls = [n for n in gm2.graph.nodes if is_collective(n)]
    before = len(gm2.graph.nodes)
    with pytest.raises(GraphError, match="coalesced buckets merge one of"):
        coalesce(gm2.graph, colls, "b")
    assert len(gm2.graph.nodes) == before


def test_a_steps_two_graphs_are_named_apart(tmp_path):
    """#52: the FX pass names a graph by its part of the step (AOTAutograd's backward takes `tangents_*`), so
    `solve-cache` and `bench` rows tell a step's forward and backward apart; the name is not in the fingerprint."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from overlapsat.torch.fx_apply import FxSchedulePass

    def fwd(primals_1, primals_2):
        return torch.relu(primals_1 @ primals_2)

    def bwd(primals_1, tangents_1):
        return torch.relu(primals_1 * tangents_1)

    p = FxSchedulePass(str(tmp_path), profile="h100_sxm")
    graphs = [p._importer(make_fx(f)(torch.randn(4, 4), torch.randn(4, 4)).graph) for f in (fwd, bwd)]
    assert [g.name for g in graphs] == ["fx forward graph", "fx backward graph"]
    assert {g.meta["pricing"] for g in graphs} == {"h100_sxm"}  # what solve-cache and a miss compare with
