"""Memory the model can be trusted on (#50), against the allocator itself: the small re-gather step compiled on
CPU (fake process group of 2 ranks), each graph's peak as the CPU allocator records it while the profiler runs
(its own allocation events, not an estimate), beside MODEL.md's peak of the same graph. The reference is
independent of the model: a wrong buffer life, a missed allocation or a plan that grows memory shows here.

Measured on 2026-11-29 (torch 2.13 CPU; benchmarks/results/allocator_cpu_2026-11-29.md): the captured order's
peaks equal the model's to the byte (forward 23,023,616 B; backward 26,890,248 B against 26,890,240), the plan
under the default budget (work limit 0.3) allocates no more than the captured order (23.02 and 26.89 MB), and the
model reads each plan at or above what it allocates (up to +20 % for the unbudgeted plan, where Inductor inlines
what the order moved): the budget errs on the side it promises. The plan with coalesced buckets under the default
budget, and the copied plan on a work limit of 1.0, do not keep that promise (27.12 MB against 26.89 in backward;
30.20 against 23.02 in forward): known, not yet priced (docs/plans.md, "What the predicted peaks miss"), and held
below as strict expected failures."""

import json

import pytest

SCRIPT = """
import json
from tests.torch.scripts import turn_graph_caches_off, use_kernel_cache
use_kernel_cache()
from benchmarks.gpu.probes.allocator import allocator_peaks, ours, predicted, step

turn_graph_caches_off()
model, x = step()
out = {}
for key, (_name, f, where, label) in zip(("captured", "plan", "plan_free", "plan_co", "plan_w1"), ours(model)):
    out[key] = allocator_peaks(f, model, x)
    gs = predicted(where)
    out["captured_model"] = [g["captured"]["peak_bytes"] for g in gs]
    out[key + "_model"] = [g[label]["peak_bytes"] for g in gs]
    out[key + "_buckets"] = [g.get("buckets") or 0 for g in gs]
print(json.dumps(out))
"""


OUTSIDE = 1024  # bytes the eager loss (`sum`) and its gradient allocate outside the compiled graphs (8 B here)


@pytest.fixture(scope="module")
def peaks() -> dict:
    pytest.importorskip("torch")
    from tests.torch.scripts import run_script

    return json.loads(run_script(SCRIPT).stdout.strip().splitlines()[-1])


def test_the_captured_orders_peak_is_what_the_allocator_holds(peaks):
    """Forward and backward graph: MODEL.md's peak of the captured order against the allocator's."""
    for model, real in zip(peaks["captured_model"], peaks["captured"]):
        assert abs(model - real) <= 1e-3 * real, (model, real)


def test_a_plan_under_the_default_budget_allocates_no_more_than_the_captured_order(peaks):
    """The promise of decision 63, measured: the plan the user did not ask to grow, applied and compiled, never
    holds more than the order it replaces held; and the model read it at or above what it holds."""
    for plan, captured, model in zip(peaks["plan"], peaks["captured"], peaks["plan_model"]):
        assert plan <= captured and model + OUTSIDE >= plan, (plan, captured, model)


def test_the_model_reads_an_unbudgeted_plan_at_or_above_what_it_allocates(peaks):
    """The unbudgeted plan grows memory (it buckets, and moves ops Inductor then inlines): the model's peak may
    be high, never low, so a budget checked by it holds."""
    assert sum(peaks["plan_free_buckets"]) > 0  # the case with buckets is the one tested
    assert max(peaks["plan_free"]) > max(peaks["captured"])
    for real, model in zip(peaks["plan_free"], peaks["plan_free_model"]):
        assert model + OUTSIDE >= real, (model, real)


@pytest.mark.xfail(strict=True, reason="known: a coalesced plan under the default budget allocates 0.9 % above the "
                   "captured order in backward on CPU (4.5 % on the GPU, run eqshape_regather_co), where the model "
                   "reads it at the budget; not yet priced (docs/plans.md)")
def test_a_coalesced_plan_under_the_default_budget_allocates_no_more_than_the_captured_order(peaks):
    """Decision 63's promise for decision 55's layout. Strict: the day the overshoot is priced, this passes and
    the mark must go."""
    assert sum(peaks["plan_co_buckets"]) > 0
    for plan, captured in zip(peaks["plan_co"], peaks["captured"]):
        assert plan <= captured, (plan, captured)


@pytest.mark.xfail(strict=True, reason="known: on a work limit of 1.0 the default-budget plan's forward graph "
                   "allocates 30.20 MB against the captured order's 23.02, which the model reads at 23.02: Inductor "
                   "computes the buckets' copy-outs where it fuses them, holding the bucket buffer; not yet priced "
                   "(docs/plans.md; CI's clock once cut a solve to this plan)")
def test_a_plan_with_more_work_under_the_default_budget_allocates_no_more_than_the_captured_order(peaks):
    """The same promise for the plan the search reaches with more work (two buckets in forward). Strict: the
    day the model prices Inductor's copy-outs, this passes and the mark must go."""
    assert sum(peaks["plan_w1_buckets"]) > 0
    for plan, captured in zip(peaks["plan_w1"], peaks["captured"]):
        assert plan <= captured, (plan, captured)
