"""The GPU step's `tbb_torch` configuration (#32): torch's own `manual_overlap_bucketing`, run as torchtitan's
Inductor path runs it, buckets the step's collectives one bucket per block and kind. The reference is the
step's structure: each Block gathers its 9 parameters and backward reduce-scatters their 9 gradients."""

import json

import pytest

SCRIPT = """
import functools, json, os, tempfile
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()
import torch, torch.distributed as dist
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch.testing._internal.distributed.fake_pg import FakeStore
import torch._inductor.config as icfg
from benchmarks.gpu.e2e_step import PARAMS_PER_BLOCK, build, set_config, torch_tbb_pass
icfg.force_disable_caches = True
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
layers = 2
sink = []
settings = set_config("tbb_torch", False, layers, sink)
installed = icfg.post_grad_custom_post_pass
assert isinstance(installed, functools.partial) and installed.func is torch_tbb_pass, installed
# the pass Inductor would run, on the graphs Inductor's partitioner makes (so the re-gathers are recomputed in
# backward), without Inductor's code generation (torchtitan's aot_eager path of the same pass)
def compiler(gm, example_inputs):
    installed(gm.graph)
    gm.recompile()
    return gm
model = build(128, 2, 256, layers, 32, 2, "cpu", torch.float32, 1, regather=True)
x = torch.randn(1, 32, 128)
torch.compile(model, backend=aot_autograd(fw_compiler=compiler, bw_compiler=compiler,
                                                   partition_fn=min_cut_rematerialization_partition))(x).pow(2).mean().backward()
print(json.dumps({"per_block": len(PARAMS_PER_BLOCK), "passes": sink, "settings": settings}))
"""


def test_torch_tbb_buckets_each_block_per_kind_on_the_regather_step():
    """The re-gather step: backward has both kinds, every block's gathers again and its reduce-scatters."""
    pytest.importorskip("torch")
    from tests.torch.scripts import run_script

    out = json.loads(run_script(SCRIPT).stdout.strip().splitlines()[-1])
    k, layers = out["per_block"], 2
    fwd, bwd = out["passes"]
    assert fwd["blocks_seen"] == bwd["blocks_seen"] == layers
    assert fwd["collectives_before"] == k * layers and fwd["collectives_after"] == layers  # all_gathers
    # backward: every block's reduce-scatters and gathers again (at least k * (layers - 1) of them: 17 of the
    # 18 were seen), each kind then one bucket per block
    assert bwd["collectives_after"] == 2 * layers
    assert bwd["collectives_before"] >= k * layers + k * (layers - 1)
    assert "insert_overlap_deps" in fwd["kwargs"]
    assert out["settings"]["post_grad_custom_post_pass"] == "manual_overlap_bucketing"
