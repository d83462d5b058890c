"""Where a plan's step time goes, by kernel class: run 85 (the re-gather step's -10 % miss, #32).

    python benchmarks/gpu/probes/kernel_classes.py RUN CFG [CFG ...]

RUN holds e2e_step.py's output with the kept traces of each CFG (`--keep-traces`). Per profiled step, each
class's kernel time on the compute stream and the share of it that ran while some NCCL kernel ran, beside
the plan's bucket copies as MODEL.md prices them (before contention). Classes by kernel name: NCCL, GEMMs
(cuBLAS's `nvjet`), attention (cuDNN), **Triton kernels whose name holds no op** (`triton_poi_fused`,
`triton_for_fused`, `triton_poi_fused_view`: Inductor's kernels for pure copies, which here are the buckets'
copy-in and copy-out; the order alone launches none), other Triton, the rest. The step count is the GEMM
launches over the GEMM-like nodes of one step's stored graphs.
"""

from __future__ import annotations

import collections
import json
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.kernel_contention import kind_of  # noqa: E402
from benchmarks.gpu.run_files import run_trace, stored_schedules, trace_kernels, unpack_store  # noqa: E402
from benchmarks.gpu.trace_stats import overlap_with, union  # noqa: E402

CLASSES = ("gemm", "attention", "copy (Triton, no op)", "other Triton", "other")
_COPY = re.compile(r"triton_(poi|for)_fused(_view)?(_\d+)?$")


def kernel_class(name: str) -> str:
    """One of CLASSES, or "nccl": NCCL, attention and GEMMs as `kernel_contention.kind_of` names them (GEMMs of
    every length together), the rest split by Inductor's kernel names."""
    kind = kind_of(name, 0.0)
    if kind in ("nccl", "attention"):
        return kind
    if kind.startswith("gemm"):
        return "gemm"
    if _COPY.match(name):
        return "copy (Triton, no op)"
    return "other Triton" if name.startswith("triton") else "other"


def by_class(kernels: list[dict], steps: int) -> dict[str, tuple[float, float, float]]:
    """Per class: ms per step, the share of it under NCCL, launches per step (NCCL: its busy time, share 1)."""
    nccl = union([(k["ts"], k["ts"] + k["dur"]) for k in kernels if kernel_class(k["name"]) == "nccl"])
    acc: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for k in kernels:
        c = kernel_class(k["name"])
        if c == "nccl":
            continue
        a = acc[c]
        a[0] += k["dur"]
        a[1] += overlap_with(k["ts"], k["ts"] + k["dur"], nccl)
        a[2] += 1
    out = {c: (a[0] / 1e3 / steps, a[1] / a[0] if a[0] else 0.0, a[2] / steps) for c, a in acc.items()}
    out["nccl"] = (sum(e - s for s, e in nccl) / 1e3 / steps, 1.0,
                   sum(kernel_class(k["name"]) == "nccl" for k in kernels) / steps)
    return out


def store_figures(run: str, cfg: str, profile: str) -> tuple[int, float]:
    """GEMM-like nodes per step, and the bucket copies' price per step (ms) in the stored plan, by `profile`."""
    from overlapsat.cost import cost_model
    from overlapsat.plan import materialize

    gemms, copies, price = 0, 0.0, cost_model(profile).duration
    with tempfile.TemporaryDirectory() as d:
        unpack_store(os.path.join(run, "store.tar.gz"), d)
        for _fp, g, sched, _why in stored_schedules(os.path.join(d, "store", cfg), "group"):
            gemms += sum(1 for nd in g.nodes if nd.gemm_like)
            if sched is not None and sched.buckets:
                b = materialize(g.relaxed("group"), sched.plan.buckets, price)
                copies += sum(nd.duration for nd in b.nodes if nd.op in ("bucket_copy_in", "bucket_copy_out"))
    return gemms, copies / 1e3


def table(run: str, cfgs: list[str]) -> str:
    res = json.load(open(os.path.join(run, "results.json"), encoding="utf-8"))
    profile = res["meta"]["args"]["profile"]
    if not os.path.isabs(profile) and os.path.exists(os.path.join(ROOT, profile)):
        profile = os.path.join(ROOT, profile)
    rows = ["| configuration | step ms | " + " | ".join(f"{c} ms (share under NCCL)" for c in CLASSES)
            + " | compute kernels ms | NCCL busy ms | bucket copies as MODEL.md prices them, ms |",
            "| --- | ---: | " + " | ".join("---:" for _ in CLASSES) + " | ---: | ---: | ---: |"]
    for cfg in cfgs:
        ks = trace_kernels(run_trace(run, cfg))
        gemms, copies = store_figures(run, cfg, profile)
        launches = sum(kernel_class(k["name"]) == "gemm" for k in ks)
        if not gemms or launches % gemms:
            raise SystemExit(f"{run} {cfg}: {launches} GEMM launches are not whole steps of {gemms}")
        fig = by_class(ks, launches // gemms)
        step = res["configs"][cfg]["ranks"][0]["step_ms_median"]
        cells = [f"{fig[c][0]:.2f} ({fig[c][1]:.2f})" if c in fig else "-" for c in CLASSES]
        compute = sum(fig[c][0] for c in CLASSES if c in fig)
        rows.append(f"| `{cfg}` | {step:.2f} | " + " | ".join(cells)
                    + f" | {compute:.2f} | {fig['nccl'][0]:.2f} | {copies:.2f} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        raise SystemExit(__doc__)
    print(table(argv[0], argv[1:]), end="")


if __name__ == "__main__":
    main()
