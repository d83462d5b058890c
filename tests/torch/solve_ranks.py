"""One rank of the rank-aware solve test (gloo, CPU): `python solve_ranks.py PHASE RANK WORLD INIT_FILE STORE OUT`.

Every rank runs the README's lines: capture, `overlapsat.torch.solve_store`, apply. OUT gets what solve_store
returned on this rank, the schedule files this rank's store holds, and what the passes applied."""

import os

from tests.torch.scripts import finish_rank, start_rank

phase, rank, store, out, _ = start_rank()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._functional_collectives as funcol  # noqa: E402

from overlapsat.torch import install, solve_store, summary, uninstall  # noqa: E402


def step(w, x):
    full = funcol.all_gather_tensor(w, 0, dist.group.WORLD)
    return torch.relu(x @ full.T).sum() + torch.tanh(x).sum()


torch.manual_seed(0)
w, x = torch.randn(8, 16), torch.randn(4, 16)
install("capture", store)
torch.compile(step)(w, x)
uninstall()
answer = solve_store(store, time_limit=10)
install("apply", store)
torch._dynamo.reset()
y = torch.compile(step)(w, x)
ref = step(w, x)
files = sorted(n for n in os.listdir(store) if n.endswith(".schedule.json"))
locks = sorted(n for n in os.listdir(store) if n.endswith(".lock"))  # left by a solve in this store
finish_rank(out, {"rank": rank, "answer": answer, "files": files, "locks": locks,
                  "contents": [open(os.path.join(store, n)).read() for n in files],
                  "applied": [s.fingerprint for s in summary().seen if s.outcome == "applied"],
                  "matches_eager": bool(torch.allclose(y, ref))})
