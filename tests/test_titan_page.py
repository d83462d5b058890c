"""docs/torchtitan.md's GPU figures are the raw files' (benchmarks/results/gpu_2026-11-29/titan03), recomputed."""

import os

from benchmarks.gpu.titan_table import best_pass, load, summary, table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-29", "titan03")


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
