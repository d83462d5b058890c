"""Per-kernel contention in a profiled step, and whether pricing GEMMs by size changes overlapsat's order.

    python benchmarks/gpu/kernel_contention.py RUN [RUN ...]
    python benchmarks/gpu/kernel_contention.py --objective RUN

A RUN is a directory of benchmarks/gpu/e2e_step.py's output with (d)'s trace (`trace_d.json.xz` or `.gz`).
Per kernel (its name and grid), the median duration of its launches that overlap no NCCL kernel (under 5 %
of their time) against those that overlap NCCL for over 90 % of theirs: the slowdown each kind of kernel
suffers in the step, where `interference.py`'s pairs measured it in isolation. Kernels are put in four
classes: GEMMs under 150 us alone (one wave of a persistent kernel), longer GEMMs, attention, the rest.

`--objective` reads the run's stored graphs and (d)'s orders, prices GEMM-like nodes by size
(`Interference.gemm_slowdown`, H200_GEMM_PAIRS: the isolated pairs) and asks whether a local search
(`polish_contended`, every move of a collective or wait by 1 to 40 places) shortens the contended makespan.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import glob
import json
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import run_trace, trace_kernels, unpack_store  # noqa: E402

ALONE, OVERLAPPED = 0.05, 0.90  # fraction of a launch's time under NCCL


def kind_of(name: str, alone_us: float) -> str:
    n = name.lower()
    if "nccl" in n:
        return "nccl"
    if any(k in n for k in ("sdpa", "flash", "fmha", "attention", "cudnn")):
        return "attention"
    if any(k in n for k in ("nvjet", "gemm", "cutlass", "sm90_xmma", "cublas")):
        return "gemm, one wave" if alone_us < 150 else "gemm, longer"
    return "other"


def per_kernel(kernels: list[dict]) -> list[dict]:
    """One row per (kernel name, grid) with at least 3 launches alone and 3 overlapped, from a trace's kernel
    events (`run_files.trace_kernels`)."""
    ev = [e for e in kernels if e.get("dur", 0) > 0]
    from benchmarks.gpu.e2e_step import union

    nccl = union([(e["ts"], e["ts"] + e["dur"]) for e in ev if "nccl" in e["name"].lower()])  # disjoint
    starts = [a for a, _ in nccl]

    def covered(a: float, b: float) -> float:
        i = max(0, bisect.bisect_right(starts, a) - 1)
        t = 0.0
        while i < len(nccl) and nccl[i][0] < b:
            t += max(0.0, min(b, nccl[i][1]) - max(a, nccl[i][0]))
            i += 1
        return t

    by: dict[tuple[str, str], tuple[list[float], list[float]]] = collections.defaultdict(lambda: ([], []))
    for e in ev:
        if "nccl" in e["name"].lower():
            continue
        f = covered(e["ts"], e["ts"] + e["dur"]) / e["dur"]
        key = (e["name"], str(e.get("args", {}).get("grid")))
        if f < ALONE:
            by[key][0].append(e["dur"])
        elif f > OVERLAPPED:
            by[key][1].append(e["dur"])
    rows = []
    for (name, grid), (alone, over) in by.items():
        if len(alone) >= 3 and len(over) >= 3:
            a, o = statistics.median(alone), statistics.median(over)
            rows.append({"kernel": name, "grid": grid, "alone_us": a, "overlapped_us": o, "slowdown": o / a,
                         "n_alone": len(alone), "n_overlapped": len(over), "class": kind_of(name, a),
                         "extra_us": (o - a) * len(over)})
    return sorted(rows, key=lambda r: -r["extra_us"])


def by_class(rows: list[dict]) -> dict[str, dict]:
    """Per class: the slowdown weighted by overlapped time, and the extra time it cost in the profiled steps."""
    out: dict[str, dict] = {}
    for r in rows:
        c = out.setdefault(r["class"], {"alone_us": 0.0, "overlapped_us": 0.0, "extra_us": 0.0, "kernels": 0})
        c["alone_us"] += r["alone_us"] * r["n_overlapped"]
        c["overlapped_us"] += r["overlapped_us"] * r["n_overlapped"]
        c["extra_us"] += r["extra_us"]
        c["kernels"] += 1
    for c in out.values():
        c["slowdown"] = c["overlapped_us"] / c["alone_us"]
    return out


def objective(run: str, other: float) -> list[dict]:
    from overlapsat import load_graph
    from overlapsat.cost.interference import H200_GEMM_PAIRS, H200_STEP, Interference, simulate_contended
    from overlapsat.cost.polish import polish_contended
    from overlapsat.simulate import simulate

    kern = Interference(other, H200_STEP.comm_slowdown, H200_GEMM_PAIRS)
    out = []
    with tempfile.TemporaryDirectory() as d:
        unpack_store(os.path.join(run, "store.tar.gz"), d)
        for f in sorted(glob.glob(os.path.join(d, "store", "d", "*.graph.json"))):
            g = load_graph(f)
            with open(f.replace(".graph.json", ".schedule.json"), encoding="utf-8") as fh:
                order = json.load(fh)["order"]
            r = polish_contended(g, order, kern, max_evaluations=20000)
            out.append({"graph": os.path.basename(f), "nodes": len(g.nodes), "plain_us": simulate(g, order).makespan,
                        "one_factor_us": simulate_contended(g, order, H200_STEP).makespan,
                        "by_size_us": r.contended_before, "polished_us": r.contended_after, "moves": r.moves,
                        "evaluated": r.evaluated})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--objective", action="store_true")
    ap.add_argument("--other", type=float, default=1.25, help="the slowdown of compute that is not a GEMM")
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    for run in a.runs:
        print(f"## {run}")
        if a.objective:
            for r in objective(run, a.other):
                print(json.dumps(r))
            continue
        rows = per_kernel(trace_kernels(run_trace(run)))
        print("| kernel | grid | class | alone us | slowdown | launches alone / overlapped |")
        print("| --- | --- | --- | ---: | ---: | ---: |")
        for r in rows[:a.top]:
            print(f"| `{r['kernel'][:48]}` | {r['grid']} | {r['class']} | {r['alone_us']:.1f} | {r['slowdown']:.2f} | "
                  f"{r['n_alone']} / {r['n_overlapped']} |")
        for c, v in sorted(by_class(rows).items()):
            print(f"{c}: slowdown {v['slowdown']:.2f} over {v['kernels']} kernels, {v['extra_us'] / 1e3:.2f} ms "
                  "extra in the profiled steps")


if __name__ == "__main__":
    main()
