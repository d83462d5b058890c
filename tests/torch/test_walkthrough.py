"""docs/torchtitan.md's job runs as written on CPU with gloo, on two ranks: capture, one solve for both ranks,
apply on both, the eager loss, and a summary that says the schedules were applied."""

import os
import re
import socket
import subprocess
import sys

import pytest

from tests.torch.scripts import rerun_if_killed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def walkthrough() -> str:
    with open(os.path.join(ROOT, "docs", "torchtitan.md"), encoding="utf-8") as f:
        text = f.read()
    return re.search(r"## The job\n.*?```python\n(.*?)```", text, re.S).group(1)


def run_job(tmp_path, tag: str, retry: bool = True) -> list[tuple[str, str]]:
    """The walkthrough on two gloo ranks, each rank's (stdout, stderr). As in `scripts.run_ranks`, a rank
    killed by a signal reruns both once (`scripts.rerun_if_killed`), with a warning that carries its stacks
    (docs/torch.md, "Known problems": gloo's sporadic aborts with collectives in flight; seen here, SIGSEGV,
    2026-11-27)."""
    work = tmp_path / f"job{tag}"  # a rerun starts from nothing: the job keeps its store in its folder
    work.mkdir()
    (work / "walkthrough.py").write_text(walkthrough())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), RANK=str(rank),
                   WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHINDUCTOR_CACHE_DIR=str(work / f"inductor{rank}"))
        procs.append(subprocess.Popen([sys.executable, "-X", "faulthandler", "walkthrough.py"], cwd=work,
                                      env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [p.communicate(timeout=600) for p in procs]
    if rerun_if_killed(procs, [err for _out, err in outs], retry):
        return run_job(tmp_path, tag + "_rerun", retry=False)
    return outs


@pytest.mark.compile
def test_the_walkthrough_runs_as_written_on_two_gloo_ranks(tmp_path):
    pytest.importorskip("torch")
    outs = run_job(tmp_path, "")
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
