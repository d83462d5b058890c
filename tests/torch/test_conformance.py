"""The ports against torch 2.13's own passes, node for node, on captured graphs.

tests/data/captured_*.json hold graphs captured from torch.compile (FSDP-style
and tensor-parallel transformers, forward and backward) with the orders torch's
passes produced on the same scheduler nodes with the same runtime estimates
(regenerate with `python -m tests.torch.make_data`). The `compile` test
re-captures live so a torch upgrade that changes behaviour is caught.
"""

import glob
import gzip
import json
import os

import pytest

from overlapsat import simulate
from overlapsat.io import graph_from_dict
from overlapsat.torch.conformance import KNOBS, port_orders

DATA = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "data", "captured_*.json")))
PASSES = ["sink_waits", "raise_comms", "reorder_compute_for_overlap", "lpmf", "bfs", "dfs", "reorder_for_peak_memory"] + [
    f"{p}[{k}]" for p in ("reorder_iterative", "sink_waits_iterative") for k in KNOBS]


CORPUS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "corpus", "*.json.gz")))


KNOWN_DIVERGENCES: dict[str, set[str]] = {}  # none: the Llama backward graphs matched once the ports used torch's
# pre-fusion ancestors (decision 16)


def load(path):
    with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path)) as f:
        d = json.load(f)
    return graph_from_dict(d["graph"]), d["torch"]


def test_enough_captured_graphs():
    names = [os.path.basename(p) for p in DATA]
    assert len(DATA) >= 5
    assert any("fsdp" in n and "fwd" in n for n in names) and any("fsdp" in n and "bwd" in n for n in names)
    assert any("tp" in n and "fwd" in n for n in names) and any("tp" in n and "bwd" in n for n in names)


@pytest.mark.parametrize("path", DATA + CORPUS, ids=[os.path.basename(p).split(".")[0] for p in DATA + CORPUS])
def test_ports_match_torch(path):
    g, ref = load(path)
    mine = port_orders(g)
    name = os.path.basename(path).split(".")[0]
    differ = {p for p in PASSES if mine[p] != ref[p]}
    # listed exactly, so a fix (or a new divergence) fails this test
    assert differ == KNOWN_DIVERGENCES.get(name, set()), f"ports differ from torch on {name}: {sorted(differ)}"


@pytest.mark.parametrize("path", DATA, ids=[os.path.basename(p)[9:-5] for p in DATA])
def test_peak_memory_matches_torch(path):
    g, ref = load(path)
    assert simulate(g).peak_memory == ref["peak_memory"]


def test_passes_actually_reorder():
    # the comparison is only meaningful if the passes move things on these graphs
    moved = set()
    for path in DATA:
        g, ref = load(path)
        moved |= {k for k in PASSES if ref[k] != g.input_order}
    assert {"sink_waits", "raise_comms", "reorder_compute_for_overlap", "reorder_iterative[default]",
            "sink_waits_iterative[default]", "reorder_iterative[runtime]", "bfs"} <= moved


@pytest.mark.compile
@pytest.mark.slow
def test_live_capture_matches_torch():
    torch = pytest.importorskip("torch")
    from benchmarks.models import fsdp_transformer
    from overlapsat.torch import capture
    from overlapsat.torch.conformance import reference_orders
    from tests.torch.make_data import seeded_duration

    torch.manual_seed(1)
    refs = []
    caps = capture(fsdp_transformer(2), torch.randn(2, 8, 64, requires_grad=True), name="live",
                   durations=seeded_duration, on_snodes=lambda sn, g: refs.append(reference_orders(sn, g)))
    assert [c.graph.name for c in caps] == ["live_fwd", "live_bwd"]
    for cap, ref in zip(caps, refs):
        mine = port_orders(cap.graph)
        assert {k: mine[k] for k in PASSES} == {k: ref[k] for k in PASSES}
        assert simulate(cap.graph).peak_memory == ref["peak_memory"]


@pytest.mark.compile
def test_all_reduce_gets_its_group_size_from_the_group_name():
    """all_reduce has no size argument: the importer once read group size 1 and priced it at 0 us."""
    torch = pytest.importorskip("torch")
    from benchmarks.models import ddp_bucketed
    from overlapsat.torch import capture, default_durations

    torch.manual_seed(0)
    caps = capture(ddp_bucketed(2, 64, 1), torch.randn(8, 64, requires_grad=True), name="ar",
                   durations=default_durations)
    bwd = caps[-1].graph
    reduces = [bwd.nodes[c] for c in bwd.coll_seq if bwd.nodes[c].op == "all_reduce"]
    assert reduces and all(nd.group_size == 2 and nd.duration > 0 for nd in reduces)


@pytest.mark.compile
@pytest.mark.slow
def test_ports_match_torch_on_its_own_estimates():
    """Priced by Inductor's estimates (profile "inductor"), the ports decide on the raw ns values, as torch does;
    the estimates here are multiples of 100 ns, where us conversions tie and flip (decision 16)."""
    torch = pytest.importorskip("torch")
    import zlib

    import torch._inductor.config as icfg

    from benchmarks.models import fsdp_transformer
    from overlapsat.torch import capture
    from overlapsat.torch.conformance import reference_orders
    from overlapsat.torch.importer import INDUCTOR

    def estimate(snode):
        return 100.0 * (1 + zlib.crc32(snode.get_name().encode()) % 30)

    torch.manual_seed(1)
    refs = []
    with icfg.patch(estimate_op_runtime=estimate):
        caps = capture(fsdp_transformer(2), torch.randn(2, 8, 64, requires_grad=True), name="est",
                       durations=INDUCTOR, on_snodes=lambda sn, g: refs.append(reference_orders(sn, g)))
    for cap, ref in zip(caps, refs):
        g = cap.graph
        assert all(nd.estimate is not None for nd in g.nodes) and g.port_dur != g.dur
        mine = port_orders(g)
        assert {k: mine[k] for k in PASSES} == {k: ref[k] for k in PASSES}


@pytest.mark.compile
def test_tensor_parallel_double_wait_is_a_second_wait_of_its_collective():
    """Tensor parallelism's all_reduce waits twice on one result (the functional collective's own wait, then
    `wait_tensor` on the waited tensor). The scheduler-level importer refused the graph ("wait names no
    collective"), so the pass kept Inductor's order (found by the 2-H200 run 41's after-fusion check). The
    second wait is now another wait of the same collective (decisions.md 24); the ports still match torch's
    passes node for node on it."""
    torch = pytest.importorskip("torch")
    from benchmarks.gpu.e2e_step import build
    from overlapsat.torch import capture
    from overlapsat.torch.capture import ensure_fake_process_group
    from overlapsat.torch.conformance import reference_orders
    from tests.torch.make_data import seeded_duration

    ensure_fake_process_group(2)
    torch.manual_seed(0)
    out = build(64, 2, 128, 1, 16, 2, "cpu", torch.float32, 2, False)
    model = out[0] if isinstance(out, tuple) else out
    refs = []
    caps = capture(model, torch.randn(1, 16, 64), name="tp", durations=seeded_duration,
                   on_snodes=lambda sn, g: refs.append(reference_orders(sn, g)))
    assert len(caps) == 2 and len(refs) == 2
    for cap, ref in zip(caps, refs):
        g = cap.graph
        waits: dict[str, list[str]] = {}
        for nd in g.nodes:
            if nd.kind.name == "WAIT":
                waits.setdefault(nd.collective, []).append(nd.name)
        assert g.coll_seq and sorted(map(len, waits.values())) == [2] * len(g.coll_seq)  # every all_reduce twice
        mine = port_orders(g)
        assert {k: mine[k] for k in PASSES} == {k: ref[k] for k in PASSES}
        assert simulate(g).peak_memory == ref["peak_memory"]


@pytest.mark.compile
def test_scheduler_node_collectives_carry_torchs_bucket_key():
    """The scheduler-node importer records what torch's bucketers key on beyond the group (dtype; reduce op for
    reductions), written as the FX importer writes it: a float32 SimpleFSDP step's gathers are "float32" and
    its gradients' reduce-scatters (all_gather_tensor_autograd's backward, a sum) "sum,float32"."""
    torch = pytest.importorskip("torch")
    from benchmarks.models import fsdp_transformer
    from overlapsat.torch import capture, default_durations

    torch.manual_seed(1)
    caps = capture(fsdp_transformer(2), torch.randn(2, 8, 64, requires_grad=True), name="keys",
                   durations=default_durations)
    keys = {(nd.op, nd.bucket_key) for cap in caps for nd in cap.graph.nodes if nd.op in ("all_gather",
                                                                                            "reduce_scatter")}
    assert keys == {("all_gather", "float32"), ("reduce_scatter", "sum,float32")}, keys
