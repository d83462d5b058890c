"""docs/torchtitan.md's GPU figures are the raw files' (benchmarks/results/gpu_2026-11-29/titan03 for Llama3,
gpu_2026-11-30_dsv3 for DeepSeek-V3), recomputed."""

import os

from benchmarks.gpu.titan_table import best_pass, lacks, load, summary, table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-29", "titan03")
MOE = os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-30_dsv3")


def _page() -> str:
    with open(os.path.join(ROOT, "docs", "torchtitan.md"), encoding="utf-8") as f:
        return f.read()


def test_the_gpu_table_is_the_raw_file():
    assert "\n".join(table(RUN)) in _page()
    assert summary(RUN) in " ".join(_page().split())


def test_the_pages_verdict_is_the_raw_files():
    """The faster pass and the margins the prose quotes, from the medians by hand."""
    d = load(RUN)
    med = {c: v["ranks"][0]["step_ms_median"] for c, v in d["configs"].items()}
    assert best_pass(d) == "tbb_torch" and med["tbb_torch"] < med["titan_auto"]
    assert round(100 * (med["p_co"] / med["tbb_torch"] - 1), 1) == -2.5
    assert round(100 * (med["p_co_free"] / med["tbb_torch"] - 1), 1) == -3.3
    peaks = [max(r["peak_memory_bytes"] for r in v["ranks"]) for v in d["configs"].values()]
    assert max(peaks) - min(peaks) == 8192  # "within 8,192 bytes of each other"
    page = " ".join(_page().split())
    assert "the plan is 2.5 % faster (3.3 % without a budget)" in page and "within 8,192 bytes" in page


def test_the_failed_first_run_is_named():
    """titan02: torchtitan's auto_bucketing failed on torch 2.11's FLOP count of grouped-query attention."""
    row = next(r for r in table(os.path.join(os.path.dirname(RUN), "titan02")) if "titan_auto" in r)
    assert "failed" in row and "sdpa_flop_count" in row


def test_the_gpu_results_page_carries_the_same_rows():
    with open(os.path.join(ROOT, "docs", "gpu_results.md"), encoding="utf-8") as f:
        page = f.read()
    assert "\n".join(table(RUN)) in page and summary(RUN) in " ".join(page.split())


def _gpu_page() -> str:
    with open(os.path.join(ROOT, "docs", "gpu_results.md"), encoding="utf-8") as f:
        return f.read()


def test_the_moe_gpu_table_is_the_raw_file():
    assert "\n".join(table(MOE)) in _page() and "\n".join(table(MOE)) in _gpu_page()
    assert summary(MOE) in " ".join(_page().split())
    assert summary(MOE).split(". The compute floor")[0] + "." in " ".join(_gpu_page().split())


def test_the_moe_verdict_is_the_raw_files():
    """DeepSeek-V3: the plan beats every torchtitan pass that ran; the margin and the peak above the faster pass,
    by hand from the medians and the ranks' peaks; what the plan did (backward set aside, then solved again)."""
    d = load(MOE)
    med = {c: v["ranks"][0]["step_ms_median"] for c, v in d["configs"].items()}
    peak = {c: max(r["peak_memory_bytes"] for r in v["ranks"]) for c, v in d["configs"].items()}
    assert d["meta"]["args"]["titan"] == "dsv3-16B" and d["meta"]["args"]["layers"] == 4
    assert best_pass(d) == "tbb_torch" and med["p_co"] < min(med["titan_auto"], med["tbb_torch"], med["a"])
    assert round(100 * (med["p_co"] / med["tbb_torch"] - 1), 1) == -5.1
    assert peak["p_co"] - peak["tbb_torch"] == 2_608_640 and max(peak.values()) - min(peak.values()) < 5.7e6
    solved = {o["graph"]: o for o in d["configs"]["p_co"]["ranks"][0]["solved"]}
    assert solved["fx forward graph"]["buckets"] == 2 and solved["fx backward graph"]["buckets"] == 0
    rounds = load(os.path.join(MOE, "p_co_rounds"))["configs"]["p_co"]["ranks"][0]
    again = {o["graph"]: o for o in rounds["resolved"][0]}
    assert again["fx backward graph"]["outcome"] == "replaced_over_budget" and again["fx backward graph"]["buckets"] == 3
    assert round(rounds["step_ms_median"], 2) == 52.55
    page = " ".join(_page().split())
    for want in ("by 5.1 %, at a measured peak 2.6 MB (0.01 %) above its 18.175 GB", "kept 3 buckets",
                 "the step took 52.55 ms", "its forward plan (2 buckets) was applied"):
        assert want in page, want
    assert "**met**, at 2.6 MB more measured peak" in " ".join(_gpu_page().split())


def test_a_run_without_its_baselines_gets_a_message_not_a_traceback():
    """`p_co_rounds` ran the plan alone: the table names what it lacks and exits 1, with no traceback."""
    import subprocess
    import sys

    rounds = os.path.join(MOE, "p_co_rounds")
    assert lacks(load(MOE)) == [] and lacks(load(rounds)) == ["a", "titan_auto or tbb_torch"]
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gpu", "titan_table.py"), rounds],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "no table: the run lacks a and titan_auto or tbb_torch" in out.stderr and "(it ran p_co)" in out.stderr
