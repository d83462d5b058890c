"""docs/torchtitan.md's job runs as written on CPU with gloo, on two ranks: capture, one solve for both ranks,
apply on both, the eager loss, and a summary that says the schedules were applied."""

import re

import pytest

from tests.torch.scripts import doc_script, rerun_if_killed, run_torchrun_job


@pytest.mark.compile
def test_the_walkthrough_runs_as_written_on_two_gloo_ranks(tmp_path):
    pytest.importorskip("torch")
    outs = run_torchrun_job(tmp_path, doc_script("torchtitan.md", "The job"), "walkthrough.py")
    answers = [out.splitlines()[0] for out, _ in outs]
    assert answers[0] == answers[1] and answers[0].startswith("{'")  # rank 0's solve, on both ranks
    for rank, (out, err) in enumerate(outs):
        m = re.search(r"rank (\d): loss (\S+) \(eager (\S+)\), step (\S+) ms", out)
        assert m and int(m.group(1)) == rank
        assert float(m.group(2)) == pytest.approx(float(m.group(3)), rel=1e-5)
        assert re.search(r"seen by its passes.*2 applied", out)  # forward and backward
        assert "applied a schedule to an FX graph" in err and "prices graphs for the h200 profile" in err


def test_a_rank_killed_by_a_signal_reruns_once_and_any_other_failure_fails():
    """`rerun_if_killed`, which this test and `scripts.run_ranks` share: a signal asks for one rerun with a
    warning that carries the stacks; a non-zero exit, or a signal when the rerun is spent, fails naming it."""
    from types import SimpleNamespace

    ok, killed, failed = (SimpleNamespace(returncode=rc) for rc in (0, -11, 1))
    with pytest.warns(UserWarning, match="rank 1 exited -11:\nstack of rank 1"):
        assert rerun_if_killed([ok, killed], ["", "stack of rank 1"], retry=True)
    assert not rerun_if_killed([ok, ok], ["", ""], retry=True)
    with pytest.raises(AssertionError, match="rank 1 exited -11"):
        rerun_if_killed([ok, killed], ["", "stack"], retry=False)
    with pytest.raises(AssertionError, match="rank 0 exited 1"):
        rerun_if_killed([failed, ok], ["boom", ""], retry=True)
