"""Per-kernel contention in a profiled step, and whether pricing GEMMs by size changes overlapsat's order.

    python benchmarks/gpu/kernel_contention.py RUN [RUN ...]
    python benchmarks/gpu/kernel_contention.py --objective RUN
    python benchmarks/gpu/kernel_contention.py --wave-rule RUN [RUN ...]

A RUN is a directory of benchmarks/gpu/e2e_step.py's output with (d)'s trace (`trace_d.json.xz` or `.gz`).
Per kernel (its name, grid and, for a GEMM, its node's flops: `tag_gemms`, from the run's stored orders), the
median duration of its launches that overlap no NCCL kernel (under 5 %
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


def is_gemm(name: str) -> bool:
    return any(k in name.lower() for k in ("nvjet", "gemm", "cutlass", "sm90_xmma", "cublas"))


def kind_of(name: str, alone_us: float) -> str:
    n = name.lower()
    if "nccl" in n:
        return "nccl"
    if any(k in n for k in ("sdpa", "flash", "fmha", "attention", "cudnn")):
        return "attention"
    if is_gemm(n):
        return "gemm, one wave" if alone_us < 150 else "gemm, longer"
    return "other"


def step_gemms(run: str, cfg: str = "d") -> list[float]:
    """The flops of the GEMM-like nodes of one step in `cfg`'s launch order: the forward graph's, then the
    backward's (the graph that receives `tangents_*`), each in its stored schedule's order (or plan's)."""
    graphs = []
    with tempfile.TemporaryDirectory() as d:
        unpack_store(os.path.join(run, "store.tar.gz"), d)
        for f in sorted(glob.glob(os.path.join(d, "store", cfg, "*.graph.json"))):
            with open(f, encoding="utf-8") as fh:
                doc = json.load(fh)
            with open(f.replace(".graph.json", ".schedule.json"), encoding="utf-8") as fh:
                order = json.load(fh)["order"]
            nodes = {n["name"]: n for n in doc["nodes"]}
            backward = any(b["name"].startswith("tangents") for b in doc["buffers"])
            # a plan's order also names its buckets' four nodes, none of them a GEMM
            graphs.append((backward, [float(nodes[v]["flops"]) for v in order if nodes.get(v, {}).get("gemm_like")]))
    if sorted(bw for bw, _ in graphs) != [False, True]:
        raise ValueError(f"the store holds {len(graphs)} graphs, not one forward and one backward")
    return [f for _, seq in sorted(graphs) for f in seq]


def tag_gemms(kernels: list[dict], step: list[float]) -> list[dict]:
    """The kernel events with every GEMM launch's flops in `args["flops"]`.

    A kernel's name does not say its size: cuBLAS runs the 68.7 and the 184.7 GFLOP products of the step with
    the same kernel (run 47: `..._NNT` at about 96 and 286 us). A step issues one GEMM launch per GEMM-like
    node in `step`'s order (`step_gemms`), and the profiled window holds whole steps, so the i-th GEMM launch
    of the trace computes `step[i mod len(step)]`. A trace whose GEMM launches are not a whole number of
    steps, or where one position of the step launches different kernels, is refused."""
    gemms = sorted((e for e in kernels if is_gemm(e["name"])), key=lambda e: e["ts"])
    n = len(step)
    if not n or not gemms or len(gemms) % n:
        raise ValueError(f"{len(gemms)} GEMM launches are not a whole number of steps of {n}")
    names: dict[int, str] = {}
    for i, e in enumerate(gemms):
        if names.setdefault(i % n, e["name"]) != e["name"]:
            raise ValueError(f"GEMM {i % n} of the step launches {names[i % n]} and {e['name']}")
    flops = {id(e): step[i % n] for i, e in enumerate(gemms)}
    return [dict(e, args=dict(e.get("args", {}), flops=flops[id(e)])) if id(e) in flops else e for e in kernels]


def key_of(e: dict) -> tuple[str, str, float | None]:
    """A kernel's identity for timing: its name, grid and (for a GEMM tagged by `tag_gemms`) its flops."""
    args = e.get("args", {})
    return e["name"], str(args.get("grid")), args.get("flops")


def per_kernel(kernels: list[dict]) -> list[dict]:
    """One row per kernel (`key_of`: name, grid, and flops once tagged) with at least 3 launches alone and 3
    overlapped, from a trace's kernel events (`run_files.trace_kernels`, maybe through `tag_gemms`)."""
    ev = [e for e in kernels if e.get("dur", 0) > 0]
    from benchmarks.gpu.trace_stats import union

    nccl = union([(e["ts"], e["ts"] + e["dur"]) for e in ev if "nccl" in e["name"].lower()])  # disjoint
    starts = [a for a, _ in nccl]

    def covered(a: float, b: float) -> float:
        i = max(0, bisect.bisect_right(starts, a) - 1)
        t = 0.0
        while i < len(nccl) and nccl[i][0] < b:
            t += max(0.0, min(b, nccl[i][1]) - max(a, nccl[i][0]))
            i += 1
        return t

    by: dict[tuple, tuple[list[float], list[float]]] = collections.defaultdict(lambda: ([], []))
    for e in ev:
        if "nccl" in e["name"].lower():
            continue
        f = covered(e["ts"], e["ts"] + e["dur"]) / e["dur"]
        key = key_of(e)
        if f < ALONE:
            by[key][0].append(e["dur"])
        elif f > OVERLAPPED:
            by[key][1].append(e["dur"])
    rows = []
    for (name, grid, flops), (alone, over) in by.items():
        if len(alone) >= 3 and len(over) >= 3:
            a, o = statistics.median(alone), statistics.median(over)
            rows.append({"kernel": name, "grid": grid, "flops": flops, "alone_us": a, "overlapped_us": o, "slowdown": o / a,
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


def wave_rule(kernels: list[dict], sms: int = 132, nccl_ctas: int = 24, tail_us: float = 20.0) -> list[dict]:
    """Does a full-grid GEMM wait for the transfer running at its start, as on one GPU (run 50)?

    For each GEMM whose grid fills the SMs (a row of `per_kernel` in a GEMM class), its launches that start
    while a NCCL kernel of several CTAs runs are predicted by the wave rule, max(alone x sms / (sms -
    nccl_ctas), that kernel's remaining time + tail_us), and by the kernel's own median slowdown over those
    launches (the best constant, fitted in sample). Per kernel: both median relative errors."""
    rows = {(r["kernel"], r["grid"], r["flops"]): r for r in per_kernel(kernels) if r["class"].startswith("gemm")}
    comm = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels
                  if "nccl" in e["name"].lower() and int((e.get("args", {}).get("grid") or [1])[0]) > 1)
    starts = [a for a, _ in comm]
    launches: dict[tuple, list[tuple[float, float]]] = collections.defaultdict(list)
    for e in kernels:
        key = key_of(e)
        grid = e.get("args", {}).get("grid") or [0]
        if key not in rows or grid[0] * (grid[1] if len(grid) > 1 else 1) != sms:
            continue
        i = bisect.bisect_right(starts, e["ts"]) - 1
        ends = [b for a, b in comm[max(0, i - 4):i + 1] if a <= e["ts"] < b]  # transfers running at its start
        if ends:
            launches[key].append((max(ends) - e["ts"], e["dur"]))
    out = []
    for key, ls in launches.items():
        if len(ls) < 3:
            continue
        alone = rows[key]["alone_us"]
        const = statistics.median(d / alone for _, d in ls)
        rule = [abs(max(alone * sms / (sms - nccl_ctas), rem + tail_us) - d) / d for rem, d in ls]
        fixed = [abs(const * alone - d) / d for _, d in ls]
        out.append({"kernel": key[0], "grid": key[1], "flops": key[2], "alone_us": alone, "launches": len(ls),
                    "constant": const, "rule_error": statistics.median(rule), "constant_error": statistics.median(fixed)})
    return sorted(out, key=lambda r: -r["launches"])


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


def gflops(row: dict) -> str:
    return "-" if row["flops"] is None else f"{row['flops'] / 1e9:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--objective", action="store_true")
    ap.add_argument("--other", type=float, default=1.25, help="the slowdown of compute that is not a GEMM")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--cfg", default="d", help="the configuration whose trace and stored orders are read")
    ap.add_argument("--wave-rule", action="store_true",
                    help="test run 50's wave rule on the step's full-grid GEMMs, against a constant per kernel")
    a = ap.parse_args()
    for run in a.runs:
        print(f"## {run}")
        if a.objective:
            for r in objective(run, a.other):
                print(json.dumps(r))
            continue
        kernels = trace_kernels(run_trace(run, a.cfg))
        if os.path.exists(os.path.join(run, "store.tar.gz")):
            try:
                kernels = tag_gemms(kernels, step_gemms(run, a.cfg))
            except ValueError as e:
                raise SystemExit(f"{run}: {e}") from None
        else:
            print("(no store.tar.gz: GEMMs keyed by kernel name and grid alone, sizes mixed)")
        if a.wave_rule:
            print("| kernel | GFLOP | alone us | launches at a transfer | constant | error, wave rule | error, constant |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
            for r in wave_rule(kernels):
                print(f"| `{r['kernel'][:48]}` | {gflops(r)} | {r['alone_us']:.1f} | {r['launches']} | {r['constant']:.2f} | "
                      f"{100 * r['rule_error']:.0f} % | {100 * r['constant_error']:.0f} % |")
            continue
        rows = per_kernel(kernels)
        print("| kernel | grid | GFLOP | class | alone us | slowdown | launches alone / overlapped |")
        print("| --- | --- | ---: | --- | ---: | ---: | ---: |")
        for r in rows[:a.top]:
            print(f"| `{r['kernel'][:48]}` | {r['grid']} | {gflops(r)} | {r['class']} | {r['alone_us']:.1f} | "
                  f"{r['slowdown']:.2f} | {r['n_alone']} / {r['n_overlapped']} |")
        for c, v in sorted(by_class(rows).items()):
            print(f"{c}: slowdown {v['slowdown']:.2f} over {v['kernels']} kernels, {v['extra_us'] / 1e3:.2f} ms "
                  "extra in the profiled steps")


if __name__ == "__main__":
    main()
