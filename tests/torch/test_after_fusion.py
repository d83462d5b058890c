"""The check after Inductor's fusion (overlapsat/torch/after_fusion.py, decisions.md 21).

A budgeted order can go over its budget once Inductor fuses the graph (benchmarks/results/gpu_runs.md, run 33). The
check must warn exactly then, by a peak an independent import of the fused nodes confirms, never change
the nodes or the code Inductor emits from them, and never touch a pass it did not install.
"""

import logging
import os
import tempfile

import pytest

torch = pytest.importorskip("torch")

from overlapsat import GraphBuilder  # noqa: E402
from overlapsat.schedules import save_schedule  # noqa: E402
from overlapsat.store import schedule_path  # noqa: E402
from overlapsat.torch import after_fusion as af  # noqa: E402
from overlapsat.torch.apply import stored_or_solved  # noqa: E402
from overlapsat.torch.fx_apply import _budget_of  # noqa: E402
from tests.torch.scripts import graph_caches_off, use_kernel_cache  # noqa: E402


def test_pending_is_taken_once_and_only_with_a_budget():
    af.expect("fp", 100, 90)
    assert af._take() == ("fp", 100, 90) and af._take() is None
    af.expect("fp", None, 90)
    assert af._take() is None
    assert af.AfterFusionCheck()(nodes := ["a", "b"]) is nodes  # nothing pending: the nodes as they came


def test_a_failure_to_leave_planning_info_keeps_the_compile(monkeypatch, caplog):
    """Without the info (an older torch, or Inductor's internals moved), the nodes go on as they came and the
    failure is logged at debug only: Inductor's buffer reuse then plans as it did before decision 22."""
    def broken(_nodes):
        raise AttributeError("no memory planning here")

    monkeypatch.setattr(af, "plan_memory", broken)
    with caplog.at_level(logging.DEBUG, logger="overlapsat.torch.after_fusion"):
        assert af.AfterFusionCheck()(nodes := ["a", "b"]) is nodes
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "no planning info left" in caplog.records[0].getMessage()


def test_install_leaves_a_foreign_pass_alone():
    import torch._inductor.config as icfg
    from torch._inductor.custom_graph_pass import CustomSchedulerPass

    class Theirs(CustomSchedulerPass):  # someone else's pass
        def __call__(self, nodes):
            return nodes

        def uuid(self):
            return "theirs"

    theirs = Theirs()
    with icfg.patch(_post_fusion_custom_pass=theirs):
        assert af.install_check() is False and icfg._post_fusion_custom_pass is theirs
    with icfg.patch(_post_fusion_custom_pass=None):
        assert af.install_check() is True and isinstance(icfg._post_fusion_custom_pass, af.AfterFusionCheck)
        assert af.install_check() is True  # idempotent
        assert icfg._post_fusion_custom_pass.uuid() == "overlapsat-after-fusion-2"


def test_installed_and_keyed_on_a_torch_without_scheduler_pass_class(monkeypatch):
    """torch 2.11 (the GPU machines') has the `_post_fusion_custom_pass` slot but no `CustomSchedulerPass`:
    the check was not installed there, so Inductor's buffer reuse stayed blind on the GPUs (docs/gpu_results.md,
    run 39). It is installed now; that torch keys its FX graph cache by pickling the config, so the pickled
    check must be the same for every instance and name its version (a lambda there bypasses the cache)."""
    import importlib
    import pickle

    import torch._inductor.config as icfg
    import torch._inductor.custom_graph_pass as cgp

    monkeypatch.delattr(cgp, "CustomSchedulerPass")
    old = importlib.reload(af)
    try:
        assert old.AfterFusionCheck.__mro__[1] is object
        with icfg.patch(_post_fusion_custom_pass=None):
            assert old.install_check() is True and isinstance(icfg._post_fusion_custom_pass, old.AfterFusionCheck)
        one, two = pickle.dumps(old.AfterFusionCheck()), pickle.dumps(old.AfterFusionCheck())
        assert one == two and b"overlapsat-after-fusion-2" in one
        assert isinstance(pickle.loads(one), old.AfterFusionCheck)
    finally:
        monkeypatch.undo()
        importlib.reload(af)
    assert issubclass(af.AfterFusionCheck, cgp.CustomSchedulerPass)


def test_budget_is_read_from_the_stored_schedule(tmp_path):
    b = GraphBuilder("g")
    b.compute("a", 1.0, writes={"x": 8})
    b.compute("b", 1.0, reads=["x"])
    g = b.build()
    fp = g.fingerprint()
    def budget(fingerprint):  # what the FX pass reads: the metrics that came with the stored order
        _order, _why, metrics, _ = stored_or_solved(str(tmp_path), g, fingerprint, mode="apply", time_limit=1,
                                                 collective_order="group")
        return _budget_of(fingerprint, metrics)

    save_schedule(schedule_path(str(tmp_path), fp), g, ["a", "b"], metrics={"peak_memory": 8})
    assert budget(fp) is None  # solved without a budget: nothing to check
    save_schedule(schedule_path(str(tmp_path), fp), g, ["a", "b"], metrics={"peak_memory": 8, "memory_budget": 10})
    assert budget(fp) == (fp, 10, 8)
    assert budget("missing") is None


def _reuse_estimate(nodes) -> int:
    """The peak Inductor's wrapper plans buffer reuse by (`EfficientPeakEstimate`), from the nodes as they are."""
    from torch._inductor import memory
    from torch._inductor.utils import OrderedSet
    from torch._inductor.virtualized import V

    free_in = memory.get_freeable_input_buf(nodes, OrderedSet(V.graph.graph_inputs.keys()))
    return int(memory.estimate_peak_memory(nodes, free_in, OrderedSet(V.graph.get_output_names()))[0])


def _calls(codes: list[str]) -> list[str]:
    """The wrapper's `call` of each generated module: kernels, allocations, frees and reuse, in order."""
    return [c.split("def call(", 1)[1] for c in codes if "def call(" in c]


def _without_prepare(nodes):
    """inductor_peak as it runs on a torch without memory.prepare_planning_info."""
    from torch._inductor import memory

    saved = memory.prepare_planning_info
    del memory.prepare_planning_info
    try:
        return af.inductor_peak(nodes)
    finally:
        memory.prepare_planning_info = saved


@pytest.fixture
def fake_world():
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    use_kernel_cache()  # the tests below compile with the graph caches off
    # an earlier test of this worker may have left its process group (tests/torch/test_fx.py `_world`): a fake one
    # of 2 ranks is what this test needs, anything else is replaced by one, which stays as `_world` leaves its own
    if dist.is_initialized() and (dist.get_backend() != "fake" or dist.get_world_size() != 2):
        dist.destroy_process_group()
    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    yield
    if old is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = old


def test_budgeted_free_order_over_its_budget_after_fusion_warns(fake_world, caplog):
    """The re-gather step, small, at `free` under 1.3 x the captured peak (the CPU check of
    docs/gpu_results.md). The check warns exactly where an independent import of the fused nodes
    (overlapsat's scheduler-level importer and simulator) puts the peak over the budget: the forward graph
    keeps its solved budget; the backward graph's budget is set one byte below its independent peak after
    fusion (a case the solver's outcome cannot move; the boundary itself is tested below). The nodes leave
    the check as they came."""
    import torch._inductor.config as icfg
    from torch._inductor.utils import run_and_get_code

    from benchmarks.gpu.e2e_step import after_fusion, build
    from overlapsat.store import solve_store
    from overlapsat.torch.fx_apply import install_fx

    torch.manual_seed(0)
    model = build(512, 8, 1376, 2, 256, 2, "cpu", torch.float32, 1, True)
    x = torch.randn(1, 256, 512)
    store = tempfile.mkdtemp()
    with graph_caches_off(), icfg.patch(_post_fusion_custom_pass=None, post_grad_custom_post_pass=None,
                    reorder_for_peak_memory=True, reorder_for_compute_comm_overlap=False):
        torch._dynamo.reset()
        install_fx("capture", store, collective_order="free")
        torch.compile(model)(x).sum().backward()
        # a work limit, not the clock, and a fixed worker count: the same orders on every machine
        solve_store(store, time_limit=300, work_limit=1, workers=2, collective_order="free", memory_budget="1.3x")
        torch._dynamo.reset()
        install_fx("apply", store, collective_order="free", pin="compute")
        check = icfg._post_fusion_custom_pass
        assert isinstance(check, af.AfterFusionCheck)
        seen = []  # (fingerprint pending, budget, independent peak, nodes unchanged)

        class Watching(af.AfterFusionCheck):
            def __call__(self, nodes):
                ref: list = []
                after_fusion(nodes, ref)
                pending = getattr(af._PENDING, "value", None)
                if pending is not None and seen:  # the backward graph: its budget one byte short of the peak
                    pending = af._PENDING.value = (pending[0], ref[-1][1] - 1, pending[2])
                names = [n.get_name() for n in nodes]
                by_hand = _without_prepare(nodes)  # the older-torch path of inductor_peak
                blind = _reuse_estimate(nodes)  # what Inductor's buffer reuse would plan by, left alone
                out = super().__call__(nodes)
                seen.append((pending, ref[-1][1], [n.get_name() for n in out] == names))
                assert by_hand == af.inductor_peak(nodes) == ref[-1][1]
                # after the check, Inductor's reuse plans by the real peak (decisions.md 22), not a blind one
                assert _reuse_estimate(nodes) == ref[-1][1] > blind
                return out

        icfg._post_fusion_custom_pass = Watching()
        with caplog.at_level(logging.WARNING, logger="overlapsat.torch.after_fusion"):
            _, checked = run_and_get_code(lambda: torch.compile(model)(x).sum().backward())
        torch._dynamo.reset()
        # the same order with only the planning info left for Inductor's buffer reuse: the same code, frees and
        # reuse included; the check's estimate adds nothing beyond that info (it once did, found after run 35)
        install_fx("apply", store, collective_order="free", pin="compute")
        icfg._post_fusion_custom_pass = lambda nodes: (af.inform_reuse(nodes), nodes)[1]
        _, plain = run_and_get_code(lambda: torch.compile(model)(x).sum().backward())
        torch._dynamo.reset()
    assert len(_calls(checked)) == 2 and _calls(checked) == _calls(plain)
    warned = [r.getMessage() for r in caplog.records if r.name == "overlapsat.torch.after_fusion"]
    assert len(seen) == 2 and all(p is not None and same for p, _, same in seen)  # both graphs were budgeted
    over = [p[0] for p, peak, _ in seen if peak > p[1]]
    assert over == [seen[1][0][0]], seen  # the backward graph only; the forward's solved budget holds
    assert len(warned) == 1 and over[0] in warned[0] and "+0.0 %" in warned[0], (warned, seen)
    assert all("after Inductor's fusion" in w for w in warned)


def test_report_warns_above_the_budget_only(caplog):
    with caplog.at_level(logging.INFO, logger="overlapsat.torch.after_fusion"):
        af.AfterFusionCheck._report(100, "fp", 100, 90)  # at the budget: within
        af.AfterFusionCheck._report(101, "fp", 100, 90)
    assert [r.levelno for r in caplog.records] == [logging.INFO, logging.WARNING]


@pytest.mark.parametrize("reuse", [True, False])
def test_report_names_buffer_reuse_only_while_it_is_on(caplog, reuse):
    """A budgeted graph's report within its budget points at install_fx(buffer_reuse=False) while Inductor's reuse
    is on (on 2 H200s it held a 32 MiB buffer across the peak, benchmarks/results/gpu_runs.md run 44), and not once
    it is off. Over the budget it never does: Inductor's estimate is already above it, which no reuse setting
    changes (the CPU plan of tests/torch/test_allocator.py at work 1.0 allocates what the estimate says).
    torch's config is patched through its own `patch` (pytest 9.2's monkeypatch undo deletes the setting)."""
    import torch._inductor.config as icfg

    with icfg.patch(allow_buffer_reuse=reuse), caplog.at_level(logging.INFO, logger="overlapsat.torch.after_fusion"):
        af.AfterFusionCheck._report(100, "fp", 100, 90)
        af.AfterFusionCheck._report(101, "fp", 100, 90)
    assert len(caplog.records) == 2
    within, over = (r.getMessage() for r in caplog.records)
    assert ("buffer_reuse=False" in within) is reuse and "buffer_reuse=False" not in over
    assert "this graph is over its budget" in over


def test_nothing_pending_without_a_budget():
    """An FX pass call that applies nothing leaves nothing for the check (a stale budget would be checked
    against another graph)."""
    af.expect("stale", 100, 90)
    from overlapsat.torch.fx_apply import FxSchedulePass

    p = FxSchedulePass(tempfile.mkdtemp(), mode="apply")
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.ops.aten.relu.default, (x,)))
    p(g)
    assert af._take() is None


def test_buffer_reuse_off_is_validated_and_frees_at_last_use(fake_world):
    """install_fx(buffer_reuse=False) turns Inductor's buffer reuse off: the code holds no freed buffer for a
    later one (fewer `# reuse` lines; what remains is a kernel writing over its own dead input), and by the
    generated code's own walk its peak is no higher (benchmarks/results/gpu_runs.md, run 44: the reuse gate held a
    32 MiB buffer across a workspace it cannot see). A bad value is refused before anything changes."""
    import torch._inductor.config as icfg
    from torch._inductor.utils import run_and_get_code

    from benchmarks.gpu.e2e_step import build
    from benchmarks.gpu.probes.code_memory import walk
    from overlapsat import GraphError
    from overlapsat.torch.fx_apply import install_fx

    torch.manual_seed(0)
    model = build(512, 8, 1376, 2, 256, 2, "cpu", torch.float32, 1, True)
    x = torch.randn(1, 256, 512)
    codes = {}
    with graph_caches_off(), icfg.patch(_post_fusion_custom_pass=None, post_grad_custom_post_pass=None,
                    reorder_for_peak_memory=True, reorder_for_compute_comm_overlap=False, allow_buffer_reuse=True):
        with pytest.raises(GraphError, match="buffer_reuse"):
            install_fx("capture", tempfile.mkdtemp(), buffer_reuse="no")
        assert icfg.post_grad_custom_post_pass is None and icfg.allow_buffer_reuse is True
        for reuse in (True, False):
            torch._dynamo.reset()
            install_fx("capture", tempfile.mkdtemp(), buffer_reuse=reuse)
            assert icfg.allow_buffer_reuse is reuse
            _, got = run_and_get_code(lambda: torch.compile(model)(x).sum().backward())
            codes[reuse] = _calls(got)
        torch._dynamo.reset()
    assert len(codes[True]) == len(codes[False]) == 2
    for on, off in zip(codes[True], codes[False]):
        assert off.count("# reuse") < on.count("# reuse")
        assert walk(off) <= walk(on)
