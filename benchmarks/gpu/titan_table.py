"""torchtitan's Llama3 or DeepSeek-V3 on 2 H200s (issue "torchtitan, for real"): the table, from the raw files.

    python benchmarks/gpu/titan_table.py [RUN ...]   (default: benchmarks/results/gpu_2026-11-30_titan/titan8_h40)
    python benchmarks/gpu/titan_table.py --in-graph RUN ...   (runs with the loss compiled in, side by side)

Reads one `results.json` of `benchmarks/gpu/titan_gpu.sh` (`e2e_step.py --titan 8B` or `--titan dsv3-16B`, each configuration in a
process of its own, `a` first). Per configuration: rank 0's median step and interquartile range, the step against
the faster of torchtitan's two passes (`titan_auto`, `tbb_torch`) in the same run, the step over the compute floor
(`a`'s compute kernels per profiled step on rank 0, where no collective overlaps them), the measured peak
(`torch.cuda.max_memory_allocated`, the larger rank) and its bytes above that pass's, NCCL kernels and the time a
rank waits on NCCL per profiled step, and the loss against `a`'s. A configuration that failed is listed with its
error's last line. Given several runs, one more table sets them side by side: each run's shape and pricing, the
medians, and the plans' margins against the faster pass to two decimals.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.equal_memory import after_fusion_peak, compute_floor_ms, predicted_peak  # noqa: E402

NAMES = {"a": "no overlap pass (a)", "titan_auto": "torchtitan auto_bucketing (titan_auto)",
         "tbb_torch": "torchtitan transformer_block_bucketing (tbb_torch)",
         "p_co": "overlapsat plan, default budget, coalesced (p_co)",
         "p_co_free": "overlapsat plan, no budget, coalesced (p_co_free)"}
PASSES = ("titan_auto", "tbb_torch")
CONFIGS = tuple(NAMES)  # the columns of the tables that set runs side by side
NAMES["p_co_mem"] = "overlapsat plan, a given budget after fusion, coalesced (p_co_mem)"  # decision 86


def load(path: str) -> dict:
    with open(os.path.join(path, "results.json"), encoding="utf-8") as f:
        return json.load(f)


def best_pass(d: dict) -> str:
    """The faster of torchtitan's two passes that ran."""
    ran = [c for c in PASSES if "ranks" in d["configs"].get(c, {})]
    return min(ran, key=lambda c: d["configs"][c]["ranks"][0]["step_ms_median"])


def medians(d: dict) -> dict[str, float]:
    """Rank 0's median step (ms) of each configuration that ran."""
    return {c: v["ranks"][0]["step_ms_median"] for c, v in d["configs"].items() if "ranks" in v}


def measured_peak(d: dict, cfg: str) -> int:
    """`torch.cuda.max_memory_allocated` of a configuration, the larger rank."""
    return max(r["peak_memory_bytes"] for r in d["configs"][cfg]["ranks"])


def lacks(d: dict) -> list[str]:
    """What the table compares against that this run did not run: `a` (the floor, the losses) and one of
    torchtitan's passes (a run of `p_co` alone, e.g. `--resolve-rounds` after the baselines, has neither)."""
    ran = {c for c, v in d["configs"].items() if "ranks" in v}
    return ([] if "a" in ran else ["a"]) + ([] if ran & set(PASSES) else [" or ".join(PASSES)])


def table(path: str) -> list[str]:
    d = load(path)
    cfgs, best = d["configs"], best_pass(d)
    ref = cfgs[best]["ranks"][0]["step_ms_median"]
    ref_peak = measured_peak(d, best)
    a0, floor = cfgs["a"]["ranks"][0], compute_floor_ms(d)
    out = [f"| configuration | step ms, median (IQR) | vs `{best}` | over the compute floor | measured peak GB "
           f"(bytes above `{best}`) | NCCL kernels/step | waits on NCCL ms/step | loss - a's |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c, v in cfgs.items():
        if "ranks" not in v:
            why = [ln for ln in v["error"].splitlines() if "Error:" in ln] or v["error"].strip().splitlines()
            out.append(f"| {NAMES.get(c, c)} | failed: {why[-1].strip()[:110]} | | | | | | |")
            continue
        r0 = v["ranks"][0]
        q = statistics.quantiles(r0["step_ms_all"], n=4)
        med, prof = r0["step_ms_median"], r0["profile"]
        peak = measured_peak(d, c)
        vs = "-" if c == best else f"{100 * (med / ref - 1):+.1f} %"
        out.append(f"| {NAMES.get(c, c)} | {med:.2f} ({q[0]:.2f}-{q[2]:.2f}) | {vs} | {100 * (med / floor - 1):+.1f} % | "
                   f"{peak / 1e9:.3f} ({peak - ref_peak:+,}) | {prof['nccl_kernel_count']} | "
                   f"{prof['waits_on_nccl_median_step_us'] / 1e3:.2f} | {r0['loss_compiled'] - a0['loss_compiled']:+.1e} |")
    return out


def summary(path: str) -> str:
    """The page's sentence: the plan against the faster of torchtitan's passes, and the run's floor."""
    d = load(path)
    best, cfgs = best_pass(d), d["configs"]
    med = medians(d)
    floor = compute_floor_ms(d)
    slow = [v["ranks"][0]["profile"]["compute_kernels"]["time_us"] / 1e3 / floor for c, v in cfgs.items()
            if c != "a" and "ranks" in v]
    plan = "p_co" if "p_co" in med else "p_co_mem" if "p_co_mem" in med else None
    lead = "" if plan is None else (
        f"The plan under {'the default budget' if plan == 'p_co' else 'a given budget after fusion'} (`{plan}`) takes "
        f"{med[plan]:.2f} ms, {100 * (med[plan] / med[best] - 1):+.1f} % against torchtitan's faster pass (`{best}`, "
        f"{med[best]:.2f} ms)")
    return (lead
            + (f"; unbudgeted (`p_co_free`) {100 * (med['p_co_free'] / med[best] - 1):+.1f} %" if "p_co_free" in med
               else "") + (". " if lead else "")
            + f"The compute floor is {floor:.2f} ms, {100 * floor / med['a']:.0f} % of `a`'s step. Beside NCCL the compute "
            f"kernels take {min(slow):.3f}-{max(slow):.3f} x that floor in the configurations that overlap, so part "
            "of what an order hides is paid back in slower kernels.")


def runs(paths: list[str]) -> list[str]:
    """Runs side by side: layers, pricing, each configuration's median (ms) and the plans' margins against the faster
    of torchtitan's passes in the same run, to two decimals (a target of -5 % is not met by -4.96 %)."""
    out = ["| run | layers | pricing | `a` | `titan_auto` | `tbb_torch` | `p_co` | `p_co_free` | "
           "`p_co` vs faster pass | `p_co_free` vs faster pass | NCCL kernels/step: `tbb_torch`, `p_co`, `p_co_free` |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for path in paths:
        d = load(path)
        cfgs, best, args = d["configs"], best_pass(d), d["meta"]["args"]
        med = medians(d)
        nccl = [str(cfgs[c]["ranks"][0]["profile"]["nccl_kernel_count"]) if c in med else "-"
                for c in ("tbb_torch", "p_co", "p_co_free")]
        out.append(f"| {os.path.basename(path)} | {args['layers']} | {os.path.basename(args['profile'])} | "
                   + " | ".join(f"{med[c]:.2f}" if c in med else "not run" for c in CONFIGS)
                   + "".join(f" | {100 * (med[c] / med[best] - 1):+.2f} %" for c in ("p_co", "p_co_free"))
                   + f" | {', '.join(nccl)} |")
    return out


def peaks(paths: list[str]) -> list[str]:
    """Each call's measured peak (`torch.cuda.max_memory_allocated`, the larger rank, the largest configuration)
    beside each configuration's predicted peak and its error: the forward graph's inputs plus the larger graph
    peak, as `equal_memory.predicted_peak` reads it (MODEL.md's rule; `-` where the run holds no prediction)."""
    out = ["| run | measured peak GB | " + " | ".join(f"predicted `{c}` GB (error)" for c in CONFIGS) + " |",
           "| --- | ---: |" + " ---: |" * len(CONFIGS)]
    for path in paths:
        d = load(path)
        ran = {c: v for c, v in d["configs"].items() if "ranks" in v}
        real = max(r["peak_memory_bytes"] for v in ran.values() for r in v["ranks"])
        cells = []
        for c in CONFIGS:
            pred = predicted_peak(d, c) if c in ran else None
            cells.append("not run" if c not in ran else "-" if pred is None
                         else f"{pred / 1e9:.2f} ({100 * (pred / real - 1):+.1f} %)")
        out.append(f"| {os.path.basename(path)} | {real / 1e9:.3f} | " + " | ".join(cells) + " |")
    return out


def unbucketed(d: dict, cfg: str) -> bool:
    """torch's block bucketing left every collective of every graph as it was (titan8_loss: it matched no block
    under the loss's wrapper, fixed before titan8_loss2)."""
    passes = (d["configs"].get(cfg) or {}).get("ranks", [{}])[0].get("torch_tbb") or []
    return bool(passes) and all(t["collectives_after"] == t["collectives_before"] for t in passes)


IN_GRAPH = ("a", "titan_auto", "tbb_torch", "p_co", "p_co_mem", "p_co_free")  # the loss-in-graph calls' columns
PLANS = ("p_co", "p_co_mem", "p_co_free")


def in_graph(paths: list[str]) -> list[str]:
    """Calls whose loss is compiled with the model (`--loss-in-graph`), side by side: each configuration's median
    (ms) and measured peak (GB), and each plan's margin and extra peak against the faster of torchtitan's passes.
    Here the configurations' peaks differ, so the memory is part of the verdict."""
    out = ["| call | model | " + " | ".join(f"`{c}`" for c in IN_GRAPH) + " | plans vs faster pass (peak above it) |",
           "| --- | --- |" + " ---: |" * len(IN_GRAPH) + " --- |"]
    for path in paths:
        d = load(path)
        med, args = medians(d), d["meta"]["args"]
        best = best_pass(d) if any(c in med for c in PASSES) else None
        cells = [f"{med[c]:.2f}, {measured_peak(d, c) / 1e9:.2f}" + (" (did not bucket)" if unbucketed(d, c) else "")
                 if c in med else "-" for c in IN_GRAPH]
        vs = [f"`{c}` {100 * (med[c] / med[best] - 1):+.2f} % ({(measured_peak(d, c) - measured_peak(d, best)) / 1e9:+.3f}"
              " GB)" for c in PLANS if c in med] if best else ["no torchtitan pass ran in this call"]
        out.append(f"| {os.path.basename(path)} | {args['titan']}, {args['layers']} layers | " + " | ".join(cells)
                   + f" | {'; '.join(vs)} |")
    return out


def fused_peaks(paths: list[str]) -> list[str]:
    """Each configuration's peak predicted from its graphs as Inductor emits them (the forward graph's inputs plus
    the larger graph peak after fusion, `equal_memory.after_fusion_peak`), against its own measured peak."""
    out = ["| call | " + " | ".join(f"`{c}`" for c in IN_GRAPH) + " |", "| --- |" + " ---: |" * len(IN_GRAPH)]
    for path in paths:
        d, cells = load(path), []
        ran = medians(d)
        for c in IN_GRAPH:
            pred = after_fusion_peak(d, c) if c in ran else None
            cells.append("-" if pred is None else f"{pred / 1e9:.2f} ({100 * (pred / measured_peak(d, c) - 1):+.1f} %)")
        out.append(f"| {os.path.basename(path)} | " + " | ".join(cells) + " |")
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--in-graph"]:  # the calls with the loss compiled in, side by side (docs/torchtitan.md)
        if not sys.argv[2:]:
            sys.exit("--in-graph: give the runs to set side by side")
        print("\n".join(in_graph(sys.argv[2:])) + "\n\n" + "\n".join(fused_peaks(sys.argv[2:])))
        sys.exit(0)
    wheres = sys.argv[1:] or [os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-30_titan", "titan8_h40")]
    for where in wheres:
        run = load(where)
        if missing := lacks(run):
            sys.exit(f"{where}: no table: the run lacks {' and '.join(missing)}, which the table compares against "
                     f"(it ran {', '.join(run['configs'])})")
        print(f"{where}:\n" if len(wheres) > 1 else "", end="")
        print("\n".join(table(where)))
        print("\n" + summary(where) + "\n")
    if len(wheres) > 1:
        print("\n".join(runs(wheres)))
        print("\n" + "\n".join(peaks(wheres)))
