"""Run torch's own reordering passes on live scheduler nodes, for comparison with the ports.

Used inside a capture hook: `reference_orders(snodes, graph)` returns, for each
pass and knob set, the order torch produces with the graph's durations as
runtime estimates. `port_orders(graph)` computes the same with overlapsat's
ports; the two must agree node for node.
"""

from __future__ import annotations

from typing import Any

from overlapsat.graph import Graph
from overlapsat.heuristics import (
    IterativeConfig,
    raise_comms,
    reorder_communication_preserving_peak_memory,
    reorder_compute_for_overlap,
    reorder_for_peak_memory,
    sink_waits,
    sink_waits_iterative,
    topological_sort_bfs,
    topological_sort_dfs,
    topological_sort_lpmf,
)

# knob sets: overlapsat IterativeConfig fields (torch's config_comms names are derived below)
KNOBS: dict[str, dict[str, Any]] = {
    "default": {},
    "budget0": {"peak_memory_budget": 0.0},
    "runtime": {"use_runtime_estimations": True},
    "runtime_budget0_mult1": {"use_runtime_estimations": True, "peak_memory_budget": 0.0, "comm_mult": 1.0},
    "safe": {"unsafe_collectives_reorder": False},
}


def _torch_knobs(kind: str, knobs: dict[str, Any]) -> dict[str, Any]:
    pre = "reorder_iterative" if kind == "reorder" else "sink_iterative"
    names = {
        "peak_memory_budget": f"{pre}_peak_memory_budget",
        "use_runtime_estimations": f"{pre}_use_runtime_estimations",
        "extra_comm_comp_overlap": f"{pre}_extra_comm_comp_overlap",
        "unsafe_collectives_reorder": "reorder_iterative_unsafe_collectives_reorder" if kind == "reorder"
        else "sink_waits_iterative_unsafe_collectives_reorder",
        "with_collectives": "reorder_iterative_group_with_collectives" if kind == "reorder"
        else "sink_waits_iterative_swap_with_collectives",
        "comm_mult": "reorder_sink_runtime_estimations_comm_mult",
        "non_comm_mult": "reorder_sink_runtime_estimations_non_comm_mult",
    }
    return {names[k]: v for k, v in knobs.items()}


def reference_orders(snodes: list[Any], graph: Graph) -> dict[str, Any]:
    """torch's orders (node names) for every pass and knob set, and its peak memory."""
    import torch._inductor.config as icfg
    import torch._inductor.config_comms as ccfg
    from torch._inductor import comms, memory
    from torch._inductor.utils import OrderedSet
    from torch._inductor.virtualized import V

    sched = V.graph.scheduler
    inputs = OrderedSet(V.graph.graph_inputs.keys())
    outputs = OrderedSet(V.graph.get_output_names())
    # torch decides on its own raw estimates when the graph carries them (the ports then do too)
    dur = {nd.name: nd.estimate if nd.estimate is not None else nd.duration for nd in graph.nodes}
    nodes = list(snodes)
    # re-index memory planning info to this order (the sorts tie-break on it)
    _, freeable = memory.prepare_planning_info(nodes, sched.name_to_buf, sched.name_to_fused_node, inputs, outputs)
    names = lambda xs: [x.get_name() for x in xs]  # noqa: E731
    out: dict[str, Any] = {"peak_memory": memory.estimate_peak_memory_allocfree(nodes, freeable, outputs)[0]}
    with icfg.patch(estimate_op_runtime=lambda s: dur[s.get_name()]):
        out["sink_waits"] = names(comms.sink_waits(list(nodes)))
        out["raise_comms"] = names(comms.raise_comms(list(nodes)))
        out["reorder_compute_for_overlap"] = names(comms.reorder_compute_for_overlap(list(nodes)))
        for knob, kw in KNOBS.items():
            with ccfg.patch(_torch_knobs("reorder", kw)):
                out[f"reorder_iterative[{knob}]"] = names(
                    comms._reorder_communication_preserving_peak_memory_internal(list(nodes))[0])
            with ccfg.patch(_torch_knobs("sink", kw)):
                out[f"sink_waits_iterative[{knob}]"] = names(comms._sink_waits_iterative_internal(list(nodes))[0])
    out["lpmf"] = names(memory.topological_sort_lpmf(nodes, freeable, sched.name_to_buf, outputs))
    out["bfs"] = names(memory.topological_sort_bfs(nodes))
    out["dfs"] = names(memory.topological_sort_dfs(nodes))
    out["reorder_for_peak_memory"] = names(memory.reorder_for_peak_memory(
        nodes, sched.name_to_buf, sched.name_to_fused_node, inputs, outputs))
    return out


def port_orders(graph: Graph) -> dict[str, list[str]]:
    """The same table from overlapsat's ports, on the imported graph's input order."""
    g = graph
    nm = lambda r: [g.names[i] for i in r.order]  # noqa: E731
    out = {
        "sink_waits": nm(sink_waits(g)),
        "raise_comms": nm(raise_comms(g)),
        "reorder_compute_for_overlap": nm(reorder_compute_for_overlap(g)),
        "lpmf": nm(topological_sort_lpmf(g)),
        "bfs": nm(topological_sort_bfs(g)),
        "dfs": nm(topological_sort_dfs(g)),
        "reorder_for_peak_memory": nm(reorder_for_peak_memory(g)),
    }
    for knob, kw in KNOBS.items():
        cfg = IterativeConfig(**kw)
        out[f"reorder_iterative[{knob}]"] = nm(reorder_communication_preserving_peak_memory(g, None, cfg))
        out[f"sink_waits_iterative[{knob}]"] = nm(sink_waits_iterative(g, None, cfg))
    return out
