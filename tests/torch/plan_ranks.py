"""One rank of the plan test (gloo, CPU): `python plan_ranks.py PHASE RANK WORLD INIT_FILE STORE OUT`.

An FSDP-like step: three sharded weights all-gathered, used, and two results reduce-scattered. capture
records its FX graph; apply compiles it with install_fx("apply", plans=True) and writes to OUT (JSON) how
many gathers and reduce-scatters the generated code issues, whether the result matches eager, and
overlapsat's warnings, and the results exactly (hex floats), to compare with Inductor's own graph.
"""

from tests.torch.scripts import finish_rank, start_rank

phase, rank, store, out, warnings = start_rank()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._functional_collectives as funcol  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

from overlapsat.torch.fx_apply import install_fx  # noqa: E402

G = dist.group.WORLD


def step(w1, w2, w3, x):
    a = funcol.all_gather_tensor(w1, 0, G)  # each rank holds 8 rows of each 16 x 16 weight
    b = funcol.all_gather_tensor(w2, 0, G)
    h = torch.relu(x @ a.T)
    c = funcol.all_gather_tensor(w3, 0, G)
    o = torch.tanh(h @ b) @ c.T
    r = funcol.reduce_scatter_tensor(o * 2, "sum", 0, G)
    s = funcol.reduce_scatter_tensor(torch.sin(o), "sum", 0, G)
    return r, s


torch.manual_seed(rank)
args = (torch.randn(8, 16), torch.randn(8, 16), torch.randn(8, 16), torch.randn(16, 16))
ref = step(*args)
install_fx(phase, store, plans=True, agree_timeout=120)
res, codes = run_and_get_code(lambda: torch.compile(step)(*args))
calls = [ln.strip() for ln in codes[0][codes[0].find("def call("):].splitlines()
         if "_c10d_functional." in ln and not ln.strip().startswith(("assert", "#"))]
finish_rank(out, {"rank": rank, "gathers": sum("all_gather_into_tensor" in ln for ln in calls),
                  "reduce_scatters": sum("reduce_scatter_tensor" in ln for ln in calls),
                  "coalesced": sum("_coalesced" in ln for ln in calls),
                  "matches_eager": all(bool(torch.allclose(a, b, atol=1e-5)) for a, b in zip(res, ref)),
                  "values": [float.hex(v) for t in res for v in t.flatten().tolist()], "warnings": warnings})
