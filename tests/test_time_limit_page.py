"""docs/solver.md's time-limit tables are the raw files' figures (benchmarks/results/bench_time_limit_*.md),
recomputed here from the rows."""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAW = {"2": "bench_time_limit_2026-12-03.md", "5": "bench_time_limit_T5_2026-12-03.md"}


def table(raw: str) -> list[str]:
    with open(os.path.join(ROOT, "benchmarks", "results", raw)) as f:
        text = f.read()
    target = float(text.split("target ")[1].split(" s")[0])
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| graph") and "---" not in line]
    out = [f"| burners | call | on time (<= {target:.2f} s) | cut by the clock | slowest: wall s, graph |",
           "| ---: | --- | ---: | ---: | --- |"]
    for burners in sorted({r[3] for r in rows}, key=int):
        for call in ("optimize", "optimize_plan", "compare", "solve_store", "cli"):
            mine = [r for r in rows if r[3] == burners and r[2] == call and r[4] != "-"]
            if mine:
                slow = max(mine, key=lambda r: float(r[4]))
                out.append(f"| {burners} | {call} | {sum(float(r[4]) <= target for r in mine)} of {len(mine)} | "
                           f"{sum(r[6] == 'yes' for r in mine)} of {len(mine)} | "
                           f"{float(slow[4]):.2f}, {slow[0]} ({slow[1]} nodes) |")
    return out


@pytest.mark.parametrize("limit", sorted(RAW))
def test_the_page_quotes_the_raw_files(limit):
    with open(os.path.join(ROOT, "docs", "solver.md")) as f:
        page = f.read()
    assert "\n".join(table(RAW[limit])) in page
    assert RAW[limit] in page
