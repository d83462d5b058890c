"""Putting a bridge pass into Inductor's config, taking it out again, and saying what it did.

Both passes (`install`, `install_fx`) change a few of Inductor's settings. `swap_config` records what each
setting held, so `uninstall()` puts exactly that back (`installed(...)` and `installed_fx(...)` do both around a
block). A post-grad pass the user had already set is chained, not replaced: it runs first, then overlapsat's, so
that overlapsat's order is the one Inductor schedules. `summary()` lists what the passes did to each graph in
this process, beside how many graphs Inductor's caches served without running any pass.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("overlapsat.torch")

try:  # a chained post-grad pass must itself be a CustomGraphPass for Inductor's cache key
    from torch._inductor.custom_graph_pass import CustomGraphPass as _Base
except Exception:  # noqa: BLE001
    _Base = object  # type: ignore[assignment,misc]

_MISSING = object()


@dataclass
class _Swap:
    """What one install set, and what each setting held before."""

    what: str
    before: dict[str, Any]
    after: dict[str, Any]


_SWAPS: list[_Swap] = []


def swap_config(what: str, changes: dict[str, Any]) -> None:
    """Set Inductor settings, remembering their earlier values for `uninstall`."""
    import torch._inductor.config as icfg

    before = {k: getattr(icfg, k, _MISSING) for k in changes}
    for k, v in changes.items():
        setattr(icfg, k, v)
    _SWAPS.append(_Swap(what, before, dict(changes)))


def user_setting(key: str) -> Any:
    """Inductor's setting `key` as the user had it before any install of this process changed it (decision 111:
    a graph compiled in the order it came gets Inductor's own passes as the user's settings have them)."""
    import torch._inductor.config as icfg

    for swap in _SWAPS:
        if key in swap.before:
            old = swap.before[key]
            return None if old is _MISSING else old
    return getattr(icfg, key, None)


def uninstall() -> bool:
    """Undo the latest `install` or `install_fx` of this process: each setting it changed gets its earlier value
    back, unless something else changed it since (that one is left, with a warning). False if none was left."""
    if not _SWAPS:
        return False
    import torch._inductor.config as icfg

    swap = _SWAPS.pop()
    for k, old in swap.before.items():
        if getattr(icfg, k, _MISSING) is not swap.after[k]:
            log.warning("overlapsat: uninstall leaves torch._inductor.config.%s as it is: it changed after %s", k,
                        swap.what)
        elif old is not _MISSING:
            setattr(icfg, k, old)
    log.info("overlapsat: %s uninstalled; Inductor's settings are as they were", swap.what)
    return True


@contextmanager
def installed_by(install: Callable[..., Any], *args: Any, **options: Any) -> Iterator[Any]:
    """`install(*args, **options)` for the block only, then `uninstall()` (for `installed` and `installed_fx`)."""
    p = install(*args, **options)
    try:
        yield p
    finally:
        uninstall()


class ChainedPass(_Base):  # type: ignore[misc,valid-type]
    """Two post-grad passes in turn: the one the user had set, then overlapsat's."""

    def __init__(self, first: Any, then: Any) -> None:
        self.first, self.then = first, then

    def __call__(self, graph: Any) -> None:
        self.first(graph)
        self.then(graph)

    def uuid(self) -> Any:
        """Both keys, or None (Inductor then skips its cache, as it does for a pass without a key)."""
        keys = [p.uuid() if callable(getattr(p, "uuid", None)) else None for p in (self.first, self.then)]
        return None if any(k is None for k in keys) else f"chain({keys[0]},{keys[1]})"


def chained(existing: Any, ours: Any) -> Any:
    """`ours`, after whatever post-grad pass was set (None: `ours` alone; an earlier pass of ours: replaced)."""
    while isinstance(existing, ChainedPass) and isinstance(existing.then, type(ours)):
        existing = existing.first  # a second install_fx replaces the first, and keeps what the user had
    if existing is None or isinstance(existing, type(ours)):
        return ours
    log.info("overlapsat: post_grad_custom_post_pass was set; it runs first, then overlapsat's pass")
    return ChainedPass(existing, ours)


def name_pricing(profile: str | None, what: str) -> None:
    """Say which GPU prices the graphs, and warn where this process sees another GPU."""
    shown = profile or "h200"
    gpu = _gpu_name()
    log.info("overlapsat: %s prices graphs for the %s profile%s", what, shown,
             f" (this process sees {gpu})" if gpu else "")
    if gpu and shown in ("h200", "h200_nvl") and "H200" not in gpu.upper():
        log.warning("overlapsat: graphs are priced for an H200 but this process runs on %s; pass profile= one of "
                    "overlapsat's profiles (h100_sxm, a100_sxm, b200, ...) or a calibration (docs/torch.md)", gpu)


def name_allocator(what: str) -> None:
    """Where this process allocates on CUDA under the caching allocator's default setting, say once that budgets
    hold to the tensor, not to the block: MODEL.md counts tensors, and the default setting may leave a large block
    unsplit (up to 1 MiB of it unused), so a plan's measured peak can pass its budget by a few MiB (3,145,728 B on
    one 10-layer TP x FSDP step, 0 B with `expandable_segments:True`, 2026-12-03; decision 129)."""
    if _gpu_name() is None or expandable_segments():
        return
    log.warning("overlapsat: %s keeps plans within memory budgets counted in tensors; under the CUDA caching "
                "allocator's default setting a block may hold up to 1 MiB more than its tensor, so the measured peak "
                "can pass a budget by a few MiB. Set PYTORCH_ALLOC_CONF=expandable_segments:True (torchtitan's "
                "launch setting) for budgets that hold to the byte (docs/torch.md)", what)


def expandable_segments() -> bool:
    """Whether the caching allocator runs with expandable segments: its settings where torch reads them back, else
    the environment it reads them from."""
    settings = ""
    try:
        import torch

        settings = torch._C._accelerator_getAllocatorSettings()
    except Exception:  # noqa: BLE001 - an older torch: the environment says it
        pass
    if not settings:
        settings = os.environ.get("PYTORCH_ALLOC_CONF") or os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or ""
    for part in settings.replace(";", ",").split(","):
        key, _, value = part.partition(":")
        if key.strip() == "expandable_segments":
            return value.strip().lower() == "true"
    return False


def _gpu_name() -> str | None:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a name is a convenience
        return None


# ---- what the passes did, in this process ----

@dataclass(frozen=True)
class Seen:
    """One graph a pass saw: which pass, the graph, and what happened to it."""

    pass_name: str
    graph: str
    fingerprint: str
    outcome: str  # applied | recorded | no schedule | kept Inductor's order
    detail: str = ""


@dataclass
class Summary:
    """What overlapsat's passes did in this process; `print(summary())` shows it."""

    seen: list[Seen] = field(default_factory=list)
    cache_hits: int = 0  # graphs Inductor's FX graph cache served: no pass ran on them
    # the installed pass's store and schedule digest (part of Inductor's cache key): what a served graph carries
    cache_store: str = ""
    cache_digest: str = ""

    def counts(self) -> Counter:
        return Counter(s.outcome for s in self.seen)

    def __str__(self) -> str:
        lines = [f"overlapsat: {len(self.seen)} graph(s) seen by its passes"
                 + "".join(f", {n} {o}" for o, n in sorted(self.counts().items()))]
        lines += [f"  {s.pass_name:<9} {s.graph:<22} {s.fingerprint[:12]}  {s.outcome}"
                  + (f" ({s.detail})" if s.detail else "") for s in self.seen]
        if self.cache_hits and self.cache_digest:
            lines.append(f"  Inductor's FX graph cache served {self.cache_hits} graph(s) without running any pass: "
                         f"each was compiled by this same pass on the schedules {self.cache_store} holds now "
                         f"(digest {self.cache_digest[:12]}, part of the cache key), so each carries the schedule "
                         "stored for its fingerprint there, or Inductor's order where none is stored")
        elif self.cache_hits:
            lines.append(f"  Inductor's FX graph cache served {self.cache_hits} graph(s) without running any pass "
                         "(their code is what the pass made when it was cached)")
        return "\n".join(lines)


_SEEN: list[Seen] = []


def note(pass_name: str, graph: str, fingerprint: str, outcome: str, detail: str = "") -> None:
    _SEEN.append(Seen(pass_name, graph, fingerprint, outcome, detail))


def summary() -> Summary:
    """Every graph overlapsat's passes saw in this process, and the FX graph cache's hits."""
    hits = 0
    try:
        from torch._dynamo.utils import counters

        hits = int(counters["inductor"].get("fxgraph_cache_hit", 0))
    except Exception:  # noqa: BLE001 - an older torch: no count
        pass
    store, digest = "", ""
    try:  # the FX pass in place: its store's digest is in the key the cache served the graphs by
        import torch._inductor.config as icfg

        from overlapsat.store import schedules_digest

        def fx_pass(x: Any) -> bool:  # by name: fx_apply imports this module
            return type(x).__name__ == "FxSchedulePass"

        p = icfg.post_grad_custom_post_pass
        while p is not None and not fx_pass(p):  # a chain of passes: overlapsat's is the last
            p = getattr(p, "then", None)
        if p is not None and p.uuid() is not None:
            store, digest = p.store, schedules_digest(p.store)
    except Exception:  # noqa: BLE001 - a description, never a failure
        pass
    return Summary(list(_SEEN), hits, store, digest)


def reset_summary() -> None:
    _SEEN.clear()


__all__ = ["ChainedPass", "Seen", "Summary", "reset_summary", "summary", "uninstall"]
