"""overlapsat as a pass of torchtitan's graph_trainer (`pip install 'overlapsat[torchtitan]'`).

graph_trainer traces a whole training step (forward, loss and backward) into one FX graph with functional
collectives, runs a pipeline of passes on it, and executes the result node by node, so the graph's order is the
order the collectives are issued and waited in. `register()` adds a pipeline, chosen as torchtitan's users choose
one (`--compile.pass_pipeline overlapsat`): torchtitan's default passes, with overlapsat's pass in the place of
its joint transformer-block bucketing. The pass is `install_fx`'s FX pass on that graph: "capture" records the
graph into a store; "apply" merges a stored plan's buckets with torch's own utilities (members in the order the
graph lists them) and applies its order, only when every rank agrees on the collective sequence it would issue.
Any failure keeps the order the graph came with, with one warning.

Offline, between the two: `overlapsat solve-cache STORE --plans h200` (or `solve_store(STORE, plans="h200")`).
"""

from __future__ import annotations

from typing import Any

from overlapsat.errors import GraphError
from overlapsat.torch.apply import open_store
from overlapsat.torch.fx_apply import FxSchedulePass

TORCHTITAN_BUCKETING = "joint_transformer_block_bucketing_reordering_pass"  # the default pipeline's pass we replace


class TitanPass:
    """A graph_trainer pass `(gm, example_inputs) -> gm` that records, or applies, overlapsat's plan of the
    traced step (see the module docstring). Its name is what graph_trainer logs and `--compile.disable_passes`
    names."""

    __name__ = "overlapsat_pass"

    def __init__(self, store: str = "overlapsat-schedules", *, mode: str = "apply", plans: bool = True,
                 profile: str = "h200", collective_order: str = "group", agree_timeout: float = 1800.0,
                 inline: bool = False) -> None:
        """inline=True where graph_trainer compiles the whole traced graph with Inductor
        (`--compile.inductor_compilation full`): the FX memory model then holds no memory for a pointwise op that
        Inductor computes inside its readers' kernels (decision 87), as `install_fx(inline=True)` does. The
        default suits graph_trainer's regional compilation, which runs most nodes one by one, each allocating
        its output. Give capture and apply the same value: it is part of each graph's fingerprint."""
        if mode not in ("capture", "apply"):
            raise GraphError(f"mode must be 'capture' or 'apply', got {mode!r} (plans are made offline: "
                             "overlapsat solve-cache STORE --plans PROFILE)")
        open_store(store)
        # graph_trainer runs the graph as FX: its node order is the schedule, so nothing needs pinning
        self.fx = FxSchedulePass(store, mode=mode, collective_order=collective_order, profile=profile, pin="none",
                                 agree_timeout=agree_timeout, plans=plans, inline=inline)

    def __call__(self, gm: Any, example_inputs: Any = None, **_: Any) -> Any:
        self.fx(gm.graph)  # never raises: a failure keeps the graph's order, with one warning
        gm.graph.lint()
        gm.recompile()
        return gm


def pipeline(traced_result: Any, config: Any, *, parallel_dims: Any = None, the_pass: TitanPass) -> list[Any]:
    """torchtitan's default passes for `config`, with `the_pass` in the place of its joint transformer-block
    bucketing (or first, where the pipeline has none)."""
    from torchtitan.experiments.graph_trainer.passes import _get_pass_name, construct_default_graph_passes

    passes = list(construct_default_graph_passes(traced_result, config, parallel_dims=parallel_dims))
    names = [_get_pass_name(p) for p in passes]
    if TORCHTITAN_BUCKETING in names:
        passes[names.index(TORCHTITAN_BUCKETING)] = the_pass
    else:
        passes.insert(0, the_pass)
    return passes


def register(name: str = "overlapsat", **options: Any) -> TitanPass:
    """Register the pipeline `name` in graph_trainer's registry (`--compile.pass_pipeline NAME`), its pass
    built from `options` (`TitanPass`'s); returns the pass."""
    try:
        from torchtitan.experiments.graph_trainer.registry import register_pass_pipeline
    except ImportError as e:
        raise GraphError(f"torchtitan's graph_trainer is not importable ({e}): pip install "
                         "'overlapsat[torchtitan]'") from None
    the_pass = TitanPass(**options)

    def overlapsat_pipeline(traced_result: Any, config: Any, *, parallel_dims: Any = None) -> list[Any]:
        return pipeline(traced_result, config, parallel_dims=parallel_dims, the_pass=the_pass)

    register_pass_pipeline(name)(overlapsat_pipeline)
    return the_pass


__all__ = ["TitanPass", "pipeline", "register"]
