"""One phase of the torchtitan test on 2 gloo ranks (tests/torch/test_titan.py): torchtitan's Llama3 (or DeepSeek-V3)
debug model (SDPA attention, for the CPU) under its own SimpleFSDP, one training step traced by graph_trainer's make_fx
tracer, through overlapsat's graph_trainer pass in PHASE ("capture" or "apply"), then run by graph_trainer's
runner. Writes OUT.RANK (JSON): collectives left in the graph, whether the loss and gradients equal eager's
(bitwise), and overlapsat's warnings. STORE may name several stores, joined by os.pathsep: each is applied to a
trace of its own, in one process per rank (imports and the model built once), and OUT.RANK holds a row per store.

    python tests/torch/titan_ranks.py PHASE STORE OUT [llama3|dsv3]

dsv3: torchtitan's DeepSeek-V3 debug model with expert parallelism over both ranks (all_to_all dispatch and
combine), under the same SimpleFSDP.
"""

import json
import logging
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class _Caught(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _rank(rank: int, world: int, init: str, phase: str, stores: str, out: str, name: str) -> None:
    caught = _Caught()
    logging.getLogger("overlapsat").addHandler(caught)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    from torchtitan.experiments.graph_trainer.make_fx_tracer import minimal_fx_tracer, run_traced

    from benchmarks.titan_ep_overlap import local, titan_step
    from overlapsat.torch.titan import TitanPass

    built = titan_step(rank, world, name, seq=32 if name == "dsv3" else 64)
    model, step, tokens, labels = built.model, built.step, built.tokens, built.labels
    eager = [local(t) for t in step(tokens, labels)]
    rows = []
    for store in stores.split(os.pathsep):  # each store on a trace of its own: a pass changes the graph it is given
        caught.messages = []
        traced = minimal_fx_tracer(step, module=model)(tokens, labels)
        traced.gm = TitanPass(store, mode=phase, agree_timeout=120)(traced.gm, traced.example_inputs)
        got = [local(t) for t in run_traced(traced, module=model)(tokens, labels)]

        def count(op: str, gm=traced.gm) -> int:
            return sum(op in str(n.target) for n in gm.graph.nodes if n.op == "call_function")

        rows.append({"rank": rank, "gathers": count("all_gather_into_tensor"),
                     "reduce_scatters": count("reduce_scatter_tensor"), "all_to_alls": count("all_to_all"),
                     "bitwise": len(got) == len(eager) and all(torch.equal(a, b) for a, b in zip(got, eager)),
                     "warnings": caught.messages})
    with open(f"{out}.{rank}", "w", encoding="utf-8") as f:
        json.dump(rows, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    phase, store, out = sys.argv[1:4]
    name = sys.argv[4] if len(sys.argv) > 4 else "llama3"
    mp.spawn(_rank, args=(2, f"file://{tempfile.mktemp()}", phase, store, out, name), nprocs=2)
