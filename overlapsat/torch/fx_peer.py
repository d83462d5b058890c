"""torch's own FX-level overlap scheduler as a peer row (docs/fx.md).

`overlap_scheduler_order(gm, graph)` runs torch's `schedule_overlap_bucketing`
with bucketing off (pure reordering) on the FX graph `graph` was imported
from, with overlapsat's durations as its runtime estimates (so both sides
price the graph alike), and returns the order it chose, by node name. The FX
graph is put back in its original order afterwards.

Two adjustments make it run, and compare fairly, on a CPU-only machine: its
roofline estimator needs a GPU (Triton), so the estimates are overlapsat's;
and its memory tracker ignores CPU storages, so for this run it counts every
device, as overlapsat does. The memory budget it enforces is its own rule:
the input order's peak plus the larger of 1 GiB and 5 % (`peer_budget`).
It runs on torch 2.11 (the GPU machines') as on 2.13: `on_overlapsat_terms` and `_schedule` adapt to what the
scheduler reads and takes there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from overlapsat.graph import Graph

log = logging.getLogger(__name__)


def available() -> bool:
    try:
        from torch._inductor.fx_passes import overlap_scheduling  # noqa: F401
    except Exception:  # noqa: BLE001 - older torch: no peer row
        return False
    return True


def peer_budget(graph: Graph, input_peak: int) -> int:
    """OverlapScheduler's memory rule on overlapsat's figures: baseline + max(1 GiB, 5 % of baseline).

    torch's baseline also counts the parameters (`primals_*`), which overlapsat
    leaves out of the peak as a constant (`meta["primals_bytes"]`); the 5 % is
    taken of torch's baseline.
    """
    baseline = input_peak + int(graph.meta.get("primals_bytes", 0))
    return input_peak + max(1 << 30, int(baseline * 0.05))


@contextmanager
def on_overlapsat_terms(dur_ms: dict[str, float]) -> Iterator[None]:
    """For one run of torch's scheduler: overlapsat's durations (ms) as its roofline, every device counted."""
    from torch._inductor.fx_passes import memory_estimator
    from torch._inductor.fx_passes import overlap_scheduling as osched

    class EveryDevice(memory_estimator.MemoryTracker):  # type: ignore[misc]
        def __init__(self, g: Any, is_releasable: Any = None, device_filter: Any = None) -> None:
            super().__init__(g, is_releasable, lambda device: True)

    patched: list[tuple[Any, str, Any]] = [(osched, "MemoryTracker", EveryDevice)]
    if hasattr(osched, "estimate_roofline_runtime_ms"):  # torch 2.13: compute_estimator="analytical" reads it
        patched.append((osched, "estimate_roofline_runtime_ms", lambda n: dur_ms.get(n.name, 0.0)))
    else:  # torch 2.11: every compute estimate is a benchmark, and the scheduler first all-gathers them from every
        # rank, which would hang a solve that runs on one rank; overlapsat's durations are the same on every rank
        patched.append((osched, "benchmark_node_with_cache_key", lambda n, *_: (dur_ms.get(n.name, 0.0), None)))
        patched.append((osched.OverlapScheduler, "_align_compute_nodes_runtime_estimations_across_all_distributed_ranks",
                        lambda self: None))
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patched]
    for owner, name, value in patched:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def _bucketed_estimate(osched: Any, dur_ms: dict[str, float], n: Any, size: int | None) -> float | None:
    """The bucketing scheduler's estimates: overlapsat's duration for a node as it is, torch's own for a merged
    collective's size; at 0 bytes (the latency a bucket saves) torch's, at most the collective's duration, which
    torch 2.11 asserts and later torches clamp to."""
    if size is None:
        return dur_ms.get(n.name)
    if size == 0 and n.name in dur_ms:
        return min(float(osched.estimate_collective_time(n, 0)), dur_ms[n.name])
    return None


def _schedule(gm: Any, **kwargs: Any) -> Any:
    """torch's `schedule_overlap_bucketing` with the keywords this torch takes. torch 2.11 has no
    `compute_estimator` (its compute estimates come through `on_overlapsat_terms`) and no FSDP pre-bucketing
    switch: its bucketed row then has none, and says so."""
    import inspect

    from torch._inductor.fx_passes import overlap_scheduling as osched

    takes = inspect.signature(osched.schedule_overlap_bucketing).parameters
    if kwargs.get("pre_bucketing_fsdp_collectives") and "pre_bucketing_fsdp_collectives" not in takes:
        log.info("this torch's OverlapScheduler has no FSDP pre-bucketing: its bucketed row is without it")
    return osched.schedule_overlap_bucketing(gm, **{k: v for k, v in kwargs.items() if k in takes})


@contextmanager
def _recording_merges(into: dict[str, list[str]]) -> Iterator[None]:
    """While inside: each bucket torch's bucketers merge, as {merged collective's name: the original members},
    through nested merges (an FSDP pre-bucket merged again)."""
    from torch._inductor.fx_passes import bucketing as tb

    from overlapsat.torch.fx_plan import MERGERS, is_collective

    saved = {nm: getattr(tb, nm) for nm in MERGERS.values() if hasattr(tb, nm)}

    def recording(fn: Any) -> Any:
        def merge(g: Any, nodes: list[Any], *args: Any, **kwargs: Any) -> Any:
            members = [m for n in nodes for m in into.pop(n.name, [n.name])]
            out = fn(g, nodes, *args, **kwargs)
            coll = next((n for n in out[0] if is_collective(n)), None)
            if coll is not None:
                into[coll.name] = members
            return out
        return merge

    for nm, fn in saved.items():
        setattr(tb, nm, recording(fn))
    try:
        yield
    finally:
        for nm, fn in saved.items():
            setattr(tb, nm, fn)


def _autofix_cycles() -> dict[str, bool]:
    """The config patch that lets torch's bucketer break a cycle among its own added dependencies, where the
    installed torch has the switch (it asks for it: seen on llama3_8b_L32_w256 in its bucketed scheduler and on
    L32_w64 with overlapsat's order, torch 2.13); for one run only."""
    import torch._inductor.config as icfg

    name = "overlap_scheduling_autofix_cycles"
    return {f"aten_distributed_optimizations.{name}": True} if hasattr(icfg.aten_distributed_optimizations,
                                                                        name) else {}


def bucketed(gm: Any, graph: Graph, buckets: list[list[str]] | None = None, *, collective_bucketing: bool = True,
             pre_bucketing: bool = True) -> Graph | None:
    """OverlapScheduler with bucketing on: a different graph (collectives merged), returned as a Graph in the
    order torch chose, priced as overlapsat prices nodes; None where it fails. Changes `gm`. `buckets`, a list,
    receives torch's buckets by the members' names in `graph` (a plan's buckets). `collective_bucketing=False`
    keeps only torch's FSDP pre-bucketing (`pre_bucketing`), before a scheduler that does not bucket."""
    if not available():
        return None
    merges: dict[str, list[str]] = {}
    import torch._inductor.config as icfg
    from torch._inductor.fx_passes import overlap_scheduling as osched

    from overlapsat.torch.fx import import_fx

    torch_names = graph.meta.get("process_groups", {})  # a graph the bridge renamed: torch's names back
    sizes = {torch_names.get(nd.group, nd.group): nd.group_size for nd in graph.nodes if nd.group}
    dur_ms = {nd.name: nd.duration / 1e3 for nd in graph.nodes}
    try:
        with on_overlapsat_terms(dur_ms), _recording_merges(merges), icfg.patch(_autofix_cycles()):
            # new (bucketed) collectives have no overlapsat price yet: torch's analytical model for them
            out = _schedule(
                gm, collective_bucketing=collective_bucketing, pre_bucketing_fsdp_collectives=pre_bucketing,
                compute_estimator="analytical",
                custom_runtime_estimation=lambda n, size: _bucketed_estimate(osched, dur_ms, n, size))
        h = import_fx(out, name=graph.name + " (bucketed)", group_sizes=sizes)
        if torch_names:  # the same names as `graph`'s, so that its plans and this graph compare
            h = h.with_group_names({t: s for s, t in torch_names.items()})
        if buckets is not None:
            buckets += [ms for nm, ms in merges.items() if nm in h.index and len(ms) >= 2]
        return h
    except Exception as e:  # noqa: BLE001 - no bucketed row
        log.warning("torch's bucketing failed on %s (%s: %s); no bucketed row", graph.name, type(e).__name__, e)
        return None


def overlap_preserving_buckets(gm: Any, graph: Graph, order: list[str]) -> list[list[str]] | None:
    """The buckets torch's OverlapPreservingBucketer merges on `order` (overlapsat's order of `graph`, which was
    imported from `gm`), by the members' names; None where it fails. Changes `gm`.

    The bucketer is torch's second step after its scheduler: it merges collectives whose merge keeps what hides
    them hidden. It is given the order, and each collective's hiding compute and exposure as overlapsat's
    simulator walks that order (the compute kernels that run while its transfer does, by MODEL.md).
    """
    if not available():
        return None
    from torch._inductor.fx_passes.overlap_preserving_bucketer import OverlapPreservingBucketer
    from torch._inductor.fx_passes.overlap_scheduling import CollectiveInfo
    from torch.utils._ordered_set import OrderedSet

    from overlapsat.graph import COMPUTE
    from overlapsat.simulate import simulate

    merges: dict[str, list[str]] = {}
    try:
        fx_graph = gm.graph
        by_name = {n.name: n for n in fx_graph.nodes}
        sim = simulate(graph, order)
        out_node = fx_graph.output_node()
        for nm in order:  # the FX graph in overlapsat's order (placeholders stay first)
            out_node.prepend(by_name[nm])
        pos = {nm: k for k, nm in enumerate(order)}
        stall = sim.collective_exposure()
        info: dict[Any, Any] = {}
        for c in graph.coll_seq:
            if len(graph.waits_of[c]) != 1:
                continue
            w = graph.waits_of[c][0]
            s, e = float(sim.start[c]), float(sim.end[c])
            between = order[pos[graph.names[c]] + 1:pos[graph.names[w]]]
            hiding = OrderedSet(by_name[nm] for nm in between if graph.kind[graph.index[nm]] == COMPUTE
                                and sim.start[graph.index[nm]] < e and sim.end[graph.index[nm]] > s)
            info[by_name[graph.names[c]]] = CollectiveInfo(
                start_node=by_name[graph.names[c]], wait_node=by_name[graph.names[w]],
                size_bytes=int(graph.nodes[c].nbytes), estimated_time_ms=graph.dur[c] / 1e3,
                exposed_time_ms=stall[graph.names[c]] / 1e3, hiding_nodes=hiding)
        scheduled = OrderedSet(n for n in fx_graph.nodes)
        import torch._inductor.config as icfg

        with _recording_merges(merges), icfg.patch(_autofix_cycles()):
            OverlapPreservingBucketer(fx_graph, info, scheduled, max_bucket_memory_gb=2.0,
                                      collective_bucketing=True).bucket_collectives()
    except Exception as e:  # noqa: BLE001 - no such warm start
        log.warning("torch's overlap-preserving bucketing failed on %s (%s: %s)", graph.name, type(e).__name__, e)
        return None
    return [ms for ms in merges.values() if len(ms) >= 2]


def overlap_scheduler_order(gm: Any, graph: Graph, *, max_memory_increase_gb: float | None = 1.0,
                            max_memory_increase_ratio: float | None = 0.05) -> list[str] | None:
    """The order torch's OverlapScheduler (no bucketing) gives `gm`, or None where torch has none."""
    if not available():
        return None
    import torch.fx as fx

    fx_graph = gm.graph if hasattr(gm, "graph") else gm
    module = gm if isinstance(gm, fx.GraphModule) else fx_graph.owning_module
    dur_ms = {nd.name: nd.duration / 1e3 for nd in graph.nodes}
    before = list(fx_graph.nodes)
    order: list[str] | None = None
    try:
        with on_overlapsat_terms(dur_ms):
            out = _schedule(
                module, collective_bucketing=False, pre_bucketing_fsdp_collectives=False,
                compute_estimator="analytical", custom_runtime_estimation=lambda n, _size: dur_ms.get(n.name, 0.0),
                max_memory_increase_gb=max_memory_increase_gb, max_memory_increase_ratio=max_memory_increase_ratio)
        order = [n.name for n in out.graph.nodes if n.op == "call_function"]
    except Exception as e:  # noqa: BLE001 - the peer's failure is a missing row, never ours
        log.warning("torch's OverlapScheduler failed on %s (%s: %s); no order of its own", graph.name, type(e).__name__, e)
    finally:
        out_node = fx_graph.output_node()
        for n in before:  # the graph as it came
            if n.op not in ("placeholder", "output"):
                out_node.prepend(n)
    if order is None:
        return None
    if sorted(order) != sorted(graph.names):
        log.warning("OverlapScheduler changed the graph's nodes; no order of its own")
        return None
    return order


__all__ = ["available", "bucketed", "overlap_preserving_buckets", "overlap_scheduler_order", "peer_budget"]
