"""The FX-level pass (#12): capture, solve, apply on a real compile (gloo, one rank, CPU); numerics match eager,
the generated code issues collectives, waits and extern kernels in the solved order; a fault keeps the compile."""

import pytest

from tests.torch.scripts import CATCH_WARNINGS, run_script
from tests.torch.test_fx_plan import ONE_RANK

SCRIPT = r"""
import importlib, logging, os, re, sys, tempfile
from tests.torch.scripts import use_kernel_cache
use_kernel_cache()
import torch, torch.distributed as dist
import torch._inductor.config as icfg
import torch.distributed._functional_collectives as funcol
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
from tests.torch.scripts import turn_graph_caches_off
turn_graph_caches_off()  # compiled kernels are kept
from torch._inductor.utils import run_and_get_code
from overlapsat.store import solve_store
from overlapsat.torch.fx_apply import install_fx
""" + CATCH_WARNINGS + r"""

def step(w1, w2, x):
    a = funcol.all_gather_tensor(w1, 0, dist.group.WORLD)
    h = torch.relu(x @ x.T)
    b = funcol.all_gather_tensor(w2, 0, dist.group.WORLD)
    o = torch.tanh(h @ a) @ b.T
    return o.sum()

args = (torch.randn(16, 16), torch.randn(16, 16), torch.randn(16, 16))
ref = step(*args)
store = tempfile.mkdtemp()
install_fx("capture", store)
torch.compile(step)(*args)
outs = solve_store(store, time_limit=2)
# torch's OverlapScheduler order, recorded beside each new graph (torch_order=True, the default), is a candidate of
# the solve: the stored schedule's heuristic rows hold it; torch_order=False records none
from overlapsat import load_graph as _lg, load_schedule as _ls
from overlapsat.store import TORCH_ORDER, graph_path as _gp, recorded as _rec, schedule_path as _sp
_gs = [_lg(_gp(store, fp)) for fp in _rec(store)]
_rows = [[h["name"] for h in _ls(_sp(store, fp)).meta["heuristics"]] for fp in _rec(store)]
bare = tempfile.mkdtemp()
install_fx("capture", bare, torch_order=False)
torch._dynamo.reset()
torch.compile(step)(*args)
print("TORCH", len(_gs), all(sorted(g.meta[TORCH_ORDER]["torch OverlapScheduler"]) == sorted(g.names) for g in _gs),
      all("torch OverlapScheduler" in r for r in _rows),
      [TORCH_ORDER in _lg(_gp(bare, fp)).meta for fp in _rec(bare)], len(warnings))
applied = []
p = install_fx("apply", store)
p.on_apply = lambda g, order: applied.append((g, order))
torch._dynamo.reset()
out, codes = run_and_get_code(lambda: torch.compile(step)(*args))
g, order = applied[0]
# (FX node name prefix, what its kernel's line in the generated code contains, event)
EVENTS = [("all_gather", "all_gather_into_tensor.default(", "ag"), ("wait", "wait_tensor.default", "wait"),
          ("mm", "extern_kernels.mm", "mm"), ("relu", "relu", "relu"), ("tanh", "tanh", "tanh")]
def emitted(code, kinds):  # the events of `kinds` in the order the generated code issues them
    body, out = code[code.find("def call("):], []
    for line in body.splitlines():
        if line.strip().startswith(("assert", "#", "del ")):
            continue
        out += [ev for _, key, ev in EVENTS if ev in kinds and key in line][:1]
    return out
def planned(order, kinds):  # the same events in the solved order
    return [ev for n in order for prefix, _, ev in EVENTS if ev in kinds and n.startswith(prefix)]
KERNELS = ("ag", "wait", "mm")
print("RESULT", bool(torch.allclose(out, ref, atol=1e-4)), emitted(codes[0], KERNELS) == planned(order, KERNELS),
      order[:2], len(warnings))

# pin="all": pointwise kernels are pinned too, so the relu and the tanh stay inside the overlap the order planned.
# On one gloo rank hiding a collective gains nothing, so which optimal order the solver stores is a tie; the
# stored order here is Inductor's raise_comms (both gathers first), whose overlap windows hold the relu and tanh
from overlapsat import load_graph, save_schedule
from overlapsat.heuristics import raise_comms
from overlapsat.store import graph_path, recorded, schedule_path
for fp in recorded(store):
    gr = load_graph(graph_path(store, fp))
    save_schedule(schedule_path(store, fp), gr, raise_comms(gr).order)
applied.clear()
p = install_fx("apply", store, pin="all")
p.on_apply = lambda g, order: applied.append((g, order))
torch._dynamo.reset()
out, codes = run_and_get_code(lambda: torch.compile(step)(*args))
ALL = KERNELS + ("relu", "tanh")
events = emitted(codes[0], ALL)
order = applied[0][1]
print("PINNED", bool(torch.allclose(out, ref, atol=1e-4)), events == planned(order, ALL), "relu" in events,
      len(warnings))

# a fault inside the pass: the compile runs, matches eager, one warning, the graph as it came
fx = importlib.import_module("overlapsat.torch.fx")
def boom(*a, **k):
    raise RuntimeError("importer broke")
fx.import_fx = boom
torch._dynamo.reset()
out2 = torch.compile(step)(*args)
print("FAULT", bool(torch.allclose(out2, ref, atol=1e-4)), len(warnings))
"""


@pytest.mark.compile
def test_fx_pass_applies_the_solved_order_and_survives_a_fault():
    pytest.importorskip("torch")
    p = run_script(SCRIPT)
    lines = {ln.split()[0]: ln.split()[1:] for ln in p.stdout.splitlines()
             if ln.startswith(("RESULT", "PINNED", "FAULT", "TORCH"))}
    res = lines["RESULT"]
    assert res[0] == "True" and res[1] == "True", p.stdout  # numerics, and the emitted order is the solved one
    # which optimal order the solver stores is not asserted: on one gloo rank hiding a collective gains nothing,
    # and the ranking's tie-break by peak memory decides (a collective's input is held until its wait, decision
    # 18); prefetching is asserted on a 2-rank trace in tests/torch/test_fx.py
    assert res[-1] == "0"
    assert lines["TORCH"] == ["1", "True", "True", "[False]", "0"], p.stdout
    assert lines["PINNED"] == ["True", "True", "True", "0"], p.stdout  # pointwise kernels kept in the solved order
    assert lines["FAULT"] == ["True", "1"], p.stdout


GROUPS_SCRIPT = ONE_RANK + r"""
from overlapsat.store import recorded, solve_store
from overlapsat.torch.fx_apply import install_fx
# two "tensor-parallel" groups of one shape, as two ranks of a 2-D mesh hold them: the same program, other names
tp_a, tp_b = dist.new_group([0]), dist.new_group([0])
def make(tp):
    def step(w1, w2, x):
        a = funcol.all_gather_tensor(w1, 0, G)
        h = funcol.all_reduce(torch.relu(x @ a.T), "sum", tp)
        b = funcol.all_gather_tensor(w2, 0, G)
        return (torch.tanh(h) @ b).sum()
    return step
args = tuple(torch.randn(16, 16) for _ in range(3))
ref = make(tp_a)(*args)
store = tempfile.mkdtemp()
install_fx("capture", store)
torch.compile(make(tp_a))(*args)
solve_store(store, time_limit=2)
applied = []
p = install_fx("apply", store)
p.on_apply = lambda g, order: applied.append(sorted({nd.group for nd in g.nodes if nd.group}))
torch._dynamo.reset()
out = torch.compile(make(tp_b))(*args)
print("RESULT", tp_a.group_name != tp_b.group_name, len(recorded(store)), applied,
      bool(torch.allclose(out, ref, atol=1e-4)))
"""


@pytest.mark.compile
def test_a_rank_whose_groups_have_other_names_applies_the_plan_solved_for_its_peer():
    """TP run, 2026-11-26 (4 x H100, 2-way TP x 2-way FSDP): each rank's graphs named its own process groups,
    so 4 ranks recorded 8 graphs and each rank ran its own solve; tensor-parallel peers issued their
    all_reduces after different compute and waited on each other. Groups are now named by structure."""
    pytest.importorskip("torch")
    p = run_script(GROUPS_SCRIPT)
    res = next(ln.split(maxsplit=1)[1] for ln in p.stdout.splitlines() if ln.startswith("RESULT"))
    assert res == "True 1 [['g0', 'g1']] True", p.stdout  # one graph recorded, applied by the other name's rank
