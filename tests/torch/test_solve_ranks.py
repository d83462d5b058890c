"""Every rank runs `solve_store` (the README's lines): rank 0 solves, the others wait for it and get its
schedules, so every rank applies the same ones. Before, the second rank found the graphs locked and returned
in 0.4 s, and applied nothing."""

import pytest

from tests.torch.scripts import run_ranks


@pytest.mark.compile
@pytest.mark.parametrize("shared", [True, False], ids=["one store", "a store per rank"])
def test_every_rank_calls_solve_store_and_every_rank_applies_rank_0s_schedules(tmp_path, shared):
    pytest.importorskip("torch")
    stores = [tmp_path / "store"] * 2 if shared else [tmp_path / "store0", tmp_path / "store1"]
    for s in stores:
        s.mkdir(exist_ok=True)
    ranks = run_ranks("solve_ranks.py", "run", tmp_path, stores, tag="shared" if shared else "apart")
    from overlapsat.solver import Status

    assert ranks[0]["answer"] and set(ranks[0]["answer"].values()) <= {s.value for s in Status}
    assert ranks[1]["answer"] == ranks[0]["answer"]  # rank 0's answer, not "locked"
    if not shared:
        assert ranks[0]["locks"] and not ranks[1]["locks"]  # rank 1 solved nothing: it got rank 0's files
    assert ranks[0]["files"] and ranks[1]["files"] == ranks[0]["files"]
    assert ranks[1]["contents"] == ranks[0]["contents"]
    for r in ranks:
        assert r["matches_eager"]
        assert sorted(r["applied"]) == sorted(f.removesuffix(".schedule.json") for f in r["files"])
