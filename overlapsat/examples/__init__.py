"""Deterministic synthetic graphs and the bundled example files."""

from __future__ import annotations

import os

from overlapsat.examples.models import (
    GENERATORS,
    Shape,
    ddp_transformer,
    fsdp_transformer,
    generate,
    moe_transformer,
    tp_transformer,
)

BUNDLED_DIR = os.path.join(os.path.dirname(__file__), "data")


def bundled(name: str = "tp_small") -> str:
    """Path of a bundled example graph (shipped inside the package)."""
    path = os.path.join(BUNDLED_DIR, name if name.endswith(".json") else name + ".json")
    if not os.path.exists(path):
        have = sorted(f[:-5] for f in os.listdir(BUNDLED_DIR) if f.endswith(".json"))
        from overlapsat.errors import GraphError

        raise GraphError(f"no bundled example {name!r}; available: {', '.join(have)}")
    return path


__all__ = ["GENERATORS", "Shape", "bundled", "ddp_transformer", "fsdp_transformer", "generate",
           "moe_transformer", "tp_transformer", "BUNDLED_DIR"]
