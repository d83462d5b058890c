"""Recreate the capture corpus: real Inductor scheduler graphs from torch.compile on CPU.

    python benchmarks/corpus/make_corpus.py            # writes benchmarks/corpus/*.json.gz

Models (benchmarks/models.py), captured on the fake process group
(world size 2), forward and backward, priced with the calibrated H200 cost
model (Inductor's own estimates are 0 on CPU):

- llama8: SimpleFSDP-style Llama decoder, 8 layers (RMSNorm, RoPE, causal
  SDPA, SwiGLU), weights all-gathered per use, reduce_scatter in backward;
- llama4: the same, 4 layers;
- tpsp8: tensor + sequence parallel (DTensor), all_gather / reduce_scatter
  around attention and MLP, 8 layers;
- moe8: expert-parallel MoE with all_to_all dispatch and combine, 8 layers;
- ddp12: DDP-style data parallel, 12 linear layers, gradients all_reduced in
  buckets of 3 layers in backward;
- tpsp16, moe24, ddp48: the same models, larger (16 layers, 24 layers, 48
  layers in buckets of 4).

Each file holds the graph, torch's own pass orders on the same scheduler
nodes (`overlapsat.torch.conformance.reference_orders`) and the torch version.
"""

from __future__ import annotations

import gzip
import json
import os
import sys

import torch

from overlapsat.io import graph_to_dict
from overlapsat.torch import capture, default_durations
from overlapsat.torch.conformance import reference_orders

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the repository root
from benchmarks.models import ddp_bucketed, llama_fsdp, moe_ep, tp_sp_transformer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = {
    "llama8": lambda: (llama_fsdp(8, 256, 4, 688, 64), torch.randn(1, 64, 256, requires_grad=True)),
    "llama4": lambda: (llama_fsdp(4, 512, 8, 1376, 128), torch.randn(1, 128, 512, requires_grad=True)),
    "tpsp8": lambda: (tp_sp_transformer(8, 512, 2048), torch.randn(1, 128, 512, requires_grad=True)),
    "moe8": lambda: (moe_ep(8, 512, 1024, 2), torch.randn(1, 128, 512, requires_grad=True)),
    "ddp12": lambda: (ddp_bucketed(12, 1024, 3), torch.randn(64, 1024, requires_grad=True)),
    # the larger captures the solver targets are measured on (300 to 1,000 nodes)
    "tpsp16": lambda: (tp_sp_transformer(16, 512, 2048), torch.randn(1, 128, 512, requires_grad=True)),
    "moe24": lambda: (moe_ep(24, 512, 1024, 2), torch.randn(1, 128, 512, requires_grad=True)),
    "ddp48": lambda: (ddp_bucketed(48, 1024, 4), torch.randn(64, 1024, requires_grad=True)),
}


def main(names: list[str]) -> None:
    torch.manual_seed(0)
    for case in names or list(CASES):
        model, x = CASES[case]()
        refs: list[dict] = []
        caps = capture(model, x, name=case, durations=default_durations,
                       on_snodes=lambda sn, g, refs=refs: refs.append(reference_orders(sn, g)))
        for cap, ref in zip(caps, refs):
            path = os.path.join(HERE, f"{cap.graph.name}.json.gz")
            payload = {"graph": graph_to_dict(cap.graph), "torch": ref, "torch_version": torch.__version__}
            with gzip.open(path, "wt", encoding="utf-8") as f:
                json.dump(payload, f)
            print(path, len(cap.graph), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
