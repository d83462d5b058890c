"""The one place that imports torch for the bridge, with an error a user can act on."""

from __future__ import annotations

from typing import Any

from overlapsat.errors import GraphError

MIN_TORCH = (2, 10)


def torch_module() -> Any:
    """torch, or a GraphError saying how to get a supported one (the core needs none)."""
    try:
        import torch
    except ImportError:
        raise GraphError("the torch bridge needs torch >= 2.10, which is not installed: "
                         "pip install 'overlapsat[torch]' (the rest of overlapsat works without it)") from None
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2] if p.isdigit())
    if version < MIN_TORCH:
        raise GraphError(f"the torch bridge needs torch >= 2.10; this is torch {torch.__version__}")
    return torch
