"""compare(): every row re-checked against the simulator and validator."""

import pytest

from overlapsat import compare, simulate, validate
from overlapsat.examples import tp_transformer


def test_rows_match_simulator_and_exact_is_best():
    g = tp_transformer(layers=1, seed=3)
    c = compare(g, time_limit=5, memory_budget=1.2)
    assert c.rows[0].method == "input_order" and c.rows[-1].method == "exact"
    for r in c.rows:
        sim = simulate(g, r.order)
        assert r.makespan == pytest.approx(sim.makespan) and r.peak_memory == sim.peak_memory
        assert r.valid == (validate(g, r.order, c.memory_budget) == [])
    assert c.exact.valid and all(c.exact.makespan <= r.makespan + 1e-9 for r in c.rows if r.valid)
    assert c.bound <= c.exact.makespan + 1e-9
    ex = c.exact
    assert c.gap(ex) == pytest.approx(max(0.0, (ex.exposed - c.exposed_bound) / ex.exposed) if ex.exposed else 0.0)
    md = c.to_markdown()
    assert md.count("\n| ") == len(c.rows) + 1 and "lower bound" in md
    recs = c.records()
    assert [x["method"] for x in recs] == [r.method for r in c.rows]


def test_to_dataframe_optional():
    g = tp_transformer(layers=1, seed=3)
    c = compare(g, time_limit=2)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pandas"):
            c.to_dataframe()
    else:
        assert len(c.to_dataframe()) == len(c.rows)
