"""The plan at equal memory on 2 H200s (issue "plans within the memory a user has"): the table, from the raw files.

    python benchmarks/gpu/equal_memory.py [benchmarks/results/gpu_2026-11-28]
    python benchmarks/gpu/equal_memory.py --verdict   # the newest run of each step: docs/plans.md's verdict

Reads `eq*/results.json` (benchmarks/gpu/e2e_step.py, one process per configuration, `a` first). Per run and
configuration: the median step and its interquartile range over 30 steps (rank 0), the measured peak
(`torch.cuda.max_memory_allocated`, the larger rank) and the predicted one (the graphs' inputs plus the larger
graph peak of the schedules applied, MODEL.md's rule, as `summarize.py` predicts it; `a`: the captured orders;
torch's configurations: their graphs as torch's passes left them, where the run recorded them), NCCL kernels
per profiled step, the loss against `a`'s in the same run, the step against torch bucketed's (c_bkt) and torch's
TBB (tbb_torch) in the same run, and the step over the run's compute floor: `a`'s compute kernels per profiled step on rank 0 (no
collective overlaps them there, so nothing slows them; no step can be shorter on one compute stream).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = {"a": "no reordering (a)", "c_bkt": "torch bucketed (c_bkt)", "tbb_torch": "torch TBB (tbb_torch)",
         "titan_auto": "torchtitan auto_bucketing (titan_auto)",
         "p": "plan, default budget (p)", "p_mem": "plan, budget {r}x (p_mem)", "p_free": "plan, no budget (p_free)",
         "p_co": "coalesced plan, default budget (p_co)", "p_co_mem": "coalesced plan, budget {r}x (p_co_mem)",
         "p_co_free": "coalesced plan, no budget (p_co_free)"}


# fp32 copies of the step's output that the harness's eager loss (`.float().pow(2).mean()` and its backward) holds at
# its peak, beside two 4-B scalars: read off the memory snapshot of `tp2_regather_again_snapshot` (`loss_phase`)
LOSS_COPIES, LOSS_SCALARS = 5, 8


def saved_in(*step_folders: str) -> int | None:
    """What the forward graph leaves for the backward by the FX model: the backward graph's (the one with an
    incoming gradient, `tangents_*`) freeable inputs less that gradient, read from the first plan store kept in
    `step_folders` (`store.tar.gz`, or `second/store.tar.gz` of a step run in two calls). None where none was
    kept."""
    import tarfile
    import tempfile

    from overlapsat import load_graph

    tars = [t for f in step_folders for t in (os.path.join(f, "store.tar.gz"), os.path.join(f, "second", "store.tar.gz"))
            if os.path.exists(t)]
    if not tars:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(tars[0]) as t:
            t.extractall(tmp, filter="data")
        for path in glob.glob(os.path.join(tmp, "**", "*.graph.json"), recursive=True):
            ins = [b for b in load_graph(path).buffers if b.freeable_input]
            if any(b.name.startswith("tangents_") for b in ins):
                return sum(b.size_free for b in ins if not b.name.startswith("tangents_"))
    return None


# what the caller holds before a step beside the graphs' inputs: cuBLAS's workspace, 32 MiB a handle on Hopper
# (torch's default), one handle for the forward's thread and one for autograd's backward thread; no graph counts it
GEMM_WORKSPACES = 2 * 32 * 2**20


def _graphs(d: dict, cfg: str) -> list[dict]:
    """The predicted graphs of `cfg` (its own prediction, else any: each holds the captured order's figures)."""
    return (d.get(f"prediction_{cfg}") or {}).get("graphs") or _any_prediction(d) or []


def primals_bytes(d: dict, cfg: str) -> int | None:
    """The graphs' inputs by the FX model (the forward graph's primals), or None without a prediction."""
    gs = _graphs(d, cfg)
    return max(g.get("primals_bytes") or 0 for g in gs) if gs else None


def step_prediction(d: dict, cfg: str, saved: int | None) -> int | None:
    """The step's peak as the harness runs it, predicted: the graphs' inputs (the FX model's primals) and the GEMM
    workspaces (`GEMM_WORKSPACES`), plus the largest of the phases' figures: each compiled graph read after
    fusion, and between them the harness's eager loss (what the forward left for the backward, `saved`, with
    `LOSS_COPIES` fp32 copies of the output and the scalars; none with the loss in the graph). None where a
    figure is missing."""
    fused, args, primals = _fused_graph_peak(d, cfg), d["meta"]["args"], primals_bytes(d, cfg)
    if fused is None or primals is None:
        return None
    phases = [fused]
    if not args.get("loss_in_graph"):
        if saved is None:
            return None
        phases.append(saved + LOSS_COPIES * 4 * args["seq"] * args["dim"] + LOSS_SCALARS)
    return primals + GEMM_WORKSPACES + max(phases)


def predicted_peak(d: dict, cfg: str) -> int | None:
    """The graphs' inputs (the forward graph's primals) plus the larger graph peak of the schedules `cfg`
    applied (for `a`, the captured orders, recorded beside any plan's prediction; for torch's configurations, their
    graphs as torch's passes left them, recorded by the run since 2026-11-28's third run); None where not
    predicted."""
    ranks = (d["configs"].get(cfg) or {}).get("ranks") or []
    torch_graphs = [t.get("graph") or {} for r in ranks for t in r.get("torch_tbb") or []] if cfg == "tbb_torch" \
        else [gr for r in ranks for gr in r.get("torch_graphs") or []]
    if torch_graphs:  # torch's configurations: each graph as torch's passes left it (e2e_step.graph_peak)
        if any("peak_bytes" not in gr for gr in torch_graphs):
            return None
        return max(gr.get("primals_bytes") or 0 for gr in torch_graphs) + max(gr["peak_bytes"] for gr in torch_graphs)
    if cfg == "a":
        gs, label = _any_prediction(d), "captured"
    else:
        gs, label = (d.get(f"prediction_{cfg}") or {}).get("graphs"), "solved"
    if not gs or any(label not in g for g in gs):  # a graph with no schedule solved (none within the budget)
        return None
    return max(g.get("primals_bytes") or 0 for g in gs) + max(g[label]["peak_bytes"] for g in gs)


def _any_prediction(d: dict) -> list[dict] | None:
    """The graphs of a run's first plan prediction: each holds its captured order's figures, the same in all."""
    return next((v["graphs"] for k, v in d.items() if k.startswith("prediction")), None)


def compute_floor_ms(d: dict) -> float:
    """The run's compute floor (ms): `a`'s compute kernels per profiled step, rank 0, where none overlaps NCCL."""
    ck = d["configs"]["a"]["ranks"][0]["profile"]["compute_kernels"]
    assert ck["fraction_overlapped"] < 0.01, "a's compute overlaps NCCL: not a floor"
    return ck["time_us"] / 1e3


def floors(folder: str) -> str:
    """The page's sentence on the compute floors: each run's, how far above it the steps are, and how much slower
    the compute kernels of the configurations run than `a`'s (beside NCCL)."""
    each, over, slower = [], [], []
    for path in sorted(glob.glob(os.path.join(folder, "eq*", "results.json"))):
        d = json.load(open(path))
        floor = compute_floor_ms(d)
        each.append(f"{os.path.basename(os.path.dirname(path))} {floor:.2f} ms")
        for c, v in d["configs"].items():
            r0 = v["ranks"][0]
            over.append(r0["step_ms_median"] / floor - 1)
            if c != "a":
                slower.append(r0["profile"]["compute_kernels"]["time_us"] / 1e3 / floor)
    return (f"The compute floor of each run (`a`'s compute kernels per profiled step on rank 0, where no "
            f"collective overlaps them): {'; '.join(each)}. Every configuration's step is "
            f"{100 * min(over):.1f}-{100 * max(over):.1f} % above its run's floor, and the other configurations' "
            f"compute kernels take {min(slower):.2f}-{max(slower):.2f} x `a`'s time: beside NCCL they run slower, "
            "so not all of that gap is open to an order.")


def after_fusion_peak(d: dict, cfg: str) -> int | None:
    """`predicted_peak` read after Inductor's fusion: the graphs' inputs plus the larger peak of Inductor's nodes
    in the order it emits them (`after_fusion_peaks`, recorded on rank 0 for overlapsat's configurations, and
    since 2026-11-30's `titan8_loss` for every configuration). Only the last compile's graphs count: a run that
    solves again (`--resolve-rounds`) compiles its graphs again, and the step runs the last compile."""
    fused = _fused_graph_peak(d, cfg)
    return None if fused is None else primals_bytes(d, cfg) + fused


def _fused_graph_peak(d: dict, cfg: str) -> int | None:
    """The larger graph peak of `cfg`'s last compile read after fusion (`after_fusion_peak` less the inputs)."""
    fused = ((d["configs"].get(cfg) or {}).get("ranks") or [{}])[0].get("after_fusion_peaks") or []
    gs = _graphs(d, cfg)
    if not fused or not gs or len(fused) < len(gs):
        return None
    fused = fused[-len(gs):]
    if any(not isinstance(p, (int, float)) for _, p in fused):
        return None
    return max(p for _, p in fused)


def fusion_readings(folder: str) -> str:
    """The page's sentence on the predicted peaks read after fusion, against the FX-level ones."""
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "eq*", "results.json"))):
        d = json.load(open(path))
        for c, v in d["configs"].items():
            fused, fx = after_fusion_peak(d, c), predicted_peak(d, c)
            if fused is not None:
                real = max(r["peak_memory_bytes"] for r in v["ranks"])
                rows.append((fused / real - 1, fx / real - 1 if fx else None, os.path.basename(os.path.dirname(path)),
                             c, fused, real))
    worst = max(rows, key=lambda r: r[1] if r[1] is not None else -1)
    return (f"Read after Inductor's fusion instead (its nodes in the order it emits them, by the same rule: "
            f"`after_fusion_peaks`, which every run recorded for overlapsat's configurations, {len(rows)} rows), "
            f"the predicted peaks are {100 * min(r[0] for r in rows):+.1f} to {100 * max(r[0] for r in rows):+.1f} % "
            f"of measured; {worst[2]}'s `{worst[3]}` reads {worst[4] / 1e9:.3f} GB against {worst[5] / 1e9:.3f} GB "
            f"({100 * worst[0]:+.1f} %), where its FX graph read {100 * worst[1]:+.1f} %.")


def table(folder: str) -> list[str]:
    out = ["| run | configuration | step ms, median (IQR) | vs c_bkt | vs tbb_torch | over the compute floor | "
           "measured peak GB | predicted peak GB (error) | NCCL kernels/step | loss - a's |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for path in sorted(glob.glob(os.path.join(folder, "eq*", "results.json"))):
        d = json.load(open(path))
        args = d["meta"]["args"]
        run = f"{os.path.basename(os.path.dirname(path))} ({'re-gather' if args['regather'] else 'no re-gather'})"
        cfgs = d["configs"]
        med = {c: v["ranks"][0]["step_ms_median"] for c, v in cfgs.items()}
        loss_a = cfgs["a"]["ranks"][0]["loss_compiled"]
        floor = compute_floor_ms(d)
        for c, v in cfgs.items():
            r0 = v["ranks"][0]
            q = statistics.quantiles(r0["step_ms_all"], n=4)
            peak = max(r["peak_memory_bytes"] for r in v["ranks"]) / 1e9
            vs = [f"{100 * (med[c] / med[b] - 1):+.1f} %" if b in med and b != c else "-" for b in ("c_bkt", "tbb_torch")]
            name = NAMES.get(c, c).format(r=args["memory_budget"])
            pred = predicted_peak(d, c)
            guess = f"{pred / 1e9:.3f} ({100 * (pred / 1e9 / peak - 1):+.1f} %)" if pred is not None else "-"
            out.append(f"| {run} | {name} | {med[c]:.2f} ({q[0]:.2f}-{q[2]:.2f}) | {vs[0]} | {vs[1]} | "
                       f"{100 * (med[c] / floor - 1):+.1f} % | {peak:.3f} | "
                       f"{guess} | {r0['profile'].get('nccl_kernel_count', '-')} | {r0['loss_compiled'] - loss_a:+.4f} |")
    return out


def baselines(folder: str, simulated: str) -> list[str]:
    """Why simulation shows a few per cent where the GPUs show more: what torch bucketed gains over the order it
    starts from, on the GPU (against no reordering, `a`, in the same run) and in simulation (against torch's
    reorder-only order of the same graph, from bench_plan's raw table; the 1-D FSDP Llama3-8B graphs)."""
    out = ["| where | run or graph | torch bucketed | its starting order | torch bucketed against it |",
           "| --- | --- | ---: | ---: | ---: |"]
    for path in sorted(glob.glob(os.path.join(folder, "eq*", "results.json"))):
        cfgs = json.load(open(path))["configs"]
        if "a" in cfgs and "c_bkt" in cfgs:
            a, c = (cfgs[k]["ranks"][0]["step_ms_median"] for k in ("a", "c_bkt"))
            out.append(f"| GPU, torch 2.11 | {os.path.basename(os.path.dirname(path))} | {c:.2f} ms | {a:.2f} ms (a) | "
                       f"{100 * (c / a - 1):+.1f} % |")
    with open(simulated, encoding="utf-8") as f:
        for line in f:
            cells = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(cells) == 15 and cells[0].startswith("llama3_8b_L"):  # the 1-D FSDP graphs, as the GPU steps
                reorder, bucketed = float(cells[2].split()[0]), float(cells[3])
                over = ", above the budget or invalid" if "invalid" in cells[2] else ""
                out.append(f"| simulation, torch 2.13 | {cells[0]} | {cells[3]} ms | {reorder:.2f} ms (reorder-only{over}) | "
                           f"{100 * (bucketed / reorder - 1):+.1f} % |")
    return out


def coalesced_verdict(folder: str) -> str:
    """The page's verdict on the coalesced plans (runs of 2026-11-29): per run, each plan that was applied against
    torch bucketed and TBB, its measured peak against torch bucketed's and against its budget (the captured
    order's peak for `p_co`, measured as `a`'s; `p_co_mem`'s ratio of it), and whether it met the issue's GPU
    targets (at no more measured peak than torch bucketed: at least 10 % faster than it, 5 % faster than TBB)."""
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "eq*", "results.json"))):
        d = json.load(open(path))
        cfgs, ratio = d["configs"], d["meta"]["args"]["memory_budget"]
        med = {c: v["ranks"][0]["step_ms_median"] for c, v in cfgs.items()}
        peak = {c: max(r["peak_memory_bytes"] for r in v["ranks"]) for c, v in cfgs.items()}
        run = os.path.basename(os.path.dirname(path))
        for c in ("p_co", "p_co_mem"):
            if c not in cfgs:
                continue
            if not cfgs[c]["ranks"][0]["applied_graphs"]:
                out.append(f"{run}: `{c}` found no plan within its budget ({ratio} x), so Inductor's order ran.")
                continue
            vb, vt = (100 * (med[c] / med[k] - 1) for k in ("c_bkt", "tbb_torch"))
            budget = peak["a"] * (ratio if c == "p_co_mem" else 1.0)
            met = vb <= -10 and vt <= -5 and peak[c] <= peak["c_bkt"]
            out.append(f"{run}: `{c}` {med[c]:.2f} ms, {vb:+.1f} % against torch bucketed and {vt:+.1f} % against "
                       f"TBB, at {peak[c] / 1e9:.3f} GB against torch bucketed's {peak['c_bkt'] / 1e9:.3f} and a "
                       f"budget of {budget / 1e9:.3f} GB ({100 * (peak[c] / budget - 1):+.1f} % of it): the GPU "
                       f"targets {'met' if met else 'missed'}.")
    return " ".join(out)


def requested_peaks(folder: str) -> str:
    """The page's sentence on what the measured peaks are made of: per run, the configurations whose requested
    peak (the bytes tensors asked for, `requested_bytes_peak`) equals torch bucketed's, and how far each of their
    allocated peaks (`max_memory_allocated`) lies above it. At the allocated peak the requested bytes are at most
    their peak, so at least that much of it is the caching allocator's rounding of blocks."""
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "eq*", "results.json"))):
        cfgs = json.load(open(path))["configs"]

        def req(c: str, cfgs: dict = cfgs) -> int:
            return max(r["memory"]["requested_bytes_peak"] for r in cfgs[c]["ranks"])

        same = [c for c in cfgs if abs(req(c) - req("c_bkt")) <= 1]
        if len(same) < 2:
            continue
        over = ", ".join(f"`{c}` {(max(r['peak_memory_bytes'] for r in cfgs[c]['ranks']) - req(c)) / 1e6:.1f}"
                         for c in same)
        out.append(f"{os.path.basename(os.path.dirname(path))}: {', '.join(f'`{c}`' for c in same)} request the "
                   f"same peak, {req('c_bkt'):,} B (to 1 B), and their allocated peaks lie above it by (MB) {over}.")
    return " ".join(out)


def held_before_steps(root: str, since: str = "gpu_2026-11-28", until: str = "gpu_2026-12-01_x2") -> str:
    """The page's sentence on what each configuration held before its timed steps (`allocated_before_steps_bytes`)
    against `a` on the same rank of the same run, over the runs in `root`'s folders from `since` to `until` (the
    last before every configuration called NCCL's barrier first): the bytes above `a` split by whether the
    configuration captured and solved a store (e2e_step's `OURS`, which until 2026-12-01 meant calling
    `dist.barrier()` before the steps)."""
    from benchmarks.gpu.e2e_step import OURS

    held: dict[tuple[bool, int], list[str]] = {}
    runs: set[str] = set()
    for path in sorted(glob.glob(os.path.join(root, "gpu_20*", "*", "results.json"))):
        if not since <= os.path.basename(os.path.dirname(os.path.dirname(path))) <= until:
            continue
        cfgs = json.load(open(path))["configs"]
        if "ranks" not in cfgs.get("a", {}):
            continue
        runs.add(path)
        base = {r["rank"]: r["allocated_before_steps_bytes"] for r in cfgs["a"]["ranks"]}
        for c, x in cfgs.items():
            for r in x.get("ranks", []):
                if r.get("allocated_before_steps_bytes") is not None:
                    key = (c in OURS, r["allocated_before_steps_bytes"] - base[r["rank"]])
                    held.setdefault(key, []).append(c)

    def part(captured: bool) -> str:
        ks = sorted((k for k in held if k[0] == captured), key=lambda k: -len(held[k]))
        total = sum(len(held[k]) for k in ks)
        if len(ks) == 1:
            return f"{total}, every one at {ks[0][1]:+,} B"
        return f"{total}: " + ", ".join(f"{len(held[k])} at {k[1]:+,} B ({', '.join(sorted(set(held[k])))})"
                                        for k in ks)

    span = f"{since.removeprefix('gpu_')[:10]} to {until.removeprefix('gpu_')[:10]}"
    return (f"Over {len(runs)} runs ({span}), the ranks of configurations that captured and solved a store held, before their "
            f"timed steps, against `a` on the same rank: {part(True)}; those of the others: {part(False)}.")


# The newest run of each step the issue asks for (folder/run under benchmarks/results): docs/plans.md's verdict
LATEST = ("gpu_2026-11-28/eq", "gpu_2026-12-01_x2/eq_regather", "gpu_2026-11-30_eq/eqshape_co",
          "gpu_2026-12-01_x2_fill/eqshape_regather", "gpu_2026-11-30_w4/eq_w4", "gpu_2026-11-30_w4/eq_w4_regather",
          "gpu_2026-11-30_w4/eqshape_w4", "gpu_2026-11-28/eqshape_w4_regather", "gpu_2026-11-28/eqshape_w4_tp2",
          "gpu_2026-11-30_w4/eqshape_w4_tp2_regather")
PLANS = ("p", "p_mem", "p_free", "p_co", "p_co_mem", "p_co_free")


def _standing(cfgs: dict) -> tuple[dict, dict, str | None, bool, str | None]:
    """A run's medians (rank 0) and peaks (the larger rank); its fastest plan within torch bucketed's measured
    peak (None: none), whether that plan meets the issue's GPU targets (10 % faster than torch bucketed, 5 % than
    TBB), and its plan under the default budget (None: not run)."""
    med = {c: v["ranks"][0]["step_ms_median"] for c, v in cfgs.items()}
    peak = {c: max(r["peak_memory_bytes"] for r in v["ranks"]) for c, v in cfgs.items()}
    within = [c for c in PLANS if c in cfgs and peak[c] <= peak["c_bkt"]]
    best = min(within, key=lambda c: med[c]) if within else None
    met = best is not None and med[best] / med["c_bkt"] - 1 <= -0.10 and med[best] / med["tbb_torch"] - 1 <= -0.05
    return med, peak, best, met, next((c for c in ("p_co", "p") if c in cfgs), None)


def verdict_table(root: str, runs: tuple[str, ...] = LATEST) -> list[str]:
    """The page's verdict at equal memory, one row per step (its newest run): torch bucketed and TBB; the fastest
    plan configuration whose measured peak is at most torch bucketed's (the issue's target: at least 10 % faster
    than torch bucketed and 5 % faster than TBB there); the plan under the default budget (the captured order's
    peak) against that budget (`a`'s measured peak); and `a`'s compute floor. Medians of rank 0, peaks the larger
    rank's, in GB."""
    out = ["| step | GPUs | run | torch bucketed ms (GB) | TBB ms (GB) | fastest plan within torch bucketed's peak, "
           "ms (GB) | vs torch bucketed | vs TBB | targets | plan at the default budget, ms (GB; budget GB) | "
           "compute floor ms | that plan over the floor |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for run in runs:
        d = json.load(open(os.path.join(root, run, "results.json")))
        args, cfgs = d["meta"]["args"], d["configs"]
        med, peak, best, met, default = _standing(cfgs)
        shape = "8 layers, dim 4096, seq 2048" if args["layers"] == 8 else (
            f"{args['layers']} layers, dim {args['dim']}, seq {args['seq']}")
        par = f"{args['tp']}-way TP x {args['world'] // args['tp']}-way FSDP" if args["tp"] > 1 else "FSDP"
        step = f"{shape}, {par}, {'re-gather' if args['regather'] else 'no re-gather'}"

        def cell(c: str, med: dict = med, peak: dict = peak) -> str:
            return f"{med[c]:.2f} ({peak[c] / 1e9:.3f})"

        floor = compute_floor_ms(d)
        if best is not None:
            vb, vt = (100 * (med[best] / med[k] - 1) for k in ("c_bkt", "tbb_torch"))
            plan = f"{cell(best)} `{best}`"
            vs = f"{vb:+.1f} % | {vt:+.1f} % | {'met' if met else 'missed'}"
            over = f"{100 * (med[best] / floor - 1):+.1f} %"
        else:
            plan, vs, over = "none", "- | - | missed", "-"
        at = f"{cell(default)}; {peak['a'] / 1e9:.3f}) `{default}`".replace(")", "", 1) if default else "-"
        out.append(f"| {step} | {args['world']} | {run.split('/')[0].removeprefix('gpu_')}/{run.split('/')[1]} | "
                   f"{cell('c_bkt')} | {cell('tbb_torch')} | {plan} | {vs} | {at} | {floor:.2f} | {over} |")
    return out


def gpu_summary(root: str, runs: tuple[str, ...] = LATEST) -> str:
    """The page's sentences under the verdict table: on how many steps the targets are met; where no plan is
    within torch bucketed's measured peak, the fastest plan and how far above that peak it is; and the plans
    under the default budget against it (`a`'s measured peak)."""
    met, none, over = [], [], []
    for run in runs:
        d = json.load(open(os.path.join(root, run, "results.json")))
        cfgs, name = d["configs"], run.split("/")[1]
        med, peak, best, ok, default = _standing(cfgs)
        if ok:
            met.append(name)
        if best is None:
            best = min((c for c in PLANS if c in cfgs), key=lambda c: med[c])
            none.append(f"{name} (`{best}` {100 * (med[best] / med['c_bkt'] - 1):+.1f} % and "
                        f"{100 * (med[best] / med['tbb_torch'] - 1):+.1f} %, {(peak[best] - peak['c_bkt']) / 1e6:.1f} MB "
                        "above)")
        if default is not None and peak[default] > peak["a"]:
            over.append(f"{name} `{default}` {peak[default] - peak['a']:,} B")
    return (f"The GPU targets are met on {len(met)} of {len(runs)} steps ({', '.join(met)}). On {len(none)} steps "
            f"no plan measured within torch bucketed's peak; the fastest plan there, against torch bucketed and TBB, "
            f"and above torch bucketed's peak: {'; '.join(none)}. The plans under the default budget measured above "
            f"it (`a`'s measured peak) on {len(over)} of {len(runs)} steps"
            + (f": {'; '.join(over)}." if over else "."))


def predicted_within(root: str, runs: tuple[str, ...] = LATEST) -> str:
    """The page's sentence on the issue's memory target (predicted peak within 5 % of measured) over the rows of
    `runs` that have a prediction at the FX level (`predicted_peak`), and each row outside it."""
    rows = []
    for run in runs:
        d = json.load(open(os.path.join(root, run, "results.json")))
        for c, v in d["configs"].items():
            pred = predicted_peak(d, c)
            if pred is not None:
                real = max(r["peak_memory_bytes"] for r in v["ranks"])
                rows.append((run.split("/")[1], c, 100 * (pred / real - 1)))
    out = [f"{r} `{c}` {e:+.1f} %" for r, c, e in rows if abs(e) > 5]
    return (f"Over the {len(rows)} rows of these runs with a prediction, the predicted peak is within 5 % of "
            f"the measured one on {len(rows) - len(out)}" + (f"; outside it: {', '.join(out)}." if out else "."))


def step_predicted_within(root: str, runs: tuple[str, ...] = LATEST) -> str:
    """The page's sentence on the whole step's prediction (`step_prediction`: the graphs after fusion, their
    inputs, the GEMM workspaces and the harness's eager loss) over the rows of `runs` that have one (a reading
    after fusion and a kept plan store), against the measured peak and the bytes the tensors asked for."""
    rows = []
    for run in runs:
        d = json.load(open(os.path.join(root, run, "results.json")))
        saved = saved_in(os.path.join(root, run))
        for c, v in d["configs"].items():
            pred = step_prediction(d, c, saved)
            if pred is not None:
                real = max(r["peak_memory_bytes"] for r in v["ranks"])
                req = (v["ranks"][0].get("memory") or {}).get("requested_bytes_peak")
                rows.append((run, c, 100 * (pred / real - 1), None if req is None else req - pred))
    out = [f"{r.split('/')[1]} `{c}` {e:+.1f} %" + _replayed(root, r, c) for r, c, e, _ in rows if abs(e) > 5]
    exact = sum(q is not None and 0 <= q <= 1 for *_, q in rows)
    return (f"Predicted for the whole step instead (the graphs read after fusion, their inputs, cuBLAS's two "
            f"workspaces and the harness's eager loss between the graphs: `step_prediction`), {len(rows)} rows of "
            f"these runs have a figure (a reading after fusion and a kept plan store), and it is within 5 % of the "
            f"measured peak on {len(rows) - len(out)} ({min(e for _, _, e, _ in rows):+.1f} to "
            f"{max(e for _, _, e, _ in rows):+.1f} %)" + (f"; outside it: {', '.join(out)}" if out else "")
            + f". Rank 0's tensors asked for the predicted bytes, or those and NCCL's 1-B barrier tensor, on "
            f"{exact} of them.")


def replayed_run(d: dict) -> str | None:
    """The run whose plan store a run applied (`e2e_step.py --store-from`), as a folder under the results
    (`gpu_2026-11-28/eqshape_w4_regather` for `.../gpu_2026-11-28/eqshape_w4_regather/second/store.tar.gz`)."""
    parts = os.path.normpath(d["meta"]["args"].get("store_from") or "").split(os.sep)
    if "results" not in parts:
        return None
    run = parts[parts.index("results") + 1:-1]
    return "/".join(run[:2]) if len(run) >= 2 else None


@functools.cache
def _runs(root: str) -> tuple[tuple[str, dict], ...]:
    """Every run's results.json under `root`, read once (each row a replay may concern reads them all)."""
    return tuple((path, json.load(open(path))) for path in sorted(glob.glob(os.path.join(root, "gpu_*", "*",
                                                                                          "results.json"))))


def _replayed(root: str, run: str, cfg: str) -> str:
    """What a later run applying `run`'s plan store measured for `cfg` (`replayed_run`), as a clause; '' where
    none did."""
    for path, d in _runs(root):
        v = d["configs"].get(cfg)
        if replayed_run(d) != run or not v or "ranks" not in v:
            continue
        folder = os.path.relpath(os.path.dirname(path), root)
        real = v["ranks"][0]["peak_memory_bytes"]
        pred = step_prediction(d, cfg, saved_in(os.path.dirname(path)))
        return (f" (its own plan store, applied by the library of {d['meta']['date']} on one GPU with the fake "
                f"process group, `{folder}`: {real:,} B measured, predicted at {100 * (pred / real - 1):+.1f} %; the "
                f"applied FX graphs had {', '.join(f'{n:,}' for n in v['ranks'][0]['applied_graphs'])} nodes there)")
    return ""


def verdict_file(root: str) -> str:
    """What `python benchmarks/gpu/equal_memory.py --verdict` prints (committed as
    `benchmarks/results/gpu_verdict_2026-12-01.md`, whose figures docs/plans.md quotes)."""
    return "\n".join(["# The plan at equal memory on GPUs: the newest run of each step", "",
                      "Generated by `python benchmarks/gpu/equal_memory.py --verdict` from the runs named in the "
                      "table (`LATEST`).", "", *verdict_table(root), "", gpu_summary(root), "",
                      predicted_within(root), "", step_predicted_within(root), ""])


if __name__ == "__main__":
    sys.path.insert(0, ROOT)  # run as a script: `benchmarks.gpu.e2e_step` from the repository root
    if sys.argv[1:] == ["--verdict"]:
        print(verdict_file(os.path.join(ROOT, "benchmarks", "results")), end="")
        sys.exit(0)
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-28")
    print("\n".join(table(folder)))
    print("\n" + floors(folder))
    print("\n" + fusion_readings(folder))
    print("\n" + coalesced_verdict(folder))
    print("\n" + requested_peaks(folder))
    print("\n" + held_before_steps(os.path.dirname(folder)))
