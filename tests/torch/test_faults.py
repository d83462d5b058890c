"""Every fault inside the pass, injected into a real torch.compile: the compile runs, matches eager, and
overlapsat logs exactly one warning (gloo, world size 1, CPU; one subprocess for all faults)."""

import pytest

from tests.torch.scripts import CATCH_WARNINGS, run_script

SCRIPT = r"""
import importlib, json, logging, os, sys, tempfile
from tests.torch.scripts import use_kernel_cache
use_kernel_cache()
import torch, torch.distributed as dist
import torch._inductor.config as icfg
import torch.distributed._functional_collectives as funcol
tmp = tempfile.mkdtemp()
dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "pg"), rank=0, world_size=1)
from overlapsat.torch.apply import SchedulePass
from tests.torch.scripts import graph_caches_off
apply = importlib.import_module("overlapsat.torch.apply")
io = importlib.import_module("overlapsat.io")

""" + CATCH_WARNINGS + r"""

def f(a, b):
    h = torch.relu(a @ b)
    r = funcol.all_reduce(h, "sum", dist.group.WORLD)
    return (torch.tanh(a) @ b + r).sum(dim=0)

x, w = torch.randn(16, 16), torch.randn(16, 16)
ref = f(x, w)

def compile_with(p):
    torch._dynamo.reset()
    with graph_caches_off(), icfg.patch(reorder_for_compute_comm_overlap=True,
                    reorder_for_compute_comm_overlap_passes=[p]):
        return torch.compile(f)(x, w)

def store():
    return tempfile.mkdtemp()

# the graph's fingerprint, from a capture
s0 = store()
compile_with(SchedulePass(s0, mode="capture"))
fp = [n for n in os.listdir(s0) if n.endswith(".graph.json")][0].split(".")[0]
from overlapsat.io import load_graph
g = load_graph(os.path.join(s0, fp + ".graph.json"))

def fault(name):
    s = store()
    undo = []
    def patch(obj, attr, val):
        old = getattr(obj, attr)
        setattr(obj, attr, val)
        undo.append((obj, attr, old))
    if name == "import":
        def boom(*a, **k):
            raise ImportError("cannot import name 'X' from torch._inductor")
        patch(apply, "import_snodes", boom)
        p = SchedulePass(s)
    elif name == "lookup":
        def boom(*a, **k):
            raise OSError(5, "Input/output error", os.path.join(s, fp + ".schedule.json"))
        patch(apply, "usable_stored", boom)  # the schedule lookup the pass calls
        p = SchedulePass(s)
    elif name == "validation":  # a stored order that breaks a dependency
        order = list(reversed(g.input_order))
        json.dump({"format": "overlapsat-schedule", "version": 1, "graph": g.name, "graph_fingerprint": fp,
                   "order": order}, open(os.path.join(s, fp + ".schedule.json"), "w"))
        p = SchedulePass(s)
    elif name == "bad_schedule_file":
        open(os.path.join(s, fp + ".schedule.json"), "w").write('{"format": "overlapsat-sched')
        p = SchedulePass(s)
    elif name == "solver":
        opt = importlib.import_module("overlapsat.solver")
        def boom(*a, **k):
            raise RuntimeError("CP-SAT exploded")
        patch(opt, "optimize", boom)
        p = SchedulePass(s, mode="solve")
    elif name == "store_gone":
        p = SchedulePass(s)
        os.rmdir(s)
    elif name == "permission":
        def deny(src, dst):
            raise PermissionError(13, "Permission denied", dst)
        patch(io.os, "replace", deny)
        p = SchedulePass(s)
    elif name == "apply_heuristic_fallback_fails":
        from overlapsat.heuristics import portfolio
        def boom(*a, **k):
            raise MemoryError("portfolio")
        patch(portfolio, "run_all", boom)
        p = SchedulePass(s, fallback="heuristic")
    del warnings[:]
    try:
        out = compile_with(p)
    finally:
        for obj, attr, old in reversed(undo):
            setattr(obj, attr, old)
    print(name, bool(torch.allclose(out, ref, atol=1e-5)), len(warnings), "|", " / ".join(warnings)[:300])

for name in sys.argv[1:]:
    fault(name)
"""

FAULTS = ["import", "lookup", "validation", "bad_schedule_file", "solver", "store_gone", "permission",
          "apply_heuristic_fallback_fails"]


@pytest.mark.compile
def test_every_fault_keeps_the_compile_and_matches_eager():
    pytest.importorskip("torch")
    p = run_script(SCRIPT, *FAULTS, timeout=900)
    rows = {line.split()[0]: line for line in p.stdout.strip().splitlines() if line.split()[0] in FAULTS}
    assert sorted(rows) == sorted(FAULTS), p.stdout
    for line in rows.values():
        _, same, n = line.split()[:3]
        assert same == "True" and n == "1", line  # the compile ran, matched eager, one warning
