"""Compute/communication interference as a training step issues it, by size, kind and launch order (#13).

    python benchmarks/gpu/interference.py --out DIR [--world 2] [--pairs 20]
    python benchmarks/gpu/interference.py --table DIR/interference.json   (benchmarks/results/gpu_runs.md's table)

For each GEMM size, collective kind and payload, and launch order (GEMM
first or collective first), two ranks issue `--pairs` GEMM/collective pairs
back to back, as a compiled step does (the collective on NCCL's stream,
asynchronous, waited before the next pair), and the same kernels alone. A
profiler trace gives each kernel's duration; the result is the median
duration beside the other stream over the median alone, for both sides, and
the NCCL kernels' grid (CTAs, one per channel: the SMs NCCL takes). Written
as `interference.json` beside a log; benchmarks/results/gpu_runs.md says what is known
so far. First run on 2 H200s on 2026-11-22 (benchmarks/results/). `--device
cpu` runs the control flow on gloo (no kernels, so no figures).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import trace_kernels  # noqa: E402

GEMMS = (2048, 4096, 8192)
PAYLOADS_MIB = (8, 64, 256)
KINDS = ("all_gather", "reduce_scatter")
ORDERS = ("gemm_first", "comm_first")


def kernels(trace: str) -> list[tuple[float, float, str, int]]:
    """(start, end, name, CTAs) of every GPU kernel in a profiler trace."""
    out = []
    for e in trace_kernels(trace):
        grid = e.get("args", {}).get("grid", [0])
        out.append((e["ts"], e["ts"] + e["dur"], e["name"], int(grid[0]) if grid else 0))
    return out


def split(ks: list[tuple[float, float, str, int]]) -> tuple[list, list]:
    comm = [k for k in ks if "nccl" in k[2].lower()]
    comp = [k for k in ks if "nccl" not in k[2].lower()]
    return comm, comp


def overlapped_fraction(k: tuple, others: list) -> float:
    s, e = k[0], k[1]
    cover = sum(max(0.0, min(e, o[1]) - max(s, o[0])) for o in others)
    return min(1.0, cover / (e - s)) if e > s else 0.0


def summarise(alone_trace: str, pair_trace: str) -> dict:
    comm_a, comp_a = split(kernels(alone_trace))
    comm_p, comp_p = split(kernels(pair_trace))
    res: dict = {}
    for side, alone, paired, other in (("gemm", comp_a, comp_p, comm_p), ("comm", comm_a, comm_p, comp_p)):
        a = [k[1] - k[0] for k in alone]
        over = [k[1] - k[0] for k in paired if overlapped_fraction(k, other) >= 0.5]
        res[side] = {"alone_us": statistics.median(a) if a else None,
                     "overlapped_us": statistics.median(over) if over else None,
                     "overlapped_count": len(over), "count": len(paired)}
        if a and over:
            res[side]["slowdown"] = statistics.median(over) / statistics.median(a)
    ctas = [k[3] for k in comm_p + comm_a]
    res["nccl_ctas"] = max(ctas) if ctas else None
    return res


def worker(rank: int, world: int, a: argparse.Namespace, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    gpu = a.device == "cuda"
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    if gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if gpu else "gloo", rank=rank, world_size=world)
    dev = f"cuda:{rank}" if gpu else "cpu"
    dtype = torch.bfloat16 if gpu else torch.float32
    rows = []
    gemms = a.gemms if gpu else (64,)
    payloads = a.payloads_mib if gpu else (1,)
    for n in gemms:
        x = torch.randn(n, n, device=dev, dtype=dtype)
        y = torch.randn(n, n, device=dev, dtype=dtype)
        for kind in KINDS:
            for mib in payloads:
                numel = mib * (1 << 20) // x.element_size()
                numel -= numel % world
                big = torch.empty(numel, device=dev, dtype=dtype)
                small = torch.empty(numel // world, device=dev, dtype=dtype)

                def coll(kind: str = kind, big=big, small=small):  # bound now, not at call time
                    if kind == "all_gather":
                        return dist.all_gather_into_tensor(big, small, async_op=True)
                    return dist.reduce_scatter_tensor(small, big, async_op=True)

                def sync():
                    if gpu:
                        torch.cuda.synchronize()

                for order in ORDERS:
                    for _ in range(3):  # warm-up
                        coll().wait()
                        x @ y
                    sync()
                    dist.barrier()
                    traces = {}
                    for label in ("alone", "paired"):
                        with profile(activities=[ProfilerActivity.CUDA] if gpu else [ProfilerActivity.CPU]) as prof:
                            for _ in range(a.pairs):
                                if label == "alone":
                                    coll().wait()
                                    sync()
                                    x @ y
                                    sync()
                                elif order == "gemm_first":
                                    z = x @ y
                                    w = coll()
                                    w.wait()
                                    del z
                                else:
                                    w = coll()
                                    z = x @ y
                                    w.wait()
                                    del z
                            sync()
                        traces[label] = os.path.join(tempfile.mkdtemp(), f"{label}.json")
                        prof.export_chrome_trace(traces[label])
                        dist.barrier()
                    row = {"gemm_n": n, "kind": kind, "payload_mib": mib, "order": order, "rank": rank}
                    if gpu:
                        row.update(summarise(traces["alone"], traces["paired"]))
                    rows.append(row)
    with open(os.path.join(out, f"interference_rank{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f)
    dist.barrier()
    dist.destroy_process_group()


def table(rows: list[dict]) -> list[str]:
    """Markdown: per GEMM size, kind and payload, the slowdowns of the collective-first pairs (range over
    ranks) and how many kernels overlapped at all in the GEMM-first pairs."""
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        by.setdefault((r["gemm_n"], r["kind"], r["payload_mib"]), []).append(r)

    def span(v: list[float]) -> str:
        return "-" if not v else f"{min(v):.2f}" if len(v) == 1 else f"{min(v):.2f}-{max(v):.2f}"

    out = ["| GEMM | collective | MiB | GEMM alone us | GEMM slowdown | NCCL alone us | NCCL slowdown | "
           "NCCL CTAs | overlapping kernels, GEMM first |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (n, kind, mib), rs in sorted(by.items()):
        first = [r for r in rs if r["order"] == "comm_first"]
        after = [r for r in rs if r["order"] == "gemm_first"]
        gs = [r["gemm"]["slowdown"] for r in first if r["gemm"].get("slowdown")]
        cs = [r["comm"]["slowdown"] for r in first if r["comm"].get("slowdown")]
        ov = sum(r["gemm"]["overlapped_count"] + r["comm"]["overlapped_count"] for r in after)
        ctas = sorted({r["nccl_ctas"] for r in rs})
        out.append(f"| {n}^3 | {kind} | {mib} | {statistics.median(r['gemm']['alone_us'] for r in rs):.0f} | {span(gs)} | "
                   f"{statistics.median(r['comm']['alone_us'] for r in rs):.0f} | {span(cs)} | "
                   f"{'/'.join(map(str, ctas))} | {ov} of {sum(r['gemm']['count'] + r['comm']['count'] for r in after)} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--table", help="print the table of an interference.json and stop")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--gemms", type=int, nargs="+", default=list(GEMMS))
    ap.add_argument("--payloads-mib", type=int, nargs="+", default=list(PAYLOADS_MIB))
    a = ap.parse_args()
    if a.table:
        print("\n".join(table(json.load(open(a.table, encoding="utf-8"))["rows"])))
        return
    if not a.out:
        ap.error("--out is required")
    os.makedirs(a.out, exist_ok=True)
    import torch
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    mp.spawn(worker, args=(a.world, a, port, a.out), nprocs=a.world, join=True)
    rows = [r for k in range(a.world) for r in json.load(open(os.path.join(a.out, f"interference_rank{k}.json")))]
    meta = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "args": vars(a),
            "wall_s": time.monotonic() - t0}
    if a.device == "cuda":
        meta["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        meta["gpu"] = torch.cuda.get_device_name(0)
    with open(os.path.join(a.out, "interference.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    for r in rows:
        if r["rank"] == 0:
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
