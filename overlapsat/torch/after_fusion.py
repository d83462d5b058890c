"""After Inductor's fusion: does an order solved under a memory budget still fit it? (decisions.md 21)

The FX pass applies an order before Inductor lowers and fuses the graph.
Fusion then places each fused node at its earliest member's position
(horizontal fusion reaches 64 nodes apart), which allocates a later
member's outputs early and moves its inputs up with it. A budgeted order,
packed up to its budget, can go over (benchmarks/results/gpu_runs.md, run 33 and the
CPU check after it). This pass runs where Inductor's nodes are final: for
a graph whose applied schedule was solved under a budget, it takes
Inductor's own estimate of the peak of the order it will emit and, above
the budget, logs one warning naming both. It never changes the nodes: at
this point the collectives' sequence is fixed on every rank, and a
changed order could not be agreed any more. What it does leave, for every
graph, is the memory-planning info Inductor's own buffer reuse reads
(`inform_reuse`, decisions.md 22); its estimate is read off that info.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

try:  # Inductor keys its FX graph cache on a scheduler pass's uuid(); a plain callable would bypass the cache
    from torch._inductor.custom_graph_pass import CustomSchedulerPass as _Base
except Exception:  # noqa: BLE001 - an older torch (2.11 has the slot, not the class): keyed by pickling instead
    _Base = object  # type: ignore[assignment,misc]

_PENDING = threading.local()  # the budget of the graph the FX pass just ordered, for this compile's scheduler


def expect(fingerprint: str, budget: int | None, model_peak: int | None) -> None:
    """Called by the FX pass for each graph: what the scheduler that follows in this thread should check."""
    _PENDING.value = (fingerprint, budget, model_peak) if budget else None


def _take() -> tuple[str, int, int | None] | None:
    v = getattr(_PENDING, "value", None)
    _PENDING.value = None
    return v


@contextlib.contextmanager
def planning_info_restored(nodes: list[Any]) -> Iterator[None]:
    """Inside: Inductor's memory-planning info may be assigned to `nodes` and their buffers; on leaving, each
    buffer's `mpi_buffer` and each node's `mpi_node` are put back as they were. Assigning them after fusion
    changes the frees and buffer reuse Inductor's wrapper emits (decisions.md 22; on 2 H200s the same order
    peaked at 5.41 GB without it and 5.26 GB with it, runs 33 and 37), so an estimate that must leave no trace
    restores them."""
    from torch._inductor.virtualized import V

    bufs = V.graph.scheduler.name_to_buf
    missing = object()
    saved_bufs = {name: b.__dict__.get("mpi_buffer", missing) for name, b in bufs.items()}
    saved_nodes = [(nd, nd.__dict__.get("mpi_node", missing)) for nd in nodes]
    try:
        yield
    finally:
        for name, value in saved_bufs.items():
            b = bufs.get(name)
            if b is None:
                continue
            if value is missing:
                b.__dict__.pop("mpi_buffer", None)
            else:
                b.mpi_buffer = value
        for nd, value in saved_nodes:
            if value is missing:
                nd.__dict__.pop("mpi_node", None)
            else:
                nd.mpi_node = value


def plan_memory(nodes: list[Any]) -> tuple[dict[str, Any], Any]:
    """Give the scheduler's `nodes` Inductor's memory-planning info (buffer sizes, successors), in their
    current order, as `reorder_for_peak_memory` does before it estimates; (freeable inputs, graph outputs).
    It changes what Inductor's buffer reuse does later: call it inside `planning_info_restored`, or on purpose
    (`inform_reuse`)."""
    from torch._inductor import memory
    from torch._inductor.utils import OrderedSet
    from torch._inductor.virtualized import V

    sched = V.graph.scheduler
    free_in = memory.get_freeable_input_buf(nodes, OrderedSet(V.graph.graph_inputs.keys()))
    memory.assign_memory_planning_info_for_scheduler_buffers(nodes, sched.name_to_buf)
    memory.assign_memory_planning_info_for_scheduler_nodes(nodes, sched.name_to_fused_node, sched.name_to_buf,
                                                           free_in)
    return free_in, OrderedSet(V.graph.get_output_names())


def inform_reuse(nodes: list[Any], *, peak: bool = False) -> int | None:
    """Leave Inductor's memory-planning info on `nodes`, in the order it will emit them, as its own
    `reorder_for_peak_memory` does; with `peak`, return Inductor's peak estimate from that info (through
    `memory.prepare_planning_info` where torch has it). `install_fx` turns that pass off (it would re-sort the
    order), but Inductor's wrapper decides whether to hold a freed buffer for a later one of the same size by an
    estimate built on this info (`EfficientPeakEstimate`); without it the estimate sees no intermediate buffer,
    and a freed buffer is held across the graph's peak (decisions.md 22: 145 MB on 2 H200s, run 33 against run
    37)."""
    from torch._inductor import memory
    from torch._inductor.utils import OrderedSet
    from torch._inductor.virtualized import V

    prepare = getattr(memory, "prepare_planning_info", None)
    if peak and prepare is not None:
        sched = V.graph.scheduler
        est, _ = prepare(nodes, sched.name_to_buf, sched.name_to_fused_node,
                         OrderedSet(V.graph.graph_inputs.keys()), OrderedSet(V.graph.get_output_names()))
        return int(est)
    free_in, outputs = plan_memory(nodes)  # prepare_planning_info's steps, without its estimate unless asked
    return int(memory.estimate_peak_memory(nodes, free_in, outputs)[0]) if peak else None


def inductor_peak(nodes: list[Any]) -> int:
    """Inductor's own peak estimate of `nodes` in this order (its memory planning, as reorder_for_peak_memory
    computes it), leaving the nodes' planning info as it found it."""
    with planning_info_restored(nodes):
        return int(inform_reuse(nodes, peak=True))  # type: ignore[arg-type]


class AfterFusionCheck(_Base):  # type: ignore[misc,valid-type]
    """Inductor's `_post_fusion_custom_pass`: leaves the planning info Inductor's buffer reuse reads
    (`inform_reuse`), and warns when a budgeted order's peak after fusion, estimated from that same info,
    exceeds its budget. It never changes the nodes, and it behaves the same for every graph, so its cache
    key is constant: `uuid()` where torch has `CustomSchedulerPass`; on an older torch (2.11, the GPU
    machines') Inductor pickles the config into its key, and the pickled state is that same uuid."""

    def __call__(self, nodes: list[Any]) -> list[Any]:
        pending = _take()
        try:  # one planning pass: the info stays, and a budgeted graph's estimate is read off it
            peak = inform_reuse(nodes, peak=pending is not None)
        except Exception as e:  # noqa: BLE001 - Inductor's reuse then plans as it would without it
            log.debug("overlapsat: no planning info left for Inductor's buffer reuse%s: %s: %s",
                      f", nor a peak after fusion for graph {pending[0]}" if pending else "",
                      type(e).__name__, e)
            return nodes
        if pending is not None and peak is not None:
            self._report(peak, *pending)
        return nodes

    @staticmethod
    def _report(peak: int, fp: str, budget: int, model_peak: int | None) -> None:
        import torch._inductor.config as icfg

        if peak > budget:  # no setting restores the budget here: the estimate itself is over it
            log.warning("overlapsat: graph %s was ordered within a memory budget of %d B (model peak %s B), "
                        "but after Inductor's fusion its peak is %d B by Inductor's own estimate (%+.1f %%): "
                        "fusion moved nodes; the order stands and this graph is over its budget "
                        "(docs/decisions.md 21)", fp, budget, model_peak, peak, 100 * (peak / budget - 1))
        else:
            reuse = ("; Inductor's buffer reuse is on and may hold a freed buffer across a peak that estimate cannot "
                     "see: install_fx(buffer_reuse=False) removes that cause (decisions.md 25)"
                     if getattr(icfg, "allow_buffer_reuse", False) else "")
            log.info("overlapsat: graph %s: peak after fusion %d B by Inductor's own estimate, which counts no kernel "
                     "workspace and no input held by the caller, within its budget of %d B%s", fp, peak, budget, reuse)

    def uuid(self) -> str:
        return "overlapsat-after-fusion-2"  # 2: leaves the planning info for Inductor's buffer reuse

    def __getstate__(self) -> dict[str, str]:
        return {"uuid": self.uuid()}

    def __setstate__(self, state: dict[str, str]) -> None:
        pass


def install_check() -> bool:
    """Put the check in Inductor's `_post_fusion_custom_pass`, unless torch lacks that slot or it holds someone
    else's pass (left as it is). True if the check is there."""
    import torch._inductor.config as icfg

    if not hasattr(icfg, "_post_fusion_custom_pass"):
        return False
    cur = icfg._post_fusion_custom_pass
    if isinstance(cur, AfterFusionCheck):
        return True
    if cur is not None:
        log.info("overlapsat: Inductor's _post_fusion_custom_pass is taken; budgets are not checked after fusion, "
                 "and Inductor's buffer reuse plans without memory-planning info (decisions.md 22)")
        return False
    icfg._post_fusion_custom_pass = AfterFusionCheck()
    return True


__all__ = ["AfterFusionCheck", "expect", "inductor_peak", "inform_reuse", "install_check", "plan_memory",
           "planning_info_restored"]
