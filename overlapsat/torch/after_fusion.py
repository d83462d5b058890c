"""After Inductor's fusion: an order solved under a memory budget is kept within it (decisions.md 21, 80).

The FX pass applies an order before Inductor lowers and fuses the graph.
Lowering computes a bucket's copy-outs where their readers need them, and
fusion places each fused node at its earliest member's position (horizontal
fusion reaches 64 nodes apart): a buffer can live longer than the FX order
had it, and a budgeted order, packed up to its budget, can go over
(benchmarks/results/gpu_runs.md, run 33; tests/torch/test_allocator.py).
This pass runs where Inductor's nodes are final. For a graph whose applied
schedule was solved under a budget it reads the peak of the order Inductor
will emit by MODEL.md's rule (`fused_peak`; Inductor's own estimate read
a captured GPU backward graph at 2.00 GB, below the 2.68 GB of saved inputs
it holds from its start, on 2026-11-30), and
above the budget moves nodes until it fits (`refit`: overlapsat's
`fit_budget` on the fused nodes). The moves keep every dependency
Inductor's own memory reordering keeps and the whole collective sequence,
so the ranks, which agreed on that sequence before lowering, still issue
the same one. Where no moves fit the budget, the nodes are sorted
least-peak-first under the same dependencies and collective sequence
(decision 90), and that order is emitted if it fits: the plan's overlap is
given up for this compile, and one warning says so. Where that does not
fit either, the lower of the two orders stands and one warning names the
peak and the budget. What it leaves for
every graph is the memory-planning info Inductor's own buffer reuse reads
(`inform_reuse`, decisions.md 22).

A plan's buckets cannot be taken back here: the FX graph is already
bucketed. So before a budgeted plan is applied, the FX pass lowers and
fuses a copy of the plan's graph and refits it by the same rule
(`trial_refit`, decision 110); a plan that does not fit there is set aside
in that compile, which keeps the captured order.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

try:  # Inductor keys its FX graph cache on a scheduler pass's uuid(); a plain callable would bypass the cache
    from torch._inductor.custom_graph_pass import CustomSchedulerPass as _Base
except Exception:  # noqa: BLE001 - an older torch (2.11 has the slot, not the class): keyed by pickling instead
    _Base = object  # type: ignore[assignment,misc]

_PENDING = threading.local()  # the budget of the graph the FX pass just ordered, for this compile's scheduler


@dataclass(frozen=True)
class Expected:
    """What the FX pass asks of the check after fusion for one graph: `budget` (bytes after fusion; None: none)
    with the schedule's `model_peak` and the FX budget it was solved under (`fx_budget`); and `store`, where a
    captured order's peak after fusion is recorded (no budget), or where a default-budget plan found over its
    budget is (decision 82); `reorder`, for a graph that compiles in the order it came, where the user's settings
    have Inductor's `reorder_for_peak_memory` on: the check runs it, as Inductor would have (decision 111)."""

    fingerprint: str
    budget: int | None = None
    model_peak: int | None = None
    store: str | None = None
    fx_budget: int | None = None
    reorder: bool = False


def expect(what: Expected | None) -> None:
    """Called by the FX pass for each graph: what the scheduler that follows in this thread should check."""
    _PENDING.value = what if what is not None and (what.budget or what.store or what.reorder) else None


def _take() -> Expected | None:
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


def inductor_memory_order(nodes: list[Any]) -> list[Any]:
    """The order Inductor's own `reorder_for_peak_memory` gives the fused `nodes`, called as its scheduler calls
    it. `install_fx` turns that pass off (it would re-sort an applied order); where no order is applied, the check
    after fusion runs it in its place, so the graph compiles as without overlapsat (decision 111)."""
    from torch._inductor.memory import reorder_for_peak_memory
    from torch._inductor.utils import OrderedSet
    from torch._inductor.virtualized import V

    sched = V.graph.scheduler
    return reorder_for_peak_memory(nodes, sched.name_to_buf, sched.name_to_fused_node,
                                   OrderedSet(V.graph.graph_inputs.keys()), OrderedSet(V.graph.get_output_names()))


def inform_reuse(nodes: list[Any]) -> None:
    """Leave Inductor's memory-planning info on `nodes`, in the order it will emit them, as its own
    `reorder_for_peak_memory` does. `install_fx` turns that pass off (it would re-sort the
    order), but Inductor's wrapper decides whether to hold a freed buffer for a later one of the same size by an
    estimate built on this info (`EfficientPeakEstimate`); without it the estimate sees no intermediate buffer,
    and a freed buffer is held across the graph's peak (decisions.md 22: 145 MB on 2 H200s, run 33 against run
    37)."""
    plan_memory(nodes)  # the steps of Inductor's prepare_planning_info, without its estimate


MAX_MOVES = 200  # refit's move limit: a count, not a clock, so that every rank moves the same nodes


@dataclass(frozen=True)
class Refit:
    """What `refit` did to one graph: its peak before and after (MODEL.md's rule on the fused nodes), the budget,
    and the nodes it moved (0: the order stands as fused)."""

    before: int
    after: int
    budget: int
    moves: int
    why_kept: str = ""  # where moves were found but not taken: the check that refused them
    resorted: bool = False  # no moves fitted: the nodes were sorted memory-first in the agreed collective sequence

    @property
    def fits(self) -> bool:
        return self.after <= self.budget


def refit(nodes: list[Any], budget: int, max_moves: int = MAX_MOVES) -> tuple[list[Any], Refit]:
    """`nodes` (Inductor's, after fusion, in the order it will emit them), moved until their peak by MODEL.md's
    rule is within `budget`, or as near as `fit_budget`'s moves get it: (the nodes in their new order, what was
    done). The moves keep every data and ordering dependency of the fused graph (each node's predecessors in
    Inductor's own memory-planning info, the relation its `reorder_for_peak_memory` keeps) and the whole
    collective sequence; an order that breaks either, or that is not lower, is refused and the nodes stand."""
    from overlapsat.heuristics.fit_budget import fit_budget
    from overlapsat.simulate import peak_of

    g, preds = _imported(nodes)
    by_name = {nd.get_name(): nd for nd in nodes}
    ids = [g.index[nd.get_name()] for nd in nodes]
    before = peak_of(g, ids)
    if before <= budget:
        return nodes, Refit(before, before, budget, 0)
    res = fit_budget(g, ids, budget, collective_order="global", max_moves=max_moves, chains=True)
    after = peak_of(g, res.order)
    moved = [by_name[g.names[i]] for i in res.order]
    why = _refused(moved, preds, nodes) if after < before else "no move lowers the peak"
    if after > budget or why:  # no moves fit: a memory-first order of the same nodes, if it fits, this compile
        order = _memory_first(g)
        peak = peak_of(g, order) if order is not None else None
        if peak is not None and peak <= budget:
            sorted_nodes = [by_name[g.names[i]] for i in order]
            if not _refused(sorted_nodes, preds, nodes):
                return sorted_nodes, Refit(before, peak, budget, 0, resorted=True)
    if why:
        return nodes, Refit(before, before, budget, 0, why)
    return moved, Refit(before, after, budget, int(res.stats.get("moves", 0)))


def _memory_first(g: Any) -> list[int] | None:
    """The fused nodes in Inductor's least-peak-memory-first sort (`topological_sort_lpmf`), under every
    dependency and the collective sequence the ranks agreed on (chained as edges): deterministic, so every rank
    that falls back emits the same order. None where the sequence cannot be chained on these nodes."""
    from overlapsat.errors import GraphError
    from overlapsat.heuristics.memory_sorts import topological_sort_lpmf

    try:
        chained = g.with_collective_chain("global")
    except GraphError:
        return None
    return list(topological_sort_lpmf(chained).order)  # chaining adds edges only: the node ids are g's


def _imported(nodes: list[Any]) -> tuple[Any, dict[str, list[str]]]:
    """Inductor's fused nodes as an overlapsat Graph (memory only) and each node's predecessors in Inductor's
    memory-planning info, leaving the nodes' planning info as it found it."""
    from overlapsat.torch.importer import import_snodes
    from overlapsat.torch.routed import inductor_sizes_bound

    with planning_info_restored(nodes), inductor_sizes_bound():  # data-dependent sizes as the FX model has them
        plan_memory(nodes)
        g = import_snodes(nodes, durations=lambda _nd: 1.0, held_gradients=True)  # only memory is read
        preds = {nd.get_name(): [p.get_name() for p in nd.mpi_node.pred_nodes] for nd in nodes}
    return g, preds


def fused_peak(nodes: list[Any]) -> int:
    """MODEL.md's peak of Inductor's fused nodes in the order it will emit them: what `refit` holds a budget
    to, and what is recorded for a captured order (decision 82), both by the same rule (Inductor's own estimate,
    used for both before, read a captured GPU backward graph below the saved inputs it holds)."""
    from overlapsat.simulate import peak_of

    g, _ = _imported(nodes)
    return int(peak_of(g, [g.index[nd.get_name()] for nd in nodes]))


def _refused(moved: list[Any], preds: dict[str, list[str]], nodes: list[Any]) -> str:
    """Why an order of the fused nodes may not be emitted ("" if it may): a node before one it depends on, or
    another collective sequence than the one the ranks agreed on."""
    from torch._inductor import comms

    pos = {nd.get_name(): i for i, nd in enumerate(moved)}
    if len(pos) != len(nodes) or set(pos) != {nd.get_name() for nd in nodes}:
        return "the moved order lost or repeated a node"
    for nd in moved:
        late = [p for p in preds[nd.get_name()] if p in pos and pos[p] > pos[nd.get_name()]]
        if late:
            return f"{nd.get_name()} would run before {late[0]}, which it depends on"
    if [nd.get_name() for nd in moved if comms.contains_collective(nd)] != \
            [nd.get_name() for nd in nodes if comms.contains_collective(nd)]:
        return "the collective sequence would change"
    return ""


class AfterFusionCheck(_Base):  # type: ignore[misc,valid-type]
    """Inductor's `_post_fusion_custom_pass`: keeps a budgeted order within its budget (`refit`), and leaves
    the planning info Inductor's buffer reuse reads (`inform_reuse`) for the order it will emit. It behaves the
    same for every graph, so its cache key is constant: `uuid()` where torch has `CustomSchedulerPass`; on an
    older torch (2.11, the GPU machines') Inductor pickles the config into its key, and the pickled state is that
    same uuid."""

    def __call__(self, nodes: list[Any]) -> list[Any]:
        pending = _take()
        done = None
        kept = pending is not None and not pending.budget  # the graph compiles in the order it came
        resorted = kept and pending.reorder  # as the user's Inductor would emit it (decision 111)
        if resorted:
            try:
                nodes = inductor_memory_order(nodes)
            except Exception as e:  # noqa: BLE001 - the order stands as fused
                log.warning("overlapsat: graph %s: Inductor's reorder_for_peak_memory failed on it (%s: %s); it "
                            "compiles in the order it came", pending.fingerprint, type(e).__name__, e)
        if kept and pending.store:  # a captured order: its peak after fusion
            try:
                from overlapsat.store import record_fused_peak

                record_fused_peak(pending.store, pending.fingerprint, fused_peak(nodes))
            except Exception as e:  # noqa: BLE001 - plans for this graph are then checked against the FX budget
                log.warning("overlapsat: graph %s: its peak after fusion was not recorded (%s: %s); a plan for it "
                            "is checked after fusion against its FX model's budget", pending.fingerprint,
                            type(e).__name__, e)
        if pending is not None and pending.budget:
            try:
                nodes, done = refit(nodes, pending.budget)
            except Exception as e:  # noqa: BLE001 - the order stands as fused; the budget is then unchecked
                log.warning("overlapsat: graph %s: its memory budget of %d B could not be checked after "
                            "Inductor's fusion (%s: %s); the order stands as fused", pending.fingerprint,
                            pending.budget, type(e).__name__, e)
        if not resorted:  # Inductor's reorder leaves its own planning info, as without overlapsat
            try:  # the planning info of the order Inductor will emit stays for its buffer reuse
                inform_reuse(nodes)
            except Exception as e:  # noqa: BLE001 - Inductor's reuse then plans as it would without it
                log.debug("overlapsat: no planning info left for Inductor's buffer reuse: %s: %s", type(e).__name__,
                          e)
        if pending is not None and done is not None:
            self._report(done, pending, self._record_over(done, pending))
        return nodes

    @staticmethod
    def _record_over(done: Refit, pending: Expected) -> int | None:
        """Where fusion broke a default budget (one the store recorded), record the plan as over, so the next
        solve takes a tighter FX budget, by what fusion added before any move: moves are judged by MODEL.md's
        rule on the fused nodes, which a 2026-11-30 CPU run found 2.8 MB low after them, so a plan that needs
        them is not trusted to fit. A plan that moves or the memory-first order fitted is recorded as such, so
        it stays where no plan fits the tighter budget (decisions 88 and 92): it keeps its buckets, where the
        captured order has none. Returns that FX budget, or None where nothing was recorded."""
        if not (pending.store and pending.fx_budget and done.before > done.budget):
            return None
        try:
            from overlapsat.store import record_over

            return record_over(pending.store, pending.fingerprint, pending.fx_budget, done.before - done.budget,
                               pending.budget, moved=done.fits)
        except Exception as e:  # noqa: BLE001 - the report still says what happened
            log.debug("overlapsat: could not record graph %s as over its budget: %s", pending.fingerprint, e)
            return None

    @staticmethod
    def _report(done: Refit, pending: Expected, nxt: int | None = None) -> None:
        import torch._inductor.config as icfg

        fp, model_peak = pending.fingerprint, pending.model_peak
        again = (f"; its plan is set aside until `overlapsat solve-cache` solves it again under an FX budget of "
                 f"{nxt} B (decision 82)" if nxt else "")
        if not done.fits:  # no setting restores the budget here: the nodes' own peak is above it
            log.warning("overlapsat: graph %s was ordered within a memory budget of %d B after fusion (model peak "
                        "%s B), but after Inductor's fusion its peak is %d B (%+.1f %%)%s: this graph is over its "
                        "budget (docs/decisions.md 80)%s", fp, done.budget, model_peak, done.after,
                        100 * (done.after / done.budget - 1),
                        f", and moving nodes found no order within it ({done.why_kept or 'closest kept'})"
                        if done.after == done.before else f", {done.before} B before {done.moves} moves", again)
            return
        reuse = ("; Inductor's buffer reuse is on and may hold a freed buffer across a peak this reading cannot "
                 "see: install_fx(buffer_reuse=False) removes that cause (decisions.md 25)"
                 if getattr(icfg, "allow_buffer_reuse", False) else "")
        moved = (f"; fusion had put it at {done.before} B (%+.1f %%), and {done.moves} moved nodes brought it back"
                 % (100 * (done.before / done.budget - 1))) if done.moves else ""
        if done.resorted:  # the plan's overlap is given up for this compile: said, as a warning
            moved = (f"; fusion had put it at {done.before} B (%+.1f %%), no move fitted it, so this compile emits "
                     "its nodes memory-first in the agreed collective sequence (the plan's order is given up)"
                     % (100 * (done.before / done.budget - 1)))
        log.log(logging.WARNING if again or done.resorted else logging.INFO,
                "overlapsat: graph %s: peak after fusion %d B by MODEL.md's rule on Inductor's fused nodes, which "
                "counts no kernel workspace and, of the inputs its caller holds, only the incoming gradients, within its "
                "budget of %d B%s%s%s", fp, done.after, done.budget, moved, reuse, again)

    def uuid(self) -> str:
        return "overlapsat-after-fusion-5"  # 5: runs Inductor's memory reorder on a graph kept as it came (111)

    def __getstate__(self) -> dict[str, str]:
        return {"uuid": self.uuid()}

    def __setstate__(self, state: dict[str, str]) -> None:
        pass


def _rest_of_post_grad(gm: Any) -> None:
    """The post-grad steps Inductor runs after the custom post pass, on `gm` (a copy): the stable sort, the
    constructors moved to the GPU, the in-place rewrites and the functionalized wrappers' decompositions, which
    change what the graph allocates (torch/_inductor/fx_passes/post_grad.py). Torch's bucketing and overlap
    passes, which come between them, are off where a plan applies (install_fx)."""
    from torch._inductor.fx_passes import post_grad
    from torch._inductor.fx_passes.reinplace import reinplace_inplaceable_ops
    from torch._inductor.fx_utils import FakeTensorUpdater
    from torch._inductor.pattern_matcher import stable_topological_sort

    stable_topological_sort(gm.graph)
    post_grad.move_constructors_to_gpu(gm.graph)
    try:
        updater = FakeTensorUpdater(gm)
    except Exception:  # noqa: BLE001 - an older torch takes the graph
        updater = FakeTensorUpdater(gm.graph)
    updater.incremental_update()
    reinplace_inplaceable_ops(updater, gm.graph)
    for name in ("decompose_triton_kernel_wrapper_functional", "decompose_auto_functionalized"):
        if hasattr(post_grad, name):
            getattr(post_grad, name)(gm.graph)
    gm.recompile()


def trial_refit(graph: Any, budget: int) -> Refit:
    """What the check after fusion will find for `graph` (a copy of a post-grad FX graph with a plan applied,
    which this takes and changes) before the plan is applied to the real one (decision 110): the copy is lowered
    and fused as Inductor will (the rest of its post-grad steps, `GraphLowering`, the scheduler's fusion) and
    refitted to `budget` by the same rule and moves (`refit`, deterministic, so the compile's own check does the
    same). Nothing is generated, and the copy's lowering leaves Inductor's handler as it was. Raises where the
    copy cannot be lowered."""
    import torch
    import torch._inductor.config as icfg
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V

    gm = torch.fx.GraphModule(graph.owning_module, graph)
    _rest_of_post_grad(gm)
    inputs = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    fake = torch._guards.detect_fake_mode(inputs)
    backward = any(n.op == "placeholder" and n.name.startswith("tangents") for n in gm.graph.nodes)
    lowering = GraphLowering(gm, example_inputs=inputs, shape_env=fake.shape_env if fake is not None else None,
                             is_inference=False, is_backward=backward)
    # this pass must not run on the copy's nodes: it would take the real graph's pending budget
    with V.set_graph_handler(lowering), icfg.patch(_post_fusion_custom_pass=None):
        lowering.run(*inputs)
        lowering._update_scheduler()
        _, done = refit(lowering.scheduler.nodes, budget)
    return done


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
                 "Inductor's buffer reuse plans without memory-planning info (decisions.md 22), and a graph given "
                 "no order compiles without Inductor's re-sorting by memory, which install_fx turns off (decisions.md "
                 "111)")
        return False
    icfg._post_fusion_custom_pass = AfterFusionCheck()
    return True


__all__ = ["MAX_MOVES", "AfterFusionCheck", "Expected", "Refit", "expect", "fused_peak",
           "inform_reuse", "install_check", "plan_memory", "planning_info_restored", "refit", "trial_refit"]
