"""Apply solved schedules to post-grad FX graphs (`install_fx`, docs/fx.md).

`FxSchedulePass` sits in Inductor's `post_grad_custom_post_pass`: it imports
the FX graph (`import_fx`), fingerprints it and, as the scheduler-node pass
does, records it (capture), applies the stored schedule (apply) or solves it
inline (solve). Applying moves the graph's nodes into the solved order. So
that Inductor's later scheduling keeps that order, `install` turns off the
scheduler-level passes that would re-sort nodes (`reorder_for_peak_memory`,
`reorder_for_compute_comm_overlap`; a graph given no order still gets the
first, as the user's settings have it: decision 111), and the pass pins each collective's
overlap as OverlapScheduler does (`insert_overlap_deps`): the kernels the
order puts between a collective and its wait get control dependencies
(torch's `control_deps`), after the collective and before the wait, so no
later pass or fusion can move them out of the overlap. `pin="compute"`
pins torch's compute nodes (FLOP-counted ops: matmuls, convolutions, the
ones OverlapScheduler pins), `pin="all"` every kernel the model prices
(which also stops Inductor from fusing a pointwise op across a wait),
`pin="none"` nothing. Any failure before the graph is changed logs one
warning and leaves the graph as it came. Under `collective_order="free"`
an order stands only if every rank agrees on the collective sequence it
issues (`overlapsat.torch.agree`); otherwise every rank keeps the graph as
it came. An order solved under a memory budget is checked again after
Inductor's fusion, which can move nodes (`overlapsat.torch.after_fusion`).
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.fmt import fmt_bytes
from overlapsat.graph import COMPUTE, Graph
from overlapsat.plan import Plan
from overlapsat.simulate import peak_memory
from overlapsat.store import TORCH_ORDER, fused_record, graph_path, schedules_digest
from overlapsat.torch import after_fusion
from overlapsat.torch.after_fusion import Expected, expect, install_check
from overlapsat.torch.agree import agree, collective_sequence
from overlapsat.torch.apply import SAFE_LEVELS, check_pass_options, open_store, record_graph, stored_or_solved
from overlapsat.torch.fx_plan import apply_transports, merge_plan, transport_nodes
from overlapsat.torch.installing import chained, installed_by, name_allocator, name_pricing, note, swap_config, user_setting
from overlapsat.validate import validate

log = logging.getLogger(__name__)

try:  # Inductor keys its FX graph cache on a CustomGraphPass's uuid(); without torch, a plain base
    from torch._inductor.custom_graph_pass import CustomGraphPass as _Base
except Exception:  # noqa: BLE001
    _Base = object  # type: ignore[assignment,misc]

FX_PASS_VERSION = 4  # 2: pins the overlap with control dependencies; 3: "free" with cross-rank agreement; 4: plans
PINS = ("compute", "all", "none")
FX_LEVELS = (*SAFE_LEVELS, "free")  # "free" only with the agreement (overlapsat.torch.agree)
Moved = tuple  # (Graph, order, pins, the pinning function or None): what `_pin` needs after `_move`


_PRICING_CHECKED: set[tuple[str, str]] = set()


def _warn_if_priced_apart(store: str, ours: str | None) -> None:
    """Once per store and pricing in a process (the graphs recorded after the check are this pass's own, of its
    pricing): a miss whose store holds graphs recorded with another pricing (the fingerprint includes the
    prices, so none of their schedules can match this pass's graphs)."""
    from overlapsat.store import recorded_pricings

    if ours is None or (store, ours) in _PRICING_CHECKED:
        return
    _PRICING_CHECKED.add((store, ours))
    theirs = sorted(recorded_pricings(store) - {ours})
    if theirs:
        log.warning("overlapsat: no schedule for this graph, and the store's recorded graphs were priced for %s "
                    "while this pass prices for %r (a graph's fingerprint includes its prices, so their schedules "
                    "cannot match): install with profile=%r to use them, or capture and solve again with %r",
                    " and ".join(map(repr, theirs)), ours, theirs[0], ours)


class FxSchedulePass(_Base):  # type: ignore[misc,valid-type]
    """Inductor's post-grad custom pass: reorders the FX graph to a stored (or inline-solved) schedule."""

    def __init__(self, store: str, *, mode: str = "apply", time_limit: float = 10.0, collective_order: str = "group",
                 profile: str = "h200", pin: str = "compute", comm_slowdown: float = 1.0,
                 on_apply: Callable[[Graph, list[str]], None] | None = None, agree_timeout: float = 1800.0,
                 plans: bool = False, torch_order: bool = True, inline: bool = False) -> None:
        check_pass_options(store, mode, collective_order, levels=FX_LEVELS)
        if not isinstance(inline, bool):
            raise GraphError(f"inline must be True or False, got {inline!r}")
        self.inline = inline
        if pin not in PINS:
            raise GraphError(f"pin must be one of {', '.join(PINS)}, got {pin!r}")
        self.store, self.mode, self.time_limit = os.path.abspath(store), mode, float(time_limit)
        self.collective_order, self.profile, self.pin, self.on_apply = collective_order, profile, pin, on_apply
        if not (isinstance(comm_slowdown, (int, float)) and 1.0 <= comm_slowdown < 100):
            raise GraphError(f"comm_slowdown must be a number in [1, 100), got {comm_slowdown!r}")
        self.comm_slowdown = float(comm_slowdown)
        if not (isinstance(agree_timeout, (int, float)) and agree_timeout > 0):
            raise GraphError(f"agree_timeout must be a positive number of seconds, got {agree_timeout!r}")
        self.agree_timeout = float(agree_timeout)
        if not isinstance(plans, bool):
            raise GraphError(f"plans must be True or False, got {plans!r}")
        self.plans = plans
        if not isinstance(torch_order, bool):
            raise GraphError(f"torch_order must be True or False, got {torch_order!r}")
        self.torch_order = torch_order

    @property
    def agreeing(self) -> bool:
        """Whether every graph's collective sequence is agreed across ranks: a free order, or a plan's buckets,
        may change it, and a rank that fell back alone would hang its peers."""
        return self.collective_order == "free" or self.plans

    def __call__(self, graph: Any) -> None:
        before = list(graph.nodes)
        moved = None
        self._budget: Expected | None = None
        self._recorded: str | None = None  # the fingerprint of a graph recorded in its captured order
        expect(None)  # nothing for this compile's after-fusion check unless an order stands below
        try:
            moved = self._run(graph)
            if moved is not None and not isinstance(moved, _Pending) and not self.agreeing:
                self._pin(graph, *moved)
        except Exception as e:  # noqa: BLE001 - the compile goes on with the graph as it came
            log.warning("overlapsat: keeping this FX graph's order: %s: %s", type(e).__name__, e)
            _restore(graph, before)
            moved = None
        stands = moved is not None
        if self.agreeing:  # every rank, every graph: one exchange, whatever happened above
            stands = self._agree(graph, before, moved)
        if stands and self._budget is not None:
            expect(self._budget)  # the order was solved under a budget: check it after fusion (after_fusion.py)
        elif not stands:  # the order it came in compiles, as Inductor alone would emit it (decision 111), and a
            # recorded graph's peak after fusion is read there
            fp = self._recorded or (self._budget.fingerprint if self._budget is not None else "")
            expect(Expected(fp, store=self.store if self._recorded is not None else None,
                            reorder=bool(user_setting("reorder_for_peak_memory"))))

    def _agree(self, graph: Any, before: list[Any], moved: Moved | _Pending | None) -> bool:
        """Keep a free order only if every rank issues the same collective sequence; else restore the graph.
        A plan is applied only once every rank has said it will issue the sequence its dry run issued.
        True if a moved order stands."""
        if isinstance(moved, _Pending):
            return self._agree_plan(graph, moved)
        ok, why = agree(collective_sequence(graph), timeout_s=self.agree_timeout)
        if ok:
            if moved is not None:
                try:
                    self._pin(graph, *moved)
                except Exception as e:  # noqa: BLE001 - the agreed sequence stands; only the report failed
                    log.warning("overlapsat: applied the agreed order to this FX graph; after it: %s: %s",
                                type(e).__name__, e)
        elif moved is not None:
            _restore(graph, before)
            log.warning("overlapsat: keeping this FX graph's order: the ranks did not agree on a free collective "
                        "order: %s", why)
        else:
            log.info("overlapsat: the ranks did not agree on this FX graph's collective order (%s); it was kept", why)
        return ok and moved is not None

    def _agree_plan(self, graph: Any, pending: _Pending) -> bool:
        ok, why = agree(pending.sequence, timeout_s=self.agree_timeout)
        if not ok:
            log.warning("overlapsat: keeping this FX graph's order: the ranks did not agree on the plan's "
                        "collective sequence: %s", why)
            return False
        try:
            moved, gathers = self._merged_and_moved(graph, pending.graph, pending.plan)
        except Exception as e:  # noqa: BLE001 - the dry run on a copy passed, so this is a bug; say so
            log.error("overlapsat: applying an agreed plan to this FX graph failed after its dry run passed "
                      "(%s: %s); the graph may hold torch's merged buckets in torch's placement", type(e).__name__, e)
            return False
        self._pin(graph, *moved)
        try:  # after the pins: their control dependencies name the gathers, and now read the new nodes
            apply_transports(graph, gathers)
            if collective_sequence(graph) != pending.sequence:
                raise GraphError("the graph issues another collective sequence than its dry run did")
        except Exception as e:  # noqa: BLE001 - as above: the dry run passed
            log.error("overlapsat: moving this plan's all_gathers to the copy engine failed after its dry run "
                      "passed (%s: %s)", type(e).__name__, e)
            return False
        return True

    def _importer(self, fx_graph: Any) -> Graph:
        from overlapsat.torch.fx import import_fx

        # groups by structure, not by their rank-local names: every rank of a 2-D mesh finds the same graph; named
        # by its part of the step (AOTAutograd's backward graph takes the incoming gradients as `tangents_*`), so a
        # store's tables tell a step's two graphs apart (the name is not in the fingerprint)
        part = "backward" if any(n.op == "placeholder" and n.name.startswith("tangents")
                                 for n in fx_graph.nodes) else "forward"
        return import_fx(fx_graph, name=f"fx {part} graph", profile=self.profile,
                         inline=self.inline).with_structural_groups()

    def _dry_run(self, graph: Any, g: Graph, plan: Plan, expected: Expected | None = None) -> _Pending:
        """Merge, order and move to the copy engine a copy of the graph: what the plan would make, checked before
        the graph is touched: against the FX budget it was solved under, and, lowered and fused as Inductor will,
        against its budget after fusion (`_trial`). Copy-engine transports that cannot apply here (no CUDA, no
        symmetric memory for the group) stay on NCCL with one warning; the buckets and order stand."""
        import copy

        budget = expected.fx_budget if expected is not None else None

        def twin_of() -> Any:
            twin = copy.deepcopy(graph)
            # a deep copy of a Graph has no module, and torch's control-dependency wrapper (the pins' dry run in
            # `_move`) needs one: the copy reads the original's, which the dry run only reads (its constants)
            twin.owning_module = graph.owning_module
            return twin

        twin = twin_of()
        h, moved, ce = merge_plan(twin, g, plan, self._importer)
        peak = peak_memory(h, moved)  # the graph torch's merges make: what a budget must hold for
        if budget is not None and peak > budget:
            raise GraphError(f"the plan's buckets as torch merges them peak at {fmt_bytes(peak)}, above the "
                             f"budget of {fmt_bytes(budget)} it was solved under")
        self._move(twin, h, moved, level="free")
        if ce:
            try:
                apply_transports(twin, transport_nodes(twin, ce))
            except Exception as e:  # noqa: BLE001 - NCCL moves the same data: the plan stands without them
                log.warning("overlapsat: this plan's %d copy-engine all_gathers stay on NCCL: %s: %s", len(ce),
                            type(e).__name__, e)
                plan = replace(plan, transports=())
                twin = twin_of()
                h, moved, ce = merge_plan(twin, g, plan, self._importer)
                self._move(twin, h, moved, level="free")
        if expected is not None and expected.budget:
            _trial(lambda: self._as_applied(twin_of(), g, plan), expected)
        return _Pending(plan, g, collective_sequence(twin))

    def _merged_and_moved(self, graph: Any, g: Graph, plan: Plan) -> tuple[Moved, list[Any]]:
        """`plan`'s buckets merged into `graph` and its nodes moved to the plan's order: what `_pin` needs, and
        the all_gathers its copy-engine transports take (moved after the pins, which name them)."""
        h, order, ce = merge_plan(graph, g, plan, self._importer)
        moved = self._move(graph, h, order, level="free")
        return moved, transport_nodes(graph, ce)

    def _as_applied(self, graph: Any, g: Graph, plan: Plan) -> Any:
        """`graph` with `plan` applied as `_agree_plan` applies it: merged, moved, pinned (the pins' control
        dependencies constrain what Inductor and the check after fusion may move), its transports moved."""
        moved, gathers = self._merged_and_moved(graph, g, plan)
        self._pin(graph, *moved, report=False)
        apply_transports(graph, gathers)
        return graph

    def _run(self, graph: Any) -> Moved | _Pending | None:
        """Import, then record the graph (capture, a miss) or move its nodes to the schedule (what `_pin` needs)."""
        g = self._importer(graph)
        if self.comm_slowdown != 1.0:  # collectives priced as they run beside compute (docs/gpu_results.md)
            g = g.with_comm_scale(self.comm_slowdown)
        fp = g.fingerprint()
        if self.mode != "capture":
            order, why, metrics, plan = stored_or_solved(self.store, g, fp, mode=self.mode,
                                                         time_limit=self.time_limit,
                                                         collective_order=self.collective_order, plans=self.plans)
            if order is not None and plan is not None:
                self._budget = _budget_of(fp, metrics, fused_record(self.store, fp), self.store)
                pending = self._dry_run(graph, g, plan, self._budget)
                note("fx", g.name, fp, "applied", f"a plan: {len(plan.buckets)} buckets, "
                     f"{len(pending.plan.transports)} by copy engine, {len(order)} nodes")
                return pending
            if order is not None:
                moved = self._move(graph, g, order)
                self._budget = _budget_of(fp, metrics, fused_record(self.store, fp), self.store)
                note("fx", g.name, fp, "applied", f"{len(order)} nodes")
                return moved
            if why != "no schedule":
                log.warning("overlapsat: keeping this FX graph's order: the stored schedule is not usable (%s)", why)
            else:
                _warn_if_priced_apart(self.store, g.meta.get("pricing"))
            note("fx", g.name, fp, "no schedule" if why == "no schedule" else "kept Inductor's order",
                 "recorded" if why == "no schedule" else why)
        else:
            note("fx", g.name, fp, "recorded")
        if self.torch_order and not os.path.exists(graph_path(self.store, fp)):  # once, when first recorded
            add_torch_order(graph, g)
        record_graph(self.store, g, fp)
        self._recorded = fp
        return None

    def _move(self, graph: Any, g: Graph, order: list[str], level: str | None = None) -> Moved:
        """Validate, find the pins and dry-run their wrapping (the step that can fail), then move the nodes.
        A plan's order is validated at "free" here (`merge_plan` checks its collective sequence)."""
        vs = validate(g, order, collective_order=level or self.collective_order)
        if vs:
            raise GraphError(f"the stored schedule is invalid for this graph ({vs[0]})")
        by_name = {n.name: n for n in graph.nodes if n.op == "call_function"}
        deps = overlap_deps(g, order, by_name, self.pin)
        preserve = _preserve_node_ordering(graph, deps) if deps else None  # found and tried before anything moves
        out = graph.output_node()
        for name in order:
            out.prepend(by_name[name])
        graph.lint()
        return g, order, deps, preserve

    def _pin(self, graph: Any, g: Graph, order: list[str], deps: dict[Any, Any],
             preserve: Callable[..., None] | None, report: bool = True) -> None:
        """Pin the moved graph's overlaps (control dependencies), then report the applied order (`report`: a
        copy for the trial lowering is neither reported nor warned about)."""
        if preserve is not None:
            try:
                preserve(graph, deps)
                graph.lint()
            except Exception as e:  # noqa: BLE001 - the order stands; each wrapped node computes what it did
                if report:
                    log.warning("overlapsat: applied the order to this FX graph, but pinning it failed: %s: %s",
                                type(e).__name__, e)
        if not report:
            return
        if self.on_apply is not None:
            self.on_apply(g, order)
        log.info("overlapsat: applied a schedule to an FX graph (%d nodes, %d pinned)", len(order), len(deps))

    def uuid(self) -> str | None:
        """Inductor's cache key for a custom pass: version, options and the store's schedules.

        None under "free", which makes Inductor skip its caches: a rank that loaded a cached graph would not
        take part in the agreement its peers wait for (overlapsat.torch.agree). None in capture mode too: a
        cached graph never reaches the pass, so nothing would be recorded."""
        if self.agreeing or self.mode == "capture":
            return None
        return (f"overlapsat-fx-{FX_PASS_VERSION}-{self.mode}-{self.collective_order}-{self.profile}-{self.pin}-"
                f"{self.comm_slowdown}-{int(self.torch_order)}-"
                f"{self.time_limit}-{schedules_digest(self.store)}")

    def __getstate__(self) -> dict[str, Any]:
        return {"uuid": self.uuid(), "store": self.store, "mode": self.mode, "time_limit": self.time_limit,
                "collective_order": self.collective_order, "profile": self.profile, "pin": self.pin,
                "comm_slowdown": self.comm_slowdown, "agree_timeout": self.agree_timeout, "plans": self.plans,
                "torch_order": self.torch_order}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.store, self.mode, self.time_limit = state["store"], state["mode"], state["time_limit"]
        self.collective_order, self.profile, self.on_apply = state["collective_order"], state["profile"], None
        self.pin, self.comm_slowdown = state.get("pin", "compute"), state.get("comm_slowdown", 1.0)
        self.agree_timeout = state.get("agree_timeout", 1800.0)
        self.plans = state.get("plans", False)
        self.torch_order = state.get("torch_order", True)


def _trial(applied: Callable[[], Any], expected: Expected) -> None:
    """Decision 110: the plan's graph (`applied()`: a copy, the plan applied as it will be, pins and all) lowered
    and fused as Inductor will, and refitted to its budget after fusion as the check there will: where that does
    not fit, the plan is set aside now, as the check would set it aside (decision 82), and raises, so this compile
    keeps the captured order instead of running a plan over its budget. A trial that cannot build or lower the
    copy leaves the plan to the check, and says so."""
    from overlapsat.torch.after_fusion import AfterFusionCheck, trial_refit

    try:
        done = trial_refit(applied(), int(expected.budget))
    except Exception as e:  # noqa: BLE001 - the check after fusion still holds the budget where it can
        log.info("overlapsat: graph %s: the plan's trial lowering failed (%s: %s); it is applied and checked "
                 "after fusion", expected.fingerprint, type(e).__name__, e)
        return
    if done.fits:
        log.info("overlapsat: graph %s: the plan, lowered and fused as Inductor will, peaks at %d B after fusion "
                 "(%d B before %d moves), within its budget of %d B there: applied", expected.fingerprint,
                 done.after, done.before, done.moves, done.budget)
        return
    nxt = AfterFusionCheck._record_over(done, expected)
    raise GraphError(f"graph {expected.fingerprint}: the plan, lowered and fused as Inductor will, peaks at "
                     f"{done.after} B after fusion, over its budget of {done.budget} B there (decision 110)"
                     + (f"; it is set aside until `overlapsat solve-cache` solves it again under an FX budget of "
                        f"{nxt} B (decision 82)" if nxt else ""))


@dataclass(frozen=True)
class _Pending:
    """A plan whose dry run passed on a copy: applied to the graph once every rank agrees on `sequence`."""

    plan: Plan
    graph: Graph  # the unbucketed model graph the plan is for
    sequence: list[str]  # the collectives the dry run's graph issues, in order


def _budget_of(fp: str, metrics: dict[str, Any], record: dict[str, Any], store: str) -> Expected | None:
    """What the after-fusion check holds a schedule solved under a memory budget (its metrics) to, else None.
    A default budget (the captured order's peak, or the tighter FX budget a record set after a plan went over)
    is, after fusion, the captured order's own peak there where the store recorded it (decision 82), and a given
    budget is the bytes after fusion that solve-cache recorded for the FX budget it solved under (decision 86): the FX
    model counts what fusion removes by another amount for each order, so its bytes are not the bytes the
    replaced order allocates; a plan found over it is recorded, so the next solve tightens its FX budget."""
    b = metrics.get("memory_budget")
    if not (isinstance(b, (int, float)) and b > 0):
        return None
    model_peak = metrics.get("peak_memory")
    base = (metrics.get("baseline") or {}).get("peak_memory")
    fused = record.get("captured_peak_after_fusion")
    if fused is not None and (b == base or b == record.get("next_fx_budget")):
        return Expected(fp, int(fused), model_peak, store, int(b))
    target = record.get("targets", {}).get(str(int(b)))
    if fused is not None and target is not None:  # a given budget, set after fusion by solve-cache (decision 86)
        return Expected(fp, int(target), model_peak, store, int(b))
    return Expected(fp, int(b), model_peak, fx_budget=int(b))


def overlap_deps(g: Graph, order: list[str], by_name: dict[str, Any], pin: str) -> dict[Any, Any]:
    """The control dependencies that pin each collective's overlap in `order`: every pinned kernel between a
    collective and its first wait comes after the collective, and each of its waits after that kernel (what
    OverlapScheduler's hiding-interval dependencies say). Keys in order position, so a node is wrapped before
    anything that depends on it."""
    if pin == "none":
        return {}
    try:
        from torch.utils._ordered_set import OrderedSet
    except ImportError:  # an older torch: a plain ordered set does for preserve_node_ordering
        OrderedSet = dict.fromkeys  # type: ignore[assignment]  # noqa: N806
    compute = _compute_node_test(g)
    pos = {nm: i for i, nm in enumerate(order)}
    pinned = [pos[g.names[v]] for v in range(len(g.nodes)) if g.kind[v] == COMPUTE and g.dur[v] > 0
              and (pin == "all" or compute(v, by_name[g.names[v]]))]
    pinned.sort()
    extra: dict[int, list[int]] = {}
    for c in g.coll_seq:
        waits = g.waits_of[c]
        if not waits:
            continue
        lo, hi = pos[g.names[c]], min(pos[g.names[w]] for w in waits)
        inside = pinned[bisect_right(pinned, lo):bisect_left(pinned, hi)]
        for i in inside:
            extra.setdefault(i, []).append(lo)
            for w in waits:
                extra.setdefault(pos[g.names[w]], []).append(i)
    return {by_name[order[i]]: OrderedSet(by_name[order[j]] for j in sorted(set(extra[i]))) for i in sorted(extra)}


def _compute_node_test(g: Graph) -> Callable[[int, Any], bool]:
    """What OverlapScheduler pins (torch's FLOP-counted ops), or overlapsat's GEMM test where torch lacks it."""
    try:
        from torch._inductor.fx_passes.overlap_scheduling import is_compute_node
    except ImportError:
        return lambda v, _n: g.nodes[v].gemm_like
    return lambda _v, n: bool(is_compute_node(n))


def _preserve_node_ordering(graph: Any, deps: dict[Any, Any]) -> Callable[..., None] | None:
    """torch's control-dependency wrapper (the one OverlapScheduler uses), or None where torch has none.

    Each node's subgraph is built once here as a dry run, before the graph changes: that is the step that
    can fail on an op torch cannot wrap, so such a failure keeps the graph as it came."""
    try:
        from torch._inductor.fx_passes import control_dependencies as cd
    except Exception:  # noqa: BLE001 - an older torch: the order is applied, not pinned
        log.info("overlapsat: this torch has no control_deps; the FX order is applied without pinning")
        return None
    dry = getattr(cd, "_create_subgraph_for_node", None)
    if dry is not None:
        for node in deps:
            dry(graph, node)
    return cd.preserve_node_ordering


def _restore(graph: Any, before: list[Any]) -> None:
    """Put the nodes back in their original order (a failed apply may have moved some)."""
    try:
        out = graph.output_node()
        for n in before:
            if n.op not in ("placeholder", "output"):
                out.prepend(n)
    except Exception:  # noqa: BLE001 - nothing was moved, or the graph is not ours to fix
        log.debug("overlapsat: could not restore an FX graph's order", exc_info=True)


def add_torch_order(graph: Any, g: Graph) -> None:
    """Put the order torch's OverlapScheduler gives `graph` (no bucketing, and no more memory than the order as
    captured, by torch's estimate) into `g`'s meta, `TORCH_ORDER` (outside the fingerprint): `solve-cache` gives
    it to the search as a candidate, so an order or plan is never longer than torch's own where that is valid
    (decision 74). Where torch has no such scheduler, or it fails, `g` is left as it came (a warning says why)."""
    from overlapsat.torch.fx_peer import overlap_scheduler_order

    order = overlap_scheduler_order(graph, g, max_memory_increase_gb=0.0, max_memory_increase_ratio=0.0)
    if order is not None:
        g.meta[TORCH_ORDER] = {"torch OverlapScheduler": order}


def install_fx(mode: str = "apply", store: str = "overlapsat-schedules", *, time_limit: float = 10.0,
               collective_order: str = "group", profile: str = "h200", pin: str = "compute",
               comm_slowdown: float = 1.0, agree_timeout: float = 1800.0,
               buffer_reuse: bool = True, plans: bool = False, torch_order: bool = True,
               inline: bool = False) -> FxSchedulePass:
    """Schedule at the FX level, on every rank: the post-grad pass, with Inductor's re-sorting passes off.

    collective_order="free" lets the order change the collective sequence: each graph's order then stands
    only if every rank agrees on the sequence it issues (waiting up to `agree_timeout` s for the others), and
    Inductor's caches are skipped, so every rank compiles every graph (overlapsat.torch.agree).

    plans=True applies stored plans (`overlapsat plan`): each bucket is merged with torch's own utilities, in
    its members' order, on a copy first; the graph changes only when every rank agrees on the collective
    sequence it would issue, so, as under "free", Inductor's caches are skipped (overlapsat.torch.fx_plan).

    buffer_reuse=False turns Inductor's buffer reuse off (`allow_buffer_reuse`): the generated code then
    frees each buffer after its last use, as the memory model does, where the reuse gate may hold a freed
    buffer for a later one across a peak its estimate cannot see (a kernel's workspace: on 2 H200s it held a
    32 MiB buffer there, benchmarks/results/gpu_runs.md run 44). For a memory budget meant as a hard limit.

    torch_order=True (the default) runs torch's OverlapScheduler (no bucketing, no more memory than the order as
    captured) once on each graph it records, and records its order beside the graph: `solve-cache` gives it to
    the search as a candidate, so a stored order or plan is never longer than torch's own where that is valid
    under the budget. It costs that scheduler's time once per new graph; torch_order=False skips it.

    inline=True imports each graph with `import_fx(inline=True)` (decisions 82 and 87): a pointwise op that
    Inductor computes inside its readers' kernels holds no memory, so the FX budget is nearer the bytes after
    fusion. Give capture and apply the same value: it is part of each graph's fingerprint.

    A post-grad pass already set runs first, then this one. `uninstall()` (or `installed_fx(...)` as a
    context manager) puts Inductor's settings back."""
    from overlapsat.torch.need import torch_module

    if not isinstance(buffer_reuse, bool):
        raise GraphError(f"buffer_reuse must be True or False, got {buffer_reuse!r}")
    torch_module()
    import torch._inductor.config as icfg

    # registers the bucket ops (decision 81) before any compile: plans skip Inductor's caches (`uuid`), but code
    # that calls the ops must find them however it was loaded, not only after this pass merged a graph
    from overlapsat.torch import copy_out  # noqa: F401

    open_store(store)
    p = FxSchedulePass(store, mode=mode, time_limit=time_limit, collective_order=collective_order, profile=profile,
                       pin=pin, comm_slowdown=comm_slowdown, agree_timeout=agree_timeout, plans=plans,
                       torch_order=torch_order, inline=inline)
    changes: dict[str, Any] = {"post_grad_custom_post_pass": chained(icfg.post_grad_custom_post_pass, p),
                               "reorder_for_peak_memory": False, "reorder_for_compute_comm_overlap": False}
    if not buffer_reuse:
        changes["allow_buffer_reuse"] = False  # part of Inductor's cache key, as every config is
    if hasattr(icfg, "_post_fusion_custom_pass") and icfg._post_fusion_custom_pass is None:
        changes["_post_fusion_custom_pass"] = after_fusion.AfterFusionCheck()  # budgets checked after fusion
    else:
        install_check()  # says why the check is not there (someone else's pass), or finds ours
    swap_config("install_fx", changes)
    name_pricing(profile, "install_fx")
    name_allocator("install_fx")
    later = [k for k in ("bucket_all_gathers_fx", "bucket_reduce_scatters_fx", "bucket_all_reduces_fx")
             if getattr(icfg, k, "none") != "none"]
    if getattr(getattr(icfg, "aten_distributed_optimizations", None), "enable_overlap_scheduling", False):
        later.append("aten_distributed_optimizations.enable_overlap_scheduling")
    if later:  # torch runs these after the custom post-grad pass, on the graph overlapsat ordered
        log.warning("overlapsat: torch's %s run after overlapsat's pass and will bucket or re-order the graph it "
                    "ordered; turn them off to apply overlapsat's order (docs/torchtitan.md)", ", ".join(later))
    return p


def installed_fx(mode: str = "apply", store: str = "overlapsat-schedules", **options: Any) -> Any:
    """`install_fx(...)` for the block only: `with installed_fx("apply", "schedules") as p: ...`."""
    return installed_by(install_fx, mode, store, **options)


__all__ = ["FxSchedulePass", "install_fx", "installed_fx", "add_torch_order"]
