"""Regenerate the bundled example graphs: `python -m overlapsat.examples.bundle`."""

from __future__ import annotations

import os

from overlapsat.examples import BUNDLED_DIR
from overlapsat.examples.models import ddp_transformer, fsdp_transformer, moe_transformer, tp_transformer
from overlapsat.io import save_graph

BUNDLE = {
    "fsdp_small": lambda: fsdp_transformer(layers=2, hidden=2048, seq=2048, world=8, seed=0),
    "tp_small": lambda: tp_transformer(layers=2, hidden=2048, seq=1024, batch=2, world=4, seed=0),
    "ddp_small": lambda: ddp_transformer(layers=4, hidden=1024, seq=1024, world=8, seed=0, bucket_mb=16),
    "moe_small": lambda: moe_transformer(layers=2, hidden=2048, seq=1024, world=8, seed=0),
    "fsdp_medium": lambda: fsdp_transformer(layers=16, hidden=4096, seq=4096, world=8, seed=1),
    "tp_large": lambda: tp_transformer(layers=32, hidden=4096, seq=2048, batch=1, world=8, seed=1),
}


def main() -> None:
    from overlapsat.cost import cost_model

    model = cost_model("h200")  # calibrated on real H200s (docs/cost_model.md)
    os.makedirs(BUNDLED_DIR, exist_ok=True)
    for name, make in BUNDLE.items():
        g = make().reprice(model)
        save_graph(g, os.path.join(BUNDLED_DIR, name + ".json"))
        print(f"{name}: {len(g)} nodes, fingerprint {g.fingerprint()}")


if __name__ == "__main__":
    main()
