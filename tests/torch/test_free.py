"""`collective_order="free"` inside torch.compile (decision 19): an order that changes the collective sequence
stands only if every rank agrees on it; otherwise every rank keeps the captured sequence, so no rank hangs."""

import os
import threading

import pytest

from tests.torch.scripts import run_ranks

# --- the exchange, with two ranks played by two threads on one store ---

def _exchange(monkeypatch, sequences, timeout_s=5.0):
    """Each rank's `agree` answer when rank r offers sequences[r] (None: rank r never takes part)."""
    torch = pytest.importorskip("torch")
    import overlapsat.torch.agree as ag

    store = torch.distributed.HashStore()
    local = threading.local()
    monkeypatch.setattr(ag, "_peers", lambda: (store, local.rank, len(sequences)))
    monkeypatch.setattr(ag, "_EXCHANGES", iter([0] * len(sequences)))  # both threads make exchange 0
    answers = {}

    def rank(r):
        local.rank = r
        answers[r] = ag.agree(sequences[r], timeout_s=timeout_s)

    threads = [threading.Thread(target=rank, args=(r,)) for r, d in enumerate(sequences) if d is not None]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def test_ranks_with_the_same_sequence_agree(monkeypatch):
    assert _exchange(monkeypatch, [["ag_1", "rs_2"], ["ag_1", "rs_2"]]) == {0: (True, ""), 1: (True, "")}


def test_ranks_with_different_sequences_both_refuse(monkeypatch):
    ans = _exchange(monkeypatch, [["ag_1", "rs_2"], ["rs_2", "ag_1"]])
    assert ans[0][0] is False and ans[1][0] is False
    assert "rank(s) 1" in ans[0][1] and "rank(s) 0" in ans[1][1]


def test_a_rank_that_never_answers_is_a_refusal_not_a_hang(monkeypatch):
    ans = _exchange(monkeypatch, [["ag_1"], None], timeout_s=0.5)
    assert ans[0][0] is False and "exchange failed" in ans[0][1]


def test_without_a_process_group_only_a_graph_without_collectives_is_agreed_and_one_rank_needs_no_one():
    """In a fresh interpreter (another test may have left a process group in this one)."""
    pytest.importorskip("torch")
    from tests.torch.scripts import run_script

    p = run_script("""
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from overlapsat.torch.agree import agree
print(agree([]))  # nothing to issue, nothing to agree on
print(agree(["all_gather_into_tensor"]))  # collectives but no process group: maybe a compile subprocess
dist.init_process_group("fake", store=FakeStore(), rank=1, world_size=4)
print(agree(["all_gather_into_tensor"]))  # the fake group: one real process stands for every rank
dist.destroy_process_group()
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
print(agree(["all_gather_into_tensor"]))  # one rank
""")
    lines = p.stdout.splitlines()
    assert lines[0] == "(True, '')" and lines[2] == lines[3] == "(True, '')", p.stdout
    assert lines[1].startswith("(False,") and "no process group" in lines[1], p.stdout


def test_the_sequence_is_the_collectives_in_node_order_without_waits():
    torch = pytest.importorskip("torch")
    from overlapsat.torch.agree import collective_sequence, sequence_digest

    ops = torch.ops._c10d_functional
    g = torch.fx.Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    a = g.call_function(ops.all_gather_into_tensor.default, (x, 2, "0"))
    b = g.call_function(ops.reduce_scatter_tensor.default, (y, "sum", 2, "0"))
    wa = g.call_function(ops.wait_tensor.default, (a,))
    wb = g.call_function(ops.wait_tensor.default, (b,))
    g.output(g.call_function(torch.ops.aten.add.Tensor, (wa, wb)))
    assert collective_sequence(g) == [a.name, b.name]
    b.prepend(a)  # unchanged: a already comes before b
    seq = collective_sequence(g)
    a.prepend(b)
    assert collective_sequence(g) == [b.name, a.name] and sequence_digest(seq) != sequence_digest(
        collective_sequence(g))


def test_free_is_taken_by_the_fx_pass_which_skips_inductors_caches(tmp_path):
    pytest.importorskip("torch")
    from overlapsat.errors import GraphError
    from overlapsat.torch import SchedulePass
    from overlapsat.torch.fx_apply import FxSchedulePass

    free = FxSchedulePass(str(tmp_path), collective_order="free")
    assert free.uuid() is None  # Inductor bypasses its FX graph and AOTAutograd caches for such a pass
    assert FxSchedulePass(str(tmp_path), collective_order="group").uuid()
    with pytest.raises(GraphError, match="FX-level pass"):  # the scheduler-node pass has no agreement
        SchedulePass(str(tmp_path), collective_order="free")
    with pytest.raises(GraphError, match="agree_timeout"):
        FxSchedulePass(str(tmp_path), collective_order="free", agree_timeout=0)


# --- two gloo processes ---

def _ranks(phase, tmp_path, stores):
    return run_ranks("free_ranks.py", phase, tmp_path, stores, tag="_" + os.path.basename(stores[1]))


def _swapped(g):
    """The captured order with the second gather (and its wait) moved before the first: one collective in
    flight at a time, as gloo needs (docs/torch.md, Known hazards), but the sequence reversed."""
    c1, c2 = (g.names[c] for c in g.coll_seq)
    w2 = g.names[g.waits_of[g.coll_seq[1]][0]]
    rest = [n for n in g.input_order if n not in (c2, w2)]
    i = rest.index(c1)
    return rest[:i] + [c2, w2] + rest[i:]


@pytest.mark.compile
@pytest.mark.slow
def test_two_ranks_apply_a_free_order_only_when_both_have_it(tmp_path):
    pytest.importorskip("torch")
    import shutil

    from overlapsat import load_graph, save_schedule
    from overlapsat.store import graph_path, recorded, schedule_path
    from overlapsat.validate import validate

    with_schedule, without = tmp_path / "store", tmp_path / "store_without"
    with_schedule.mkdir()
    cap = _ranks("capture", tmp_path, [with_schedule, with_schedule])
    assert all(c["matches_eager"] for c in cap) and cap[0]["gathers"] == cap[1]["gathers"]
    captured = cap[0]["gathers"]
    assert len(captured) == 2
    shutil.copytree(with_schedule, without)  # the same recorded graph, no schedule
    (fp,) = recorded(str(with_schedule))
    g = load_graph(graph_path(str(with_schedule), fp))
    order = _swapped(g)
    assert not validate(g, order, collective_order="free") and validate(g, order, collective_order="group")
    save_schedule(schedule_path(str(with_schedule), fp), g, order)

    both = _ranks("apply", tmp_path, [with_schedule, with_schedule])
    for r in both:  # applied on both ranks: the generated code issues the gathers in the reversed sequence
        assert r["matches_eager"] and r["gathers"] == captured[::-1] and r["warnings"] == [], r

    split = _ranks("apply", tmp_path, [with_schedule, without])  # rank 1 has no schedule: it would keep the capture
    for r in split:  # so neither applies the reversed sequence, and neither hangs
        assert r["matches_eager"] and r["gathers"] == captured, r
    assert len(split[0]["warnings"]) == 1 and "did not agree" in split[0]["warnings"][0], split[0]
    assert split[1]["warnings"] == [], split[1]  # rank 1 had nothing to withdraw


CACHE_SCRIPT = """
import os, tempfile
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()
import torch
import torch._inductor.config as icfg
from overlapsat.torch.fx_apply import FxSchedulePass
calls = []
class Counting(FxSchedulePass):
    def __call__(self, graph):
        calls.append(1)
        super().__call__(graph)
def f(x):
    return torch.relu(x @ x.T).sum(dim=0) * 2
x = torch.randn(16, 16)
for level in ("group", "free"):
    with icfg.patch(post_grad_custom_post_pass=Counting(tempfile.mkdtemp(), collective_order=level)):
        calls.clear()
        for _ in range(2):
            torch._dynamo.reset()
            torch.compile(f)(x)
        print(level, len(calls))
"""


@pytest.mark.compile
def test_under_free_every_compile_runs_the_pass_so_every_rank_takes_part():
    pytest.importorskip("torch")
    from tests.torch.scripts import run_script

    p = run_script(CACHE_SCRIPT)
    rows = dict(line.split() for line in p.stdout.strip().splitlines())
    assert rows == {"group": "1", "free": "2"}, (rows, p.stderr[-2000:])  # group: the second compile is a cache hit
