"""The check after Inductor's fusion (overlapsat/torch/after_fusion.py, decisions.md 21).

A budgeted order can go over its budget once Inductor fuses the graph (benchmarks/results/gpu_runs.md, run 33). The
check must warn exactly then, by a peak an independent import of the fused nodes confirms, never change
the nodes or the code Inductor emits from them, and never touch a pass it did not install.
"""

import contextlib
import json
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


def test_pending_is_taken_once_and_only_with_a_budget_or_a_store():
    af.expect(af.Expected("fp", 100, 90))
    assert af._take() == af.Expected("fp", 100, 90) and af._take() is None
    af.expect(af.Expected("fp", None, 90))
    assert af._take() is None
    af.expect(af.Expected("fp", store="s"))  # a captured order: its peak after fusion is recorded
    assert af._take() == af.Expected("fp", store="s")
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
    import torch._inductor.custom_graph_pass as cgp

    class Theirs(getattr(cgp, "CustomSchedulerPass", object)):  # someone else's pass (torch 2.11 has no base)
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
        assert icfg._post_fusion_custom_pass.uuid() == "overlapsat-after-fusion-5"


def test_installed_and_keyed_on_a_torch_without_scheduler_pass_class(monkeypatch):
    """torch 2.11 (the GPU machines') has the `_post_fusion_custom_pass` slot but no `CustomSchedulerPass`:
    the check was not installed there, so Inductor's buffer reuse stayed blind on the GPUs (docs/gpu_results.md,
    run 39). It is installed now; that torch keys its FX graph cache by pickling the config, so the pickled
    check must be the same for every instance and name its version (a lambda there bypasses the cache)."""
    import importlib
    import pickle

    import torch._inductor.config as icfg
    import torch._inductor.custom_graph_pass as cgp

    monkeypatch.delattr(cgp, "CustomSchedulerPass", raising=False)  # already absent on torch 2.11 itself
    old = importlib.reload(af)
    try:
        assert old.AfterFusionCheck.__mro__[1] is object
        with icfg.patch(_post_fusion_custom_pass=None):
            assert old.install_check() is True and isinstance(icfg._post_fusion_custom_pass, old.AfterFusionCheck)
        one, two = pickle.dumps(old.AfterFusionCheck()), pickle.dumps(old.AfterFusionCheck())
        assert one == two and b"overlapsat-after-fusion-5" in one
        assert isinstance(pickle.loads(one), old.AfterFusionCheck)
    finally:
        monkeypatch.undo()
        importlib.reload(af)
    if hasattr(cgp, "CustomSchedulerPass"):
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
        return _budget_of(fingerprint, metrics, {}, str(tmp_path))

    save_schedule(schedule_path(str(tmp_path), fp), g, ["a", "b"], metrics={"peak_memory": 8})
    assert budget(fp) is None  # solved without a budget: nothing to check
    save_schedule(schedule_path(str(tmp_path), fp), g, ["a", "b"], metrics={"peak_memory": 8, "memory_budget": 10})
    got = budget(fp)  # (fingerprint, bytes after fusion, model peak, store, FX budget): no record, the FX budget
    assert (got.fingerprint, got.budget, got.model_peak, got.store, got.fx_budget) == (fp, 10, 8, None, 10)
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


@contextlib.contextmanager
def _applied_regather_step(plans: bool = False):
    """The small re-gather step at `free`, captured, solved under 1.5 x the captured peak (a work limit and a fixed
    worker count: the same orders on every machine) and applied: inside, (model, input) compile with the orders
    (`plans`: the plans, buckets and all) and the check after fusion, graph caches off; Inductor's peak-memory
    reordering on, its overlap reordering off."""
    import torch._inductor.config as icfg

    from benchmarks.gpu.e2e_step import build
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
        # without the fill moves (decision 96): the scenarios below need the backward plan of before it, which goes
        # over its budget after fusion by what one move fits
        solve_store(store, time_limit=300, work_limit=1, workers=2, collective_order="free", memory_budget="1.5x",
                    fill_share=0, **({"plans": "h200"} if plans else {}))
        torch._dynamo.reset()
        install_fx("apply", store, collective_order="free", pin="compute", plans=plans)
        yield model, x
        torch._dynamo.reset()


def _checked(check, nodes, budget_of) -> tuple[list, dict]:
    """Runs the check after fusion (`check`) on `nodes` with the budget `budget_of(peak)` in place of the pending
    one, and reads what it emitted independently (the harness's scheduler-level import): the budget, the peaks
    before and after, whether the order changed, and the validator's complaints on the fused graph as imported
    before the check."""
    from benchmarks.gpu.e2e_step import after_fusion
    from overlapsat import validate
    from overlapsat.torch.importer import import_snodes

    ref: list = []
    after_fusion(nodes, ref)
    budget = budget_of(ref[-1][1])
    pending = af._PENDING.value
    af._PENDING.value = af.Expected(pending.fingerprint, budget, pending.model_peak)
    with af.planning_info_restored(nodes):
        af.plan_memory(nodes)
        before = import_snodes(nodes, durations=lambda _nd: 1.0, held_gradients=True)
    out = check(nodes)
    names = [n.get_name() for n in out]
    after: list = []
    after_fusion(out, after)
    return out, {"budget": budget, "before": ref[-1][1], "after": after[-1][1],
                 "moved": names != [n.get_name() for n in nodes],
                 "valid": validate(before, names, collective_order="global")}


def test_a_budgeted_order_over_its_budget_after_fusion_is_refitted_or_warned(fake_world, caplog):
    """The re-gather step, small, at `free` under 1.5 x the captured peak (the CPU check of
    docs/gpu_results.md), with each graph's budget set below what fusion leaves, by an independent import of the
    fused nodes (overlapsat's scheduler-level importer and simulator): the forward graph's to 1 byte, which no order
    meets; the backward graph's to one byte below its peak. The check moves nodes (decision 80): what it emits is
    valid on the fused graph as imported before the moves, issues the same collective sequence, and its
    independent peak is what the check reports; the backward graph then fits (no warning), the forward graph
    cannot (one warning, naming the peak it was left at). Inductor's buffer reuse then plans by that peak, less
    the incoming gradient it does not count."""
    import torch._inductor.config as icfg
    from torch._inductor.utils import run_and_get_code


    with _applied_regather_step() as (model, x):
        assert isinstance(icfg._post_fusion_custom_pass, af.AfterFusionCheck)
        seen = []

        class Watching(af.AfterFusionCheck):
            def __call__(self, nodes):
                peak = af.fused_peak(nodes)
                budget = peak - 1 if seen else 1  # backward: one byte short; forward: out of reach
                out, rec = _checked(super().__call__, nodes, lambda _peak: budget)
                assert rec["before"] == peak  # what refit reads is the same rule's
                seen.append({**rec, "valid": rec["valid"] == [], "reuse": _reuse_estimate(out)})
                return out

        icfg._post_fusion_custom_pass = Watching()
        with caplog.at_level(logging.INFO, logger="overlapsat.torch.after_fusion"):
            run_and_get_code(lambda: torch.compile(model)(x).sum().backward())
    fwd, bwd = seen
    # Inductor's reuse estimate leaves out the incoming gradient, which autograd holds and the reading counts
    # (decision 93): one (1, 256, 512) float32 tensor, 524,288 B, in the backward graph only
    assert all(s["valid"] for s in seen), seen
    assert [s["after"] - s["reuse"] for s in seen] == [0, 256 * 512 * 4], seen
    assert bwd["moved"] and bwd["after"] <= bwd["budget"] < bwd["before"], bwd
    assert fwd["after"] > fwd["budget"] and fwd["after"] <= fwd["before"], fwd
    msgs = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "overlapsat.torch.after_fusion"]
    warned = [m for lv, m in msgs if lv == logging.WARNING]
    assert len(warned) == 1 and f"its peak is {fwd['after']} B" in warned[0] and "over its budget" in warned[0]
    fitted = [m for lv, m in msgs if lv == logging.INFO and f"fusion had put it at {bwd['before']} B" in m]
    assert len(fitted) == 1 and f"peak after fusion {bwd['after']} B" in fitted[0], msgs


def test_where_no_move_fits_the_nodes_are_sorted_memory_first_within_the_same_compile(fake_world, caplog,
                                                                                     monkeypatch):
    """The backward graph of the step above with its budget one byte below its peak after fusion, and no move
    found (`fit_budget` made to move nothing): the check emits the fused nodes in the least-peak-first sort under
    the agreed collective sequence, in this compile. Checked independently: the emitted order is valid on the
    fused graph as imported before (every dependency and the global collective sequence), its peak by the
    scheduler-level importer is within the budget, and one warning says the plan's order was given up."""
    import torch._inductor.config as icfg
    from torch._inductor.utils import run_and_get_code

    from overlapsat.heuristics import fit_budget as fb
    from overlapsat.heuristics.base import PassResult

    monkeypatch.setattr(fb, "fit_budget", lambda g, order, budget, **kw: PassResult("fit_budget", list(order),
                                                                                   {"moves": 0}, graph=g))
    with _applied_regather_step() as (model, x):
        seen = []

        class Watching(af.AfterFusionCheck):
            def __call__(self, nodes):
                if not seen:  # the forward graph: left alone
                    seen.append(None)
                    return super().__call__(nodes)
                out, rec = _checked(super().__call__, nodes, lambda peak: peak - 1)
                seen.append(rec)
                return out

        icfg._post_fusion_custom_pass = Watching()
        with caplog.at_level(logging.INFO, logger="overlapsat.torch.after_fusion"):
            run_and_get_code(lambda: torch.compile(model)(x).sum().backward())
    bwd = seen[1]
    assert bwd["moved"] and bwd["valid"] == [] and bwd["after"] <= bwd["budget"] < bwd["before"], bwd
    warned = [r.getMessage() for r in caplog.records
              if r.name == "overlapsat.torch.after_fusion" and r.levelno == logging.WARNING]
    assert len(warned) == 1 and "memory-first in the agreed collective sequence" in warned[0], warned


def test_a_moved_order_that_breaks_a_dependency_or_the_collective_sequence_is_refused(monkeypatch):
    """refit's last guard, on stand-in nodes: a node before one it depends on (by Inductor's planning info), a
    lost node, or another collective sequence, each named; a valid order passes."""
    from torch._inductor import comms

    class S:
        def __init__(self, name):
            self.name = name

        def get_name(self):
            return self.name

    a, b, c, d = (S(n) for n in "abcd")
    monkeypatch.setattr(comms, "contains_collective", lambda nd: nd.name in "bd")
    preds = {"a": [], "b": ["a"], "c": ["a"], "d": ["c"]}
    nodes = [a, b, c, d]
    assert af._refused([a, c, b, d], preds, nodes) == ""
    assert af._refused([a, c, d, b], preds, nodes) == "the collective sequence would change"
    assert af._refused([c, a, b, d], preds, nodes) == "c would run before a, which it depends on"
    assert af._refused([a, b, c], preds, nodes) == "the moved order lost or repeated a node"


def test_report_warns_above_the_budget_only(caplog):
    with caplog.at_level(logging.INFO, logger="overlapsat.torch.after_fusion"):
        af.AfterFusionCheck._report(af.Refit(100, 100, 100, 0), af.Expected("fp", 100, 90))  # at the budget: within
        af.AfterFusionCheck._report(af.Refit(103, 101, 100, 2), af.Expected("fp", 100, 90))
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
        af.AfterFusionCheck._report(af.Refit(100, 100, 100, 0), af.Expected("fp", 100, 90))
        af.AfterFusionCheck._report(af.Refit(101, 101, 100, 0, "no move lowers the peak"), af.Expected("fp", 100, 90))
    assert len(caplog.records) == 2
    within, over = (r.getMessage() for r in caplog.records)
    assert ("buffer_reuse=False" in within) is reuse and "buffer_reuse=False" not in over
    assert "this graph is over its budget" in over


def test_nothing_pending_without_a_budget():
    """An FX pass call that applies nothing leaves no budget for the check (a stale budget would be checked
    against another graph), only Inductor's own re-sorting for the graph as it came (decision 111)."""
    af.expect(af.Expected("stale", 100, 90))
    from overlapsat.torch.fx_apply import FxSchedulePass

    p = FxSchedulePass(tempfile.mkdtemp(), mode="apply")
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.ops.aten.relu.default, (x,)))
    p(g)
    left = af._take()  # no budget: only what a graph compiled as it came gets (decision 111)
    assert left is not None and (left.fingerprint, left.budget, left.store) == ("", None, None)


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


def test_the_check_records_whether_its_moves_fitted_the_plan(tmp_path, monkeypatch):
    """Decision 88: a plan over its budget after fusion is recorded over either way (solved again tighter first);
    whether the moves brought it back is recorded beside, for solve-cache to keep it where nothing tighter fits."""
    from overlapsat import store as st

    calls = []
    monkeypatch.setattr(st, "record_over", lambda *a, **k: calls.append((a, k)) or 7)
    pending = af.Expected("fp", 100, 98, store=str(tmp_path), fx_budget=120)
    assert af.AfterFusionCheck._record_over(af.Refit(103, 100, 100, 2), pending) == 7  # moved back within
    assert af.AfterFusionCheck._record_over(af.Refit(103, 103, 100, 0), pending) == 7  # not
    assert af.AfterFusionCheck._record_over(af.Refit(100, 100, 100, 0), pending) is None  # within as fused
    assert [(a[1:], k) for a, k in calls] == [(("fp", 120, 3, 100), {"moved": True}),
                                              (("fp", 120, 3, 100), {"moved": False})]


def test_a_plan_the_memory_first_order_fitted_stays_where_no_tighter_plan_is_found(tmp_path):
    """Decision 92: the check's record of a plan that the memory-first order brought within its budget (no move
    fitted it) marks it as fitted, so where `solve-cache` finds no plan under the tighter FX budget the plan stays
    (`kept_moved`), buckets and all, instead of the captured order; one still over is not marked, and the captured
    order stays there (decision 82). A kept plan that a later compile no longer fits is set aside again."""
    from overlapsat.io import load_graph
    from overlapsat.store import fused_record, record_fused_peak, solve_store, usable_stored
    from tests.test_store import make_store

    outcomes = {}
    for name in ("sorted", "over"):
        store = str(tmp_path / name)
        (fp,) = make_store(tmp_path / name, ("moe_small",))
        record_fused_peak(store, fp, 1000)
        assert [o.outcome for o in solve_store(store, time_limit=2, plans="h200")] == ["solved"]
        fx = json.loads(open(os.path.join(store, f"{fp}.schedule.json")).read())["metrics"]["memory_budget"]
        # fusion added half the FX budget: no order reaches the next one, so nothing is solved again
        before = 1000 + fx // 2
        done = af.Refit(before, 900 if name == "sorted" else before, 1000, 0, resorted=name == "sorted")
        pending = af.Expected(fp, 1000, fx, store=store, fx_budget=fx)
        assert af.AfterFusionCheck._record_over(done, pending) == fx - fx // 2
        assert fused_record(store, fp).get("moved") == ([fx] if name == "sorted" else None)
        (out,) = solve_store(store, time_limit=2, plans="h200")
        outcomes[name] = out.outcome
        g = load_graph(os.path.join(store, f"{fp}.graph.json"))
        kept = usable_stored(store, fp, g, "group", plans=True)[1]
        assert (kept == "ok") == (name == "sorted"), kept
        if name == "sorted":  # kept, fitted again by the next compile: stays; not fitted: set aside again
            assert af.AfterFusionCheck._record_over(done, pending) is None
            assert usable_stored(store, fp, g, "group", plans=True)[1] == "ok"
            over = af.Refit(before, before, 1000, 0)
            assert af.AfterFusionCheck._record_over(over, pending) == fx - fx // 2
            assert usable_stored(store, fp, g, "group", plans=True)[0] is None
            assert "kept" not in fused_record(store, fp) or fx not in fused_record(store, fp)["kept"]
            assert solve_store(store, time_limit=2, plans="h200")[0].outcome == "kept_captured"
    assert outcomes == {"sorted": "kept_moved", "over": "kept_captured"}


def test_a_plan_its_trial_lowering_finds_over_its_budget_is_not_run_by_that_compile(fake_world, caplog,
                                                                                      monkeypatch):
    """Decision 110: before a budgeted plan is applied, a copy of its graph, the plan applied as it will be (pins
    and all), is lowered and fused as Inductor will (`trial_refit`). On the backward graph, under its own budget,
    the trial refits exactly as the compile's own check then refits the real fused nodes: the same peaks, the
    same outcome (on 2026-12-02 a trial without the pins found 5 moves the check could not make, on one H200).
    Where the trial finds the plan over its budget after fusion (the forward graph, given 1
    byte), the plan is not applied in this compile: the forward graph compiles in its captured order, the check
    there has nothing to hold, and one warning says why."""
    import torch._inductor.config as icfg

    from overlapsat.torch import fx_apply

    trials, checks, applied = [], [], []
    real_trial, real_budget_of = af.trial_refit, fx_apply._budget_of

    def trial(graph, budget):
        done = real_trial(graph, budget)
        trials.append(done)
        return done

    def budget_of(fp, metrics, record, store):
        exp = real_budget_of(fp, metrics, record, store)
        return exp if exp is None or len(trials) else af.Expected(fp, 1, exp.model_peak, fx_budget=exp.fx_budget)

    monkeypatch.setattr(af, "trial_refit", trial)
    monkeypatch.setattr(fx_apply, "_budget_of", budget_of)
    with _applied_regather_step(plans=True) as (model, x):

        class Watching(af.AfterFusionCheck):
            def __call__(self, nodes):
                pending = af._PENDING.value
                if pending is not None and pending.budget:  # what the check's refit makes of the trial's budget
                    checks.append((pending, af.fused_peak(nodes), af.refit(nodes, pending.budget)[1]))
                else:
                    checks.append((None, af.fused_peak(nodes), None))
                return super().__call__(nodes)

        icfg._post_fusion_custom_pass = Watching()
        icfg.post_grad_custom_post_pass.on_apply = lambda g, order: applied.append(g.name)
        with caplog.at_level(logging.INFO):
            torch.compile(model)(x).sum().backward()
    assert len(trials) == 2 and len(checks) == 2, (trials, checks)
    fwd_trial, bwd_trial = trials
    assert fwd_trial.budget == 1 and not fwd_trial.fits
    assert checks[0][0] is None  # the forward graph compiled as captured: nothing to hold there
    pending, peak, refitted = checks[1]
    assert bwd_trial.fits and applied == ["fx backward graph"], (bwd_trial, applied)
    assert pending is not None and peak == bwd_trial.before and refitted == bwd_trial, (refitted, bwd_trial)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "decision 110" in
              r.getMessage()]
    assert len(warned) == 1 and f"peaks at {fwd_trial.after} B after fusion" in warned[0], warned


def test_the_trial_sets_a_plan_aside_as_the_check_would_and_a_failed_trial_leaves_it_to_the_check(
        tmp_path, monkeypatch, caplog):
    """Decision 110, the decision itself: a trial that fits lets the plan apply; one over its budget records the
    plan over (as the check after fusion would: the next solve tightens) and raises, naming the peak, the budget
    and the next FX budget; a trial that cannot lower the copy lets the plan apply, with one INFO line."""
    from overlapsat import GraphError
    from overlapsat import store as st
    from overlapsat.torch import fx_apply

    recorded = []
    monkeypatch.setattr(st, "record_over", lambda *a, **k: recorded.append((a[1:], k)) or 90)
    pending = af.Expected("fp", 100, 98, store=str(tmp_path), fx_budget=120)
    monkeypatch.setattr(af, "trial_refit", lambda graph, budget: af.Refit(99, 99, budget, 0))
    assert fx_apply._trial(object, pending) is None and recorded == []
    monkeypatch.setattr(af, "trial_refit", lambda graph, budget: af.Refit(103, 101, budget, 2))
    with pytest.raises(GraphError, match=r"peaks at 101 B after fusion, over its budget of 100 B .*FX budget of 90 B"):
        fx_apply._trial(object, pending)
    assert recorded == [(("fp", 120, 3, 100), {"moved": False})]

    def broken(graph, budget):
        raise RuntimeError("no lowering here")

    monkeypatch.setattr(af, "trial_refit", broken)
    with caplog.at_level(logging.INFO, logger="overlapsat.torch.fx_apply"):
        assert fx_apply._trial(object, pending) is None
    (line,) = [r for r in caplog.records if "trial lowering failed" in r.getMessage()]
    assert line.levelno == logging.INFO and "RuntimeError: no lowering here" in line.getMessage()
