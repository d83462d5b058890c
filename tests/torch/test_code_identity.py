"""Where overlapsat does not apply an order, Inductor must emit exactly the code it emits without overlapsat, its own
re-sorting by memory included (decision 111: `install_fx` turns `reorder_for_peak_memory` off, which would re-sort
an applied order, and the check after fusion runs it in its place on a graph compiled as it came, as the user's
settings have it): the capture pass, an apply pass that finds nothing stored, and the check after fusion on a
graph without a budget. Runs 34-38 found a check that left Inductor's planning info behind and so changed the
frees it emitted (decisions.md 21); a 2026-12-02 GPU run found a backward graph whose plan was set aside compile
33.8 MB above plain Inductor's peak, without its re-sorting. The step's backward is one Inductor's re-sorting
changes (two matmuls' outputs each reduced), so the reference is not what no re-sorting gives (checked). One gloo
rank, CPU, in a subprocess."""

import json

import pytest

from tests.torch.scripts import CATCH_WARNINGS, run_script

pytest.importorskip("torch")

SCRIPT = r"""
import json, logging, os, tempfile
from tests.torch.scripts import use_kernel_cache
use_kernel_cache()
import torch, torch.distributed as dist
import torch._inductor.config as icfg
import torch.distributed._functional_collectives as funcol
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
from tests.torch.scripts import turn_graph_caches_off
turn_graph_caches_off()  # compiled kernels are kept
from torch._inductor.utils import run_and_get_code
from overlapsat.torch.fx_apply import install_fx
""" + CATCH_WARNINGS + r"""

class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(32, 64))
        self.w2 = torch.nn.Parameter(torch.randn(64, 32))

    def forward(self, x):
        a = funcol.all_gather_tensor(self.w1, 0, dist.group.WORLD)
        h = torch.relu(x @ a)
        b = funcol.all_gather_tensor(self.w2, 0, dist.group.WORLD)
        c, d = h @ self.w3, h @ self.w4  # two large outputs, each reduced: an order re-sorting by memory changes
        return (torch.tanh(h @ b) * h.sum(-1, keepdim=True)).sum() + c.sum() + d.sum()

torch.manual_seed(0)
model, x = Step(), torch.randn(16, 32)
model.w3, model.w4 = torch.nn.Parameter(torch.randn(64, 512)), torch.nn.Parameter(torch.randn(64, 512))

from overlapsat.torch.installing import uninstall

def calls(setup, reorder=True):
    torch._dynamo.reset()
    icfg.post_grad_custom_post_pass = None
    icfg._post_fusion_custom_pass = None
    icfg.reorder_for_peak_memory = reorder  # the user's setting (Inductor's default: on)
    icfg.reorder_for_compute_comm_overlap = False
    setup()
    try:
        _, codes = run_and_get_code(lambda: torch.compile(model)(x).backward())
    finally:
        while uninstall():
            pass
    return [c.split("def call(", 1)[1] for c in codes if "def call(" in c]

plain = calls(lambda: None)
unsorted = calls(lambda: None, reorder=False)
store = tempfile.mkdtemp()
captured = calls(lambda: install_fx("capture", store))
recorded = sorted(f for f in os.listdir(store) if f.endswith(".graph.json"))
missed = calls(lambda: install_fx("apply", tempfile.mkdtemp()))
missed_unsorted = calls(lambda: install_fx("apply", tempfile.mkdtemp()), reorder=False)
print(json.dumps({"graphs": len(plain), "recorded": len(recorded), "capture": captured == plain,
                  "miss": missed == plain, "resorting_matters": unsorted != plain,
                  "miss_unsorted": missed_unsorted == unsorted}))
"""


def test_bridge_leaves_inductors_code_alone_where_it_applies_nothing():
    out = json.loads(run_script(SCRIPT).stdout.strip().splitlines()[-1])
    assert out["graphs"] == 2 and out["recorded"] == 2  # forward and backward, both seen by the capture
    assert out["resorting_matters"], "the step no longer tells Inductor's re-sorting by memory apart"
    assert out["capture"], "the capture pass changed Inductor's code"
    assert out["miss"], "an apply pass with nothing stored changed Inductor's code"
    assert out["miss_unsorted"], "with the user's re-sorting off, an apply pass that applies nothing changed the code"
