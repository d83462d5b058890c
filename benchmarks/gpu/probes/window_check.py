"""Was a run's profiler window representative of its timed steps? (#13, benchmarks/results/gpu_runs.md, "Window check")

    python benchmarks/gpu/probes/window_check.py RUN [RUN ...]

The waits on NCCL are read from a profiler window of about 10 steps, the step time from 50 timed ones. Some
windows waited 2-5 times as long as their timed steps imply (runs 28, 43, 46, 49). This measures, per kept
trace, the window's own step time: a step launches the same number of GEMMs in any order (one per GEMM-like
node: 168 in the comparable and re-gather steps), so the first GEMM of each step marks its start, and the
window's step is the median gap between those marks (the first step, which waits for the profiler, left
out). The ratio to the timed median is printed; a ratio above RATIO_LIMIT flags the window.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.kernel_contention import is_gemm  # noqa: E402
from benchmarks.gpu.run_files import trace_kernels  # noqa: E402

GEMMS_PER_STEP = 168  # the 8-layer steps of benchmarks/results/gpu_runs.md (56 in the forward graph, 112 in the backward)
RATIO_LIMIT = 1.0  # fixed 2026-11-24 for runs after 50: normal windows read 0.90-0.99 (runs 2-49)


def window_steps_ms(kernels: list[dict], gemms_per_step: int = GEMMS_PER_STEP) -> list[float]:
    """The window's step times, ms: gaps between the first GEMM launch of consecutive steps (the first gap
    left out). Empty when the GEMM launches are not a whole number of at least three steps."""
    starts = sorted(e["ts"] for e in kernels if is_gemm(e["name"]))
    if not starts or len(starts) % gemms_per_step or len(starts) // gemms_per_step < 3:
        return []
    firsts = starts[::gemms_per_step]
    return [(b - a) / 1000 for a, b in zip(firsts[1:], firsts[2:])]


def check(run: str, gemms_per_step: int = GEMMS_PER_STEP) -> list[dict]:
    """Per configuration with a kept trace: the window's median step against the timed median."""
    with open(os.path.join(run, "results.json"), encoding="utf-8") as f:
        configs = json.load(f)["configs"]
    out = []
    for path in sorted(glob.glob(os.path.join(run, "trace_*.json*"))):
        cfg = os.path.basename(path).split(".")[0][len("trace_"):]
        if cfg not in configs:
            continue
        rank = configs[cfg]["ranks"][0]
        steps = window_steps_ms(trace_kernels(path), gemms_per_step)
        if not steps:
            continue
        ratio = statistics.median(steps) / rank["step_ms_median"]
        out.append({"config": cfg, "window_steps": len(steps), "window_ms": statistics.median(steps),
                    "timed_ms": rank["step_ms_median"], "ratio": ratio, "flagged": ratio > RATIO_LIMIT,
                    "waits_ms": rank.get("profile", {}).get("exposed_comm_us", float("nan")) / 1000})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--gemms-per-step", type=int, default=GEMMS_PER_STEP)
    a = ap.parse_args()
    print("| run | config | window step ms (median) | timed step ms | ratio | waits on NCCL ms | flagged |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for run in a.runs:
        for r in check(run, a.gemms_per_step):
            print(f"| {os.path.relpath(run, ROOT)} | {r['config']} | {r['window_ms']:.2f} | {r['timed_ms']:.2f} | "
                  f"{r['ratio']:.3f} | {r['waits_ms']:.2f} | {'yes' if r['flagged'] else ''} |")


if __name__ == "__main__":
    main()
