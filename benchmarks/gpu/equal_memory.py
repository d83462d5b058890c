"""The plan at equal memory on 2 H200s (issue "plans within the memory a user has"): the table, from the raw files.

    python benchmarks/gpu/equal_memory.py [benchmarks/results/gpu_2026-11-28]

Reads `eq*/results.json` (benchmarks/gpu/e2e_step.py, one process per configuration, `a` first). Per run and
configuration: the median step and its interquartile range over 30 steps (rank 0), the measured peak
(`torch.cuda.max_memory_allocated`, the larger rank) and the predicted one (the graphs' inputs plus the larger
graph peak of the schedules applied, MODEL.md's rule, as `summarize.py` predicts it; `a`: the captured orders;
torch's configurations run graphs overlapsat does not store, so none), NCCL kernels per profiled step, the loss
against `a`'s in the same run, and the step against torch bucketed's (c_bkt) and torch's TBB (tbb_torch) in the
same run.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = {"a": "no reordering (a)", "c_bkt": "torch bucketed (c_bkt)", "tbb_torch": "torch TBB (tbb_torch)",
         "p": "plan, default budget (p)", "p_mem": "plan, budget {r}x (p_mem)", "p_free": "plan, no budget (p_free)"}


def predicted_peak(d: dict, cfg: str) -> int | None:
    """The graphs' inputs (the forward graph's primals) plus the larger graph peak of the schedules `cfg`
    applied (for `a`, the captured orders, recorded beside any plan's prediction); None where not predicted."""
    if cfg == "a":
        gs = next((v["graphs"] for k, v in d.items() if k.startswith("prediction")), None)
        label = "captured"
    else:
        gs, label = (d.get(f"prediction_{cfg}") or {}).get("graphs"), "solved"
    if not gs:
        return None
    return max(g.get("primals_bytes") or 0 for g in gs) + max(g[label]["peak_bytes"] for g in gs)


def table(folder: str) -> list[str]:
    out = ["| run | configuration | step ms, median (IQR) | vs c_bkt | vs tbb_torch | measured peak GB | "
           "predicted peak GB (error) | NCCL kernels/step | loss - a's |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for path in sorted(glob.glob(os.path.join(folder, "eq*", "results.json"))):
        d = json.load(open(path))
        args = d["meta"]["args"]
        run = f"{os.path.basename(os.path.dirname(path))} ({'re-gather' if args['regather'] else 'no re-gather'})"
        cfgs = d["configs"]
        med = {c: v["ranks"][0]["step_ms_median"] for c, v in cfgs.items()}
        loss_a = cfgs["a"]["ranks"][0]["loss_compiled"]
        for c, v in cfgs.items():
            r0 = v["ranks"][0]
            q = statistics.quantiles(r0["step_ms_all"], n=4)
            peak = max(r["peak_memory_bytes"] for r in v["ranks"]) / 1e9
            vs = [f"{100 * (med[c] / med[b] - 1):+.1f} %" if b in med and b != c else "-" for b in ("c_bkt", "tbb_torch")]
            name = NAMES.get(c, c).format(r=args["memory_budget"])
            pred = predicted_peak(d, c)
            guess = f"{pred / 1e9:.3f} ({100 * (pred / 1e9 / peak - 1):+.1f} %)" if pred is not None else "-"
            out.append(f"| {run} | {name} | {med[c]:.2f} ({q[0]:.2f}-{q[2]:.2f}) | {vs[0]} | {vs[1]} | {peak:.3f} | "
                       f"{guess} | {r0['profile'].get('nccl_kernel_count', '-')} | {r0['loss_compiled'] - loss_a:+.4f} |")
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "benchmarks", "results",
                                                                           "gpu_2026-11-28"))))
