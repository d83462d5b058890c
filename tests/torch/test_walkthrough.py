"""docs/torchtitan.md's job runs as written on CPU with gloo, on two ranks: capture, one solve for both ranks,
apply on both, the eager loss, and a summary that says the schedules were applied."""

import os
import re
import socket
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def walkthrough() -> str:
    text = open(os.path.join(ROOT, "docs", "torchtitan.md"), encoding="utf-8").read()
    return re.search(r"## The job\n.*?```python\n(.*?)```", text, re.S).group(1)


@pytest.mark.compile
def test_the_walkthrough_runs_as_written_on_two_gloo_ranks(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "walkthrough.py").write_text(walkthrough())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), RANK=str(rank),
                   WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor{rank}"))
        procs.append(subprocess.Popen([sys.executable, "walkthrough.py"], cwd=tmp_path, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    answers = [out.splitlines()[0] for out, _ in outs]
    assert answers[0] == answers[1] and answers[0].startswith("{'")  # rank 0's solve, on both ranks
    for rank, (out, err) in enumerate(outs):
        m = re.search(r"rank (\d): loss (\S+) \(eager (\S+)\), step (\S+) ms", out)
        assert m and int(m.group(1)) == rank
        assert float(m.group(2)) == pytest.approx(float(m.group(3)), rel=1e-5)
        assert re.search(r"seen by its passes.*2 applied", out)  # forward and backward
        assert "applied a schedule to an FX graph" in err and "prices graphs for the h200 profile" in err
