"""Same order on every rank: two gloo processes capture, one offline solve, both apply (#11).

Checks that both ranks apply identical orders, that the code Inductor generated issues collectives,
waits and extern kernels in the solved order (read back from the generated code), and that outputs
and gradients match eager on each rank.
"""

import pytest

from tests.torch.scripts import run_ranks


def _ranks(phase, tmp_path, store, world=2):
    return run_ranks("two_ranks.py", phase, tmp_path, [store] * world)


@pytest.mark.compile
@pytest.mark.slow
def test_two_ranks_capture_solve_apply_same_order(tmp_path):
    pytest.importorskip("torch")
    from overlapsat.store import solve_store

    store = tmp_path / "store"
    store.mkdir()
    cap = _ranks("capture", tmp_path, store)
    assert all(c["matches_eager"] for c in cap)
    assert cap[0]["graphs"] == cap[1]["graphs"] and len(cap[0]["graphs"]) == 2  # one fwd, one bwd: same fingerprints
    outs = solve_store(str(store), time_limit=5)  # one offline solve for both ranks
    assert [o.outcome for o in outs] == ["solved", "solved"]
    app = _ranks("apply", tmp_path, store)
    for rank in app:
        assert rank["matches_eager"], rank["rank"]
        assert len(rank["applied"]) == 2
        for a in rank["applied"]:
            assert len(a["code_events"]) == 1, a["graph"]  # exactly one generated code is this graph's
            events = a["code_events"][0]
            assert events == [n for n in a["order"] if n in set(events)], a["graph"]  # emitted in the solved order
    assert [a["order"] for a in app[0]["applied"]] == [a["order"] for a in app[1]["applied"]]
    # the check can fail: the solved order is not Inductor's own on at least one graph
    assert any(a["code_events"][0] != [n for n in a["input"] if n in set(a["code_events"][0])]
               for a in app[0]["applied"])
