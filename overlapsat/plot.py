"""Timeline pictures: compute and communication lanes, stalls, and the memory curve.

Several schedules are stacked on one time axis so the difference shows at a
glance. Boxes thinner than a pixel are merged with their neighbours, so graphs
of thousands of nodes stay readable and fast to draw.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from overlapsat.budget import BudgetLike, resolve_budget
from overlapsat.errors import GraphError
from overlapsat.graph import COLLECTIVE, COMPUTE, WAIT, Graph
from overlapsat.io import STDOUT, check_writable, write_target
from overlapsat.simulate import SimResult, simulate

COLORS = {"compute": "#4C72B0", "stall": "#DD3333", "comm": ["#55A868", "#C44E52", "#8172B2", "#CCB974", "#64B5CD"]}


def _merge(boxes: list[tuple[float, float]], px: float) -> list[tuple[float, float]]:
    """Merge runs of sub-pixel boxes (start, width) that touch within a pixel."""
    out: list[tuple[float, float]] = []
    for s, w in sorted(boxes):
        if out and w < px and out[-1][1] < px * 4 and s - (out[-1][0] + out[-1][1]) < px:
            ps, pw = out[-1]
            out[-1] = (ps, max(pw, s + w - ps))
        else:
            out.append((s, w))
    return out


def _binned(boxes: list[tuple[float, float]], px: float) -> list[tuple[float, float, float]]:
    """Per pixel-wide bin of time, the share of it that `boxes` cover: (bin start, width, share). Drawn as a bar
    of that share of the lane's height, the red area stays proportional to the stalled time at any zoom (a
    sub-pixel box drawn whole would look as wide as a pixel)."""
    share: dict[int, float] = {}
    for s, w in boxes:
        end, b = s + w, int(s // px)
        while b * px < end:
            lo, hi = max(s, b * px), min(end, (b + 1) * px)
            share[b] = share.get(b, 0.0) + (hi - lo) / px
            b += 1
    return [(b * px, px, min(1.0, f)) for b, f in sorted(share.items())]


def bucket_label(k: int, bucket: Any, op: str | None) -> str:
    """A plan panel's legend entry for bucket `k`: its member count, kind and members (the first six, then a
    count)."""
    more = f" +{len(bucket.members) - 6} more" if len(bucket.members) > 6 else ""
    return f"B{k}: {len(bucket.members)} x {op}: {', '.join(bucket.members[:6])}{more}"


def plot_timeline(graph: Graph, schedules: Sequence[tuple[Any, ...]] | Sequence[int | str],
                  path: str | os.PathLike[str], *, memory_budget: BudgetLike = None, width_px: int = 1600,
                  dpi: int = 100) -> str:
    """Draw one or more schedules of `graph` to `path` (.png or .svg); returns the path.

    Each schedule is (label, order), or (label, order, bucketed graph, buckets) for a plan: its panel draws the
    bucketed graph, each merged transfer hatched and numbered, and a legend names each bucket's members."""
    memory_budget = resolve_budget(graph, memory_budget)
    if os.fspath(path) == STDOUT:
        raise GraphError("a timeline is a picture: give a file name (.png or .svg), not '-'")
    check_writable(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch, Rectangle
    except ImportError as e:  # optional dependency
        raise GraphError("plotting needs matplotlib: pip install 'overlapsat[plot]'") from e
    if schedules and not isinstance(schedules[0], tuple):
        schedules = [("schedule", schedules)]  # type: ignore[list-item]
    panels = [(item[0], item[1], item[2] if len(item) > 2 else graph, tuple(item[3]) if len(item) > 3 else ())
              for item in schedules]  # type: ignore[index]
    sims: list[tuple[str, SimResult]] = [(label, simulate(h, order)) for label, order, h, _ in panels]
    if not sims:
        raise GraphError("plot_timeline: no schedule to draw")
    horizon = max(s.makespan for _, s in sims) or 1.0
    px = horizon / width_px
    lanes = ["compute", *graph.groups]
    n = len(sims)
    fig_h = n * (0.45 * len(lanes) + 1.6) + 0.6
    fig, axes = plt.subplots(2 * n, 1, figsize=(width_px / dpi, fig_h), dpi=dpi, sharex=True,
                             gridspec_kw={"height_ratios": [max(1.0, 0.5 * len(lanes)), 1.0] * n})
    for k, (label, sim) in enumerate(sims):
        ax, axm = axes[2 * k], axes[2 * k + 1]
        h, buckets = panels[k][2], panels[k][3]  # the panel's own graph: a plan's is bucketed
        lane = [lanes.index(gname) - 1 if gname in lanes else 0 for gname in h.groups]  # by group id
        comp: list[tuple[float, float]] = []
        stalls: list[tuple[float, float]] = []
        comm: dict[int, list[tuple[float, float]]] = {}
        for v in range(len(h.nodes)):
            kind = h.kind[v]
            if kind == COMPUTE and h.dur[v] > 0:
                comp.append((sim.start[v], h.dur[v]))
            elif kind == COLLECTIVE:
                comm.setdefault(h.group_id[v], []).append((sim.start[v], h.dur[v]))
                if h.launch[v] > 0:  # its launch is compute-stream work (decisions.md 17)
                    comp.append((sim.issue[v], h.launch[v]))
            elif kind == WAIT:
                if sim.stall[v] > 0:
                    stalls.append((sim.start[v], sim.stall[v]))
                if h.dur[v] > 0:
                    comp.append((sim.start[v] + sim.stall[v], h.dur[v]))
        y = len(lanes) - 1
        ax.broken_barh(_merge(comp, px), (y - 0.4, 0.8), facecolors=COLORS["compute"], linewidth=0)
        for x0, w, f in _binned(stalls, px):  # to scale: height = the bin's stalled share
            ax.add_patch(Rectangle((x0, y - 0.4), w, 0.8 * f, facecolor=COLORS["stall"], linewidth=0))
        for gi, boxes in comm.items():
            li = lane[gi]
            ax.broken_barh(_merge(boxes, px), (y - 1 - li - 0.35, 0.7), linewidth=0.3, edgecolor="white",
                           facecolors=COLORS["comm"][li % len(COLORS["comm"])])
        named = []
        for bi, b in enumerate(buckets):  # each merged transfer hatched and numbered, its members in the legend
            if b.name not in h.index:
                continue
            c = h.index[b.name]
            li = lane[h.group_id[c]]
            ax.add_patch(Rectangle((sim.start[c], y - 1 - li - 0.35), h.dur[c], 0.7, fill=False, hatch="////",
                                   edgecolor="#222222", linewidth=0.6))
            if h.dur[c] > 12 * px:
                ax.text(sim.start[c] + h.dur[c] / 2, y - 1 - li, f"B{bi}", ha="center", va="center", fontsize=6)
            named.append(bucket_label(bi, b, h.nodes[c].op))
        if named:
            shown = named[:12] + ([f"... and {len(named) - 12} more buckets"] if len(named) > 12 else [])
            ax.legend(handles=[Patch(fill=False, hatch="////", edgecolor="#222222", label=t) for t in shown],
                      loc="upper right", bbox_to_anchor=(1, -0.02), ncol=min(3, len(shown)), fontsize=6,
                      frameon=False, title="buckets (merged transfers)", title_fontsize=7)
        if len(h.coll_seq) <= 200:  # link collectives to their waits where it stays legible
            for c in h.coll_seq:
                w = h.wait_of[c]
                if w >= 0:
                    ax.plot([sim.end[c], sim.end[w]], [y - 1 - lane[h.group_id[c]] + 0.35, y - 0.4],
                            color="#777777", linewidth=0.4, alpha=0.6)
        if k == 0 and not buckets:
            handles = [Patch(color=COLORS["compute"], label="compute"),
                       Patch(color=COLORS["stall"], label="stall: a wait idles the stream (bar height = share of time)"),
                       *(Patch(color=COLORS["comm"][gi % len(COLORS["comm"])], label=f"transfer, group {g}")
                         for gi, g in enumerate(h.groups))]
            if len(h.coll_seq) <= 200:
                handles.append(Line2D([], [], color="#777777", linewidth=0.8, label="transfer end to its wait"))
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.02), ncol=min(4, len(handles)),
                      fontsize=7, frameon=False)
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels(list(reversed(lanes)))
        ax.set_ylim(-0.7, len(lanes) - 0.3)
        ax.set_title(f"{label}: makespan {sim.makespan:.1f} us, exposed {sim.exposed:.1f} us "
                     f"({100 * sim.exposed_fraction:.1f}%), peak {sim.peak_memory / 2**20:.1f} MiB",
                     loc="left", fontsize=9)
        # memory per step, placed at each node's issue time
        xs, ys = [], []
        for step, v in enumerate(sim.order):
            xs.append(sim.issue[v])
            ys.append(sim.mem_post_alloc[step] / 2**20)
        axm.step(xs, ys, where="post", color="#444444", linewidth=0.8)
        if memory_budget is not None:
            axm.axhline(memory_budget / 2**20, color=COLORS["stall"], linestyle="--", linewidth=0.8, label="budget")
            axm.legend(loc="upper right", fontsize=7)
        axm.set_ylabel("MiB", fontsize=8)
        axm.tick_params(labelsize=7)
    axes[-1].set_xlabel("time (us)")
    axes[-1].set_xlim(0, horizon * 1.01)
    fig.tight_layout()
    path = os.fspath(path)
    target = write_target(path)  # a link is written through, as by io
    tmp = target + ".tmp" + os.path.splitext(path)[1]
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, target)
    except OSError as e:  # the user's path, not our temporary file
        raise GraphError(f"cannot write {path!r}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
