"""The plan on real GPUs (#32): the step tables and the transport table, generated from the raw files.

    python benchmarks/gpu/plan_verdict.py [RESULTS_DIR] > benchmarks/results/gpu_plan_verdict.md

Reads every `run*/results.json` and `run*/transport.json` under RESULTS_DIR (default
benchmarks/results/gpu_2026-11-26). Per step run and configuration: the median step, NCCL kernels and waits on
NCCL per profiled step, peak memory, the loss against the unscheduled step's (`a`, in the same run, else in
another run of the same step) and, for overlapsat's configurations, MODEL.md's makespan and the contended
estimate (`simulate_contended`, H200_STEP) of the applied schedules, summed over the step's graphs, against
the measured step.
"""

from __future__ import annotations

import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT = os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-26")
NAMES = {"a": "no reordering", "b_iter": "torch iterative pair", "c_bkt": "torch FX scheduler, bucketing on",
         "c_lc": "c_bkt + copy-engine swap (absent on 2.11: = c_bkt)", "tbb": "TBB buckets, overlapsat order",
         "tbb_torch": "TBB, torch's manual_overlap_bucketing",
         "d": "overlapsat order", "p": "overlapsat plan", "p_mem": "overlapsat plan, memory budget",
         "p_ce": "overlapsat plan, copy-engine all_gathers", "p_co": "overlapsat plan, coalesced buckets"}
PRED = {"d": "prediction", "tbb": "prediction_tbb", "p": "prediction_p", "p_mem": "prediction_p_mem",
        "d_mem": "prediction_d_mem", "p_ce": "prediction_p_ce", "p_co": "prediction_p_co"}


def graphs_by_shape(res: dict, cfg: str) -> dict[tuple, list[dict]]:
    """`cfg`'s predicted graphs by shape (nodes, collectives): a store of several ranks' graphs (runs 56-57 on a
    2-D mesh recorded each rank's under its own group names, decisions.md 48) holds each graph once per rank."""
    by_shape: dict[tuple, list[dict]] = {}
    for g in res.get(PRED.get(cfg, ""), {}).get("graphs", []):
        by_shape.setdefault((g["nodes"], g["collectives"]), []).append(g)
    return by_shape


def predicted(res: dict, cfg: str) -> tuple[float, float] | None:
    """MODEL.md's makespan and the contended estimate of `cfg`'s applied schedules, summed over graphs (ms)."""
    pr = res.get(PRED.get(cfg, ""), {})
    gs = pr.get("graphs", [])
    if not gs or any("solved" not in g for g in gs):
        return None
    by_shape = graphs_by_shape(res, cfg)  # one rank's step: the mean over a shape's copies

    def total(key: str) -> float:
        return sum(sum(g["solved"][key] for g in c) / len(c) for c in by_shape.values()) / 1e3

    return total("makespan_us"), total("contended_makespan_us")


def step_of(res: dict) -> str:
    """The step a run timed: its shape and its ranks."""
    a = res["meta"]["args"]
    name = "re-gather" if a["regather"] else "comparable"
    world, tp = a.get("world", 2), a.get("tp", 1)
    if tp > 1:
        return f"{name}, {tp}-way TP x {world // tp}-way FSDP"
    return name if world == 2 else f"{name}, FSDP x{world}"


def reference_losses(runs: dict[str, dict]) -> dict[str, tuple[str, float]]:
    """Per run: the unscheduled step's loss (`a`) of this run, else of another run of the same step on the same card,
    else torch's bucketed scheduler's (`c_bkt`) likewise. Cards differ in the last bits, so never across cards."""
    def loss(res: dict, cfg: str) -> float | None:
        r = res["configs"].get(cfg, {}).get("ranks")
        return r[0]["loss_compiled"] if r else None

    def key(res: dict) -> tuple[str, str]:
        return step_of(res), res["meta"].get("gpu", "")

    first: dict[tuple, float] = {}  # (step, card, configuration): the first run's loss
    for res in runs.values():
        for cfg in ("a", "c_bkt"):
            if (v := loss(res, cfg)) is not None:
                first.setdefault((*key(res), cfg), v)
    ref: dict[str, tuple[str, float]] = {}
    for run, res in runs.items():
        for cfg in ("a", "c_bkt"):
            mine = loss(res, cfg)
            if (la := mine if mine is not None else first.get((*key(res), cfg))) is not None:
                ref[run] = (cfg, la)
                break
    return ref


def step_rows(runs: dict[str, dict]) -> list[str]:
    out = ["| run | step | configuration | step ms | vs c_bkt | NCCL kernels/step | waits on NCCL ms | peak GB | "
           "loss vs `a` (`c_bkt` where no `a` ran) | graphs applied | predicted ms (plain / contended) | "
           "contended vs measured |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    ref = reference_losses(runs)
    for run, res in runs.items():
        step = step_of(res)
        cfgs = res["configs"]
        base = cfgs.get("c_bkt", {}).get("ranks", [{}])[0].get("step_ms_median")
        for cfg, v in cfgs.items():
            if "ranks" not in v:
                out.append(f"| {run} | {step} | `{cfg}` | error: {v.get('error', '')[:80]} |" + " |" * 9)
                continue
            r = v["ranks"][0]
            prof = r.get("profile", {})
            ms = r["step_ms_median"]
            rc, la = ref.get(run) or ("", None)
            rel = f"{(r['loss_compiled'] - la) / la:+.1e}" + ("" if rc == "a" else f" (vs `{rc}`)") if la else "-"
            pred = predicted(res, cfg)
            applied = r.get("applied_graphs") or []
            n_graphs = len(graphs_by_shape(res, cfg))
            out.append(
                f"| {run} | {step} | `{cfg}` {NAMES.get(cfg, '')} | {ms:.2f} | "
                + (f"{100 * (ms / base - 1):+.1f} %" if base else "-")
                + f" | {prof.get('nccl_kernel_count', '-')} | "
                + f"{(prof.get('waits_on_nccl_median_step_us') or 0) / 1e3:.2f} | "
                + f"{r['peak_memory_bytes'] / 1e9:.2f} | {rel} | "
                + (f"{len(applied)}/{n_graphs}" if cfg in PRED else "-") + " | "
                + (f"{pred[0]:.2f} / {pred[1]:.2f} | {100 * (pred[1] / ms - 1):+.1f} %" if pred else "- | -") + " |")
    return out


def memory_rows(runs: dict[str, dict]) -> list[str]:
    """Budgeted configurations (p_mem, d_mem): each graph's peak in MODEL.md against its budget (the ratio of
    its captured order's peak), and the measured peak against the unscheduled step's in the same run."""
    out = ["| run | configuration | budget | graph | captured peak MB | budget MB | plan's peak MB | within | "
           "measured peak GB (`a` GB) |", "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | --- |"]
    for run, res in runs.items():
        ratio = res["meta"]["args"].get("memory_budget")
        for cfg in ("p_mem", "d_mem"):
            v = res["configs"].get(cfg, {})
            gs = res.get(PRED[cfg], {}).get("graphs", [])
            if "ranks" not in v or not gs:
                continue
            measured = v["ranks"][0]["peak_memory_bytes"] / 1e9
            a = res["configs"].get("a", {}).get("ranks")
            a_peak = f"{a[0]['peak_memory_bytes'] / 1e9:.3f}" if a else "-"
            for g in gs:
                cap, got = g["captured"]["peak_bytes"], g["solved"]["peak_bytes"]
                budget = ratio * cap
                out.append(f"| {run} | `{cfg}` | {ratio}x | {g['file'][:8]} ({g['nodes']} nodes) | {cap / 1e6:.1f} | "
                           f"{budget / 1e6:.1f} | {got / 1e6:.1f} | {'yes' if got <= budget else 'NO'} | "
                           f"{measured:.3f} ({a_peak}) |")
    return out if len(out) > 2 else []


def transport_rows(path: str) -> list[str]:
    t = json.load(open(path, encoding="utf-8"))
    out = [f"Transport ({os.path.relpath(path, ROOT)}; {t['meta']['gpu']}, torch {t['meta']['torch']}, NCCL "
           f"{t['meta']['nccl']}, {t['meta']['world']} ranks):", "",
           "| GEMM (m, k, n) | all_gather output MB | transport | GEMMs | chain alone ms | transfer alone ms | "
           "chain beside ms | GEMM slowdown | pair ms | pair / (chain + transfer) | bus GB/s |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in t["rows"]:
        out.append(f"| {tuple(r['gemm_mnk'])} | {r['size_mb']} | {r['transport']} | {r['gemms']} | "
                   f"{r['gemm_chain_alone_ms']:.3f} | {r['transfer_alone_ms']:.3f} | {r['gemm_chain_beside_ms']:.3f} | "
                   f"{r['gemm_slowdown']:.2f} | {r['pair_ms']:.3f} | "
                   f"{r['pair_ms'] / (r['gemm_chain_alone_ms'] + r['transfer_alone_ms']):.2f} | "
                   f"{r['transfer_busbw_gbs']:.0f} |")
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    d = argv[0] if argv else DEFAULT
    runs = {os.path.basename(os.path.dirname(p)): json.load(open(p, encoding="utf-8"))
            for p in sorted(glob.glob(os.path.join(d, "run*", "results.json")))}
    print("# The plan on real GPUs: generated tables\n")
    print(f"Generated by `python benchmarks/gpu/plan_verdict.py` from {os.path.relpath(d, ROOT)}; "
          "docs/gpu_results.md reads them.\n")
    print("\n".join(step_rows(runs)))
    mem = memory_rows(runs)
    if mem:
        print("\nMemory budgets (MODEL.md's peak per graph, the budget a ratio of the captured order's peak):\n")
        print("\n".join(mem))
    for p in sorted(glob.glob(os.path.join(d, "run*", "transport.json"))):
        print()
        print("\n".join(transport_rows(p)))


if __name__ == "__main__":
    main()
