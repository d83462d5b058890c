"""Memory the model can be trusted on (#50), against the allocator itself: the small re-gather step compiled on
CPU (fake process group of 2 ranks), each graph's peak as the CPU allocator records it while the profiler runs
(its own allocation events, not an estimate), beside MODEL.md's peak of the same graph. The reference is
independent of the model: a wrong buffer life, a missed allocation or a plan that grows memory shows here.

Decision 82 (2026-11-30): the captured order's peak after fusion is recorded and is what a default budget means
after fusion; a plan found over it is set aside and solved again under a tighter FX budget, as a user's next
`solve-cache` and compile do. The FX model's `inline=True` (pointwise outputs Inductor never allocates) is off by
default: with it this step's FX budget rose 5.2 %, and the coalesced plan under it allocated 29.19 MB against the
captured order's 26.89 while its fused nodes read 26.17."""

import json

import pytest

SCRIPT = """
import json, os, shutil, tempfile
from tests.torch.scripts import turn_graph_caches_off, use_kernel_cache
use_kernel_cache()
import torch
from benchmarks.gpu.probes.allocator import WORK, allocator_peaks, predicted, step
from overlapsat.store import fused_record, recorded, solve_store
from overlapsat.torch.fx_apply import install_fx

turn_graph_caches_off()
model, x = step()
store = tempfile.mkdtemp()
install_fx("capture", store, collective_order="free")
out = {"captured": allocator_peaks(torch.compile(model), model, x), "rounds": [], "records": []}
out["captured_model"] = [g["captured"]["peak_bytes"] for g in predicted(store)]
free, given = tempfile.mkdtemp(), tempfile.mkdtemp()
for fn in os.listdir(store):
    shutil.copy(os.path.join(store, fn), free)
    shutil.copy(os.path.join(store, fn), given)
for rnd in range(3):  # solve-cache, then compile: what a user's runs do until no plan is set aside
    outs = solve_store(store, time_limit=60.0, collective_order="free", workers=1, plans="h200", work_limit=WORK)
    changed = [o.outcome for o in outs if o.outcome in ("solved", "replaced_over_budget", "kept_captured")]
    if not changed:  # every schedule stands as the last compile applied it
        break
    torch._dynamo.reset()
    install_fx("apply", store, collective_order="free", plans=True)
    real = allocator_peaks(torch.compile(model), model, x)
    out["rounds"].append({"outcomes": [o.outcome for o in outs], "real": real})
    out["records"].append([fused_record(store, fp) for fp in sorted(recorded(store), key=lambda f: len(
        open(os.path.join(store, f + ".graph.json")).read()))])
    if "replaced_over_budget" not in changed and rnd:  # kept captured: nothing more to solve
        break
out["given"], out["given_records"] = [], []
for rnd in range(3):  # decision 86: a given budget (1.1x), after fusion, through the same rounds
    outs = solve_store(given, time_limit=60.0, collective_order="free", workers=1, plans="h200", work_limit=WORK,
                       memory_budget="1.1x")
    changed = [o.outcome for o in outs if o.outcome in ("solved", "replaced_over_budget", "kept_captured")]
    if not changed:
        break
    torch._dynamo.reset()
    install_fx("apply", given, collective_order="free", plans=True)
    out["given"].append(allocator_peaks(torch.compile(model), model, x))
    out["given_records"].append([fused_record(given, fp) for fp in sorted(recorded(given), key=lambda f: len(
        open(os.path.join(given, f + ".graph.json")).read()))])
    if "replaced_over_budget" not in changed and rnd:
        break
solve_store(free, time_limit=60.0, collective_order="free", workers=1, plans="h200", work_limit=WORK,
            memory_budget="none")
torch._dynamo.reset()
install_fx("apply", free, collective_order="free", plans=True)
out["plan_free"] = allocator_peaks(torch.compile(model), model, x)
gs = predicted(free)
out["plan_free_model"] = [g["solved"]["peak_bytes"] for g in gs]
out["plan_free_buckets"] = [g.get("buckets") or 0 for g in gs]
print(json.dumps(out))
"""


OUTSIDE = 1024  # bytes the eager loss (`sum`) and its gradient allocate outside the compiled graphs (8 B here)


@pytest.fixture(scope="module")
def peaks() -> dict:
    pytest.importorskip("torch")
    from tests.torch.scripts import run_script

    return json.loads(run_script(SCRIPT).stdout.strip().splitlines()[-1])


def test_the_captured_orders_peak_is_what_the_allocator_holds(peaks):
    """Forward and backward graph: MODEL.md's peak of the captured order against the allocator's, to the byte
    but for what the eager loss holds outside the graphs."""
    for model, real in zip(peaks["captured_model"], peaks["captured"]):
        assert abs(model - real) <= OUTSIDE, (model, real)


def test_the_reading_after_fusion_of_the_captured_order_is_what_the_allocator_holds(peaks):
    """Decision 93: the check after fusion reads the captured order's fused nodes as the allocator holds them, the
    backward graph's incoming gradient included (autograd holds it until the graph returns; read as freed, the
    record was 524,288 B low, and a plan under "1.1x" allocated above its budget unsaid)."""
    records = peaks["given_records"][0]
    for rec, real in zip(records, peaks["captured"]):
        assert abs(rec["captured_peak_after_fusion"] - real) <= OUTSIDE, (rec, real)


def test_plans_under_the_default_budget_end_within_the_captured_orders_peak_and_none_is_over_unsaid(peaks):
    """The promise of decision 63, measured, as decision 82 keeps it: the captured order's peak after fusion is
    recorded for each graph; a plan over it after fusion is recorded so (the next solve tightens its budget,
    `replaced_over_budget`, or keeps the captured order, `kept_captured`); and the last compile holds no more than
    the captured order did."""
    rounds, records = peaks["rounds"], peaks["records"]
    assert all(r.get("captured_peak_after_fusion") for r in records[0])
    for k, rnd in enumerate(rounds):
        for g, (plan, captured) in enumerate(zip(rnd["real"], peaks["captured"])):
            if plan > captured:  # over: said in the store, and the graph is solved again or kept as captured
                assert records[k][g].get("over"), (k, g, plan, captured, records[k][g])
                assert k + 1 < len(rounds), "the last compile is over the captured order's peak"
    for plan, captured in zip(rounds[-1]["real"], peaks["captured"]):
        assert plan <= captured, (plan, captured)


def test_the_model_reads_an_unbudgeted_plan_at_or_above_what_it_allocates(peaks):
    """The unbudgeted plan grows memory (it buckets, and moves ops Inductor then inlines): the model's peak may
    be high, never low, so a budget checked by it holds."""
    assert sum(peaks["plan_free_buckets"]) > 0  # the case with buckets is the one tested
    assert max(peaks["plan_free"]) > max(peaks["captured"])
    for real, model in zip(peaks["plan_free"], peaks["plan_free_model"]):
        assert model + OUTSIDE >= real, (model, real)


def test_a_given_budget_ends_within_its_ratio_of_the_captured_orders_peak_after_fusion(peaks):
    """Decision 86, measured: under "1.1x" the last compile allocates at most 1.1 times the captured order's peak
    after fusion (the record), not 1.1 times the FX model's; a round over it is recorded as over."""
    rounds, records = peaks["given"], peaks["given_records"]
    assert rounds and all(r.get("captured_peak_after_fusion") for r in records[0])
    for k, real in enumerate(rounds):
        for g, plan in enumerate(real):
            limit = int(records[k][g]["captured_peak_after_fusion"] * 1.1)
            if plan > limit + OUTSIDE:
                assert records[k][g].get("over"), (k, g, plan, limit, records[k][g])
                assert k + 1 < len(rounds), "the last compile is over its budget after fusion"
    for g, plan in enumerate(rounds[-1]):
        assert plan <= int(records[-1][g]["captured_peak_after_fusion"] * 1.1) + OUTSIDE, (g, plan)
