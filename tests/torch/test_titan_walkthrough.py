"""docs/torchtitan.md's graph_trainer job runs as written with torchtitan's own Llama3 and SimpleFSDP on two gloo
ranks: captured, one plan for both ranks, applied on both, bitwise equal to eager, and a summary that says so."""

import os
import re
import socket
import subprocess
import sys

import pytest

from tests.torch.scripts import rerun_if_killed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def job() -> str:
    with open(os.path.join(ROOT, "docs", "torchtitan.md"), encoding="utf-8") as f:
        text = f.read()
    return re.search(r"## The graph_trainer job\n.*?```python\n(.*?)```", text, re.S).group(1)


def run_job(tmp_path, tag: str, retry: bool = True) -> list[tuple[str, str]]:
    """The job on two gloo ranks (torchrun's environment), each rank's (stdout, stderr); a rank killed by a
    signal reruns both once (gloo's sporadic aborts with collectives in flight, docs/torch.md)."""
    work = tmp_path / f"job{tag}"
    work.mkdir()
    (work / "titan_job.py").write_text(job())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), RANK=str(rank),
                   WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, "-X", "faulthandler", "titan_job.py"], cwd=work, env=env,
                                      text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [p.communicate(timeout=600) for p in procs]
    if rerun_if_killed(procs, [err for _out, err in outs], retry):
        return run_job(tmp_path, tag + "_rerun", retry=False)
    return outs


@pytest.mark.compile
@pytest.mark.slow
def test_the_graph_trainer_job_runs_as_written_on_two_gloo_ranks(tmp_path):
    pytest.importorskip("torchtitan.experiments.graph_trainer.make_fx_tracer")
    outs = run_job(tmp_path, "")
    assert outs[0][0].splitlines()[0] == "['solved']", outs[0]  # rank 0's solve
    for rank, (out, err) in enumerate(outs):
        m = re.search(rf"rank {rank}: all_gathers (\d+) -> (\d+), bitwise equal to eager: (\w+), step", out)
        assert m, (out, err[-3000:])
        before, after = int(m.group(1)), int(m.group(2))
        assert m.group(3) == "True" and 0 < after <= before
        assert "graph(s) seen by its passes" in out and "recorded" in out
        assert "applied" in out, out  # the plan was applied on this rank
