"""One rank of the `free` agreement test (gloo, CPU): `python free_ranks.py PHASE RANK WORLD INIT_FILE STORE OUT`.

A step with two all_gathers: capture records its FX graph; apply compiles it with install_fx("apply",
collective_order="free") and writes to OUT (JSON) the order in which the generated code issues the gathers
(by the input each gathers), whether the result matches eager, and overlapsat's warnings.
"""

import re

from tests.torch.scripts import finish_rank, start_rank

phase, rank, store, out, warnings = start_rank()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._functional_collectives as funcol  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

from overlapsat.torch.fx_apply import install_fx  # noqa: E402


def step(w1, w2, x):
    a = funcol.all_gather_tensor(w1, 0, dist.group.WORLD)
    b = funcol.all_gather_tensor(w2, 0, dist.group.WORLD)
    return (torch.relu(x @ a.T) @ b).sum()


torch.manual_seed(rank)
args = (torch.randn(8, 16), torch.randn(8, 16), torch.randn(16, 16))
ref = step(*args)
install_fx(phase, store, collective_order="free", agree_timeout=120)
res, codes = run_and_get_code(lambda: torch.compile(step)(*args))


def gathered(code):
    """The inputs of the all_gathers, in the order the generated `call` issues them."""
    body = code[code.find("def call("):]
    return re.findall(r"_c10d_functional\.all_gather_into_tensor\.default\((\w+),", body)


finish_rank(out, {"rank": rank, "gathers": gathered(codes[0]), "matches_eager": bool(torch.allclose(res, ref, atol=1e-4)),
                  "warnings": warnings})
