"""Capture the committed test graphs and torch's reference orders.

    python -m tests.torch.make_data            # writes tests/data/captured_*.json

Each file holds an imported graph (durations: seeded pseudo-random per node,
so that runtime-estimation knobs have work to do) and the orders torch 2.13's
own passes produce on the same scheduler nodes with the same durations.
"""

from __future__ import annotations

import hashlib
import json
import os

import torch

from benchmarks.models import fsdp_transformer, tp_transformer
from overlapsat.graph import Node, NodeKind
from overlapsat.io import graph_to_dict
from overlapsat.torch import capture
from overlapsat.torch.conformance import reference_orders

HERE = os.path.join(os.path.dirname(__file__), "..", "data")


def seeded_duration(node: Node) -> float:
    """Deterministic pseudo-random durations: compute 2-60 us, collectives 10-150 us."""
    h = int(hashlib.sha256(node.name.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    if node.kind is NodeKind.COLLECTIVE:
        return round(10 + 140 * h, 3)
    return 0.0 if node.kind is NodeKind.WAIT else round(2 + 58 * h, 3)


CASES = {
    "fsdp2": lambda: (fsdp_transformer(2), torch.randn(2, 16, 64, requires_grad=True)),
    "fsdp3": lambda: (fsdp_transformer(3), torch.randn(2, 8, 64, requires_grad=True)),
    "tp2": lambda: (tp_transformer(2), torch.randn(2, 16, 64, requires_grad=True)),
    "tp4": lambda: (tp_transformer(4), torch.randn(2, 8, 64, requires_grad=True)),
}


def main() -> None:
    torch.manual_seed(0)
    for case, make in CASES.items():
        model, x = make()
        refs: list[dict] = []
        caps = capture(model, x, name=case, durations=seeded_duration,
                       on_snodes=lambda sn, g, refs=refs: refs.append(reference_orders(sn, g)))
        for cap, ref in zip(caps, refs):
            path = os.path.join(HERE, f"captured_{cap.graph.name}.json")
            with open(path, "w") as f:
                json.dump({"graph": graph_to_dict(cap.graph), "torch": ref, "torch_version": torch.__version__}, f)
            print(path, len(cap.graph))


if __name__ == "__main__":
    main()
