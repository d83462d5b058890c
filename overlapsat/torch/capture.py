"""Capture Inductor scheduler graphs from torch.compile on a CPU-only machine.

Uses the fake process group so functional collectives compile without GPUs
or peers. Caches are disabled (a cache hit would skip the reorder hook) and
Inductor's cache directory is a temporary folder that is removed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.graph import Graph
from overlapsat.torch.importer import DurationFn, import_snodes
from overlapsat.torch.need import torch_module

SnodeHook = Callable[[list[Any], Graph], None]


@dataclass
class Captured:
    """One compiled graph (forward or backward) and anything a hook recorded."""

    graph: Graph
    extra: dict[str, Any] = field(default_factory=dict)


def ensure_fake_process_group(world_size: int = 2, rank: int = 0) -> None:
    torch_module()
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        if dist.get_world_size() != world_size:
            raise GraphError(f"a process group of size {dist.get_world_size()} is already initialised; "
                             f"cannot capture with world size {world_size}")
        return
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)


@contextlib.contextmanager
def _inductor_capture(hook: Callable[[list[Any]], list[Any]]) -> Iterator[None]:
    torch = torch_module()
    import torch._inductor.config as icfg

    tmp = tempfile.mkdtemp(prefix="overlapsat-inductor-")
    old_env = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tmp
    try:
        with icfg.patch(force_disable_caches=True, reorder_for_compute_comm_overlap=True,
                        reorder_for_compute_comm_overlap_passes=[hook]):
            torch._dynamo.reset()
            yield
    finally:
        torch._dynamo.reset()
        if old_env is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = old_env
        shutil.rmtree(tmp, ignore_errors=True)


def capture(fn: Callable[..., Any], *args: Any, backward: bool = True, name: str = "captured",
            durations: DurationFn | None = None, on_snodes: SnodeHook | None = None,
            world_size: int = 2) -> list[Captured]:
    """Compile `fn(*args)` (and its backward on `.sum()` of the output) and return each graph.

    `on_snodes(snodes, graph)` runs inside Inductor with the live scheduler
    nodes, e.g. to run torch's own passes for comparison.
    """
    torch = torch_module()

    ensure_fake_process_group(world_size)
    out: list[Captured] = []

    def hook(snodes: list[Any]) -> list[Any]:
        tag = "fwd" if not out else "bwd"
        g = import_snodes(snodes, name=f"{name}_{tag}", durations=durations)
        cap = Captured(g)
        out.append(cap)
        if on_snodes is not None:
            on_snodes(list(snodes), g)
        return snodes

    with _inductor_capture(hook):
        compiled = torch.compile(fn)
        y = compiled(*args)
        if backward:
            y = y[0] if isinstance(y, (tuple, list)) else y
            y.sum().backward()
    if not out:
        raise GraphError("torch.compile produced no Inductor graph with a reorder pass (nothing was captured)")
    return out
