"""docs/torchtitan.md's graph_trainer job runs as written with torchtitan's own Llama3 and SimpleFSDP on two gloo
ranks: captured, one plan for both ranks, applied on both, bitwise equal to eager, and a summary that says so."""

import re

import pytest

from tests.torch.scripts import doc_script, run_torchrun_job


@pytest.mark.compile
@pytest.mark.slow
def test_the_graph_trainer_job_runs_as_written_on_two_gloo_ranks(tmp_path):
    pytest.importorskip("torchtitan.experiments.graph_trainer.make_fx_tracer")
    outs = run_torchrun_job(tmp_path, doc_script("torchtitan.md", "The graph_trainer job"), "titan_job.py")
    assert outs[0][0].splitlines()[0] == "['solved']", outs[0]  # rank 0's solve
    for rank, (out, err) in enumerate(outs):
        m = re.search(rf"rank {rank}: all_gathers (\d+) -> (\d+), bitwise equal to eager: (\w+), step", out)
        assert m, (out, err[-3000:])
        before, after = int(m.group(1)), int(m.group(2))
        assert m.group(3) == "True" and 0 < after <= before
        assert "graph(s) seen by its passes" in out and "recorded" in out
        assert "applied" in out, out  # the plan was applied on this rank
