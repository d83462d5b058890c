"""One rank of the two-process test (gloo, CPU): `python two_ranks.py PHASE RANK WORLD INIT_FILE STORE OUT`.

PHASE capture: compile with install("capture"), record the graphs; PHASE apply: compile with
install("apply") and write what was applied, the order of the generated code, and whether the outputs
and gradients match eager, to OUT (JSON).
"""

import os
import re

from tests.torch.scripts import finish_rank, start_rank

phase, rank, store, out, _ = start_rank()

import torch  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

from benchmarks.models import fsdp_transformer  # noqa: E402
from overlapsat.torch import install  # noqa: E402

torch.manual_seed(0)  # the same parameters' shards on both ranks (as FSDP after init)
model = fsdp_transformer(2)
torch.manual_seed(1 + rank)  # each rank its own batch
x = torch.randn(2, 16, 64, requires_grad=True)


def step(m):
    y = m(x)
    y.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    for p in [*model.parameters(), x]:
        p.grad = None
    return y.detach(), grads


y_ref, g_ref = step(model)
p = install(phase, store, collective_order="group")
applied = []
p.on_apply = lambda g, order: applied.append({
    "graph": g.name, "order": order, "input": g.input_order,
    "producer": {b.name: b.producer for b in g.buffers if b.producer},
    "wait_of": {g.names[c]: g.names[ws[0]] for c, ws in enumerate(g.waits_of) if ws},
    "collectives": [g.names[c] for c in g.coll_seq]})
(y, grads), codes = run_and_get_code(lambda: step(torch.compile(model)))


def code_events(code, a):
    """Collectives, waits and extern kernels in the order the generated `call` issues them."""
    body = code[code.find("def call("):]
    prod, out = a["producer"], []
    for line in body.splitlines():
        if "_c10d_functional.wait_tensor" in line:
            arg = re.search(r"wait_tensor\.default\((buf\d+)", line)
            coll = prod.get(arg.group(1)) if arg else None
            if coll in a["wait_of"]:
                out.append(a["wait_of"][coll])
        elif "_c10d_functional." in line:
            m = re.match(r"\s*(buf\d+) = torch\.ops\._c10d_functional\.", line)
            if m and m.group(1) in prod:
                out.append(prod[m.group(1)])
        elif "extern_kernels." in line:
            m = re.search(r"out=(buf\d+)", line)
            if m and m.group(1) in prod:
                out.append(prod[m.group(1)])
    return out


rows = []
for a in applied:  # the code of this graph: the one whose events are all nodes of it, covering its collectives
    cands = [code_events(c, a) for c in codes]
    mine = [e for e in cands if e and set(e) <= set(a["order"]) and set(a["collectives"]) <= set(e)]
    rows.append({"graph": a["graph"], "order": a["order"], "input": a["input"], "code_events": mine})
match = bool(torch.allclose(y, y_ref, atol=1e-5)) and all(torch.allclose(u, v, atol=1e-5) for u, v in zip(grads, g_ref))
finish_rank(out, {"rank": rank, "applied": rows, "matches_eager": match, "graphs": sorted(os.listdir(store))})
