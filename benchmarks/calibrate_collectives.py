"""Measure NCCL collectives (and comm/compute interference) for the cost model's calibration tables.

    torchrun --nproc_per_node=2 benchmarks/calibrate_collectives.py --out collectives.json

Sizes are the full (unsharded) tensor in bytes, as nccl-tests report them:
all_gather output, reduce_scatter input, all_reduce buffer. Two independent
"queued" passes (A: for calibration, B: for evaluation) enqueue the timed
collectives behind a GPU sleep so that host launch overhead is hidden; the
"unqueued" figure times each collective alone from the host, launch included.
`--smoke` runs tiny sizes on CPU with gloo to test the script without GPUs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


def sizes(smoke: bool) -> list[int]:
    if smoke:
        return [2**10, 2**12, 3 * 2**11]
    grid = [2**k for k in range(10, 31)]  # 1 KiB .. 1 GiB
    off = [3 * 2**k for k in range(19, 29)]  # 1.5 MiB .. 768 MiB, between grid points
    return sorted(grid + off)


def make(op: str, nbytes: int, world: int, dev: torch.device) -> tuple:
    n = max(world, nbytes // 2 // world * world)  # bf16 elements, divisible by world
    if op == "all_gather":
        out = torch.empty(n, dtype=torch.bfloat16, device=dev)
        inp = torch.randn(n // world, device=dev).to(torch.bfloat16)
        return lambda: dist.all_gather_into_tensor(out, inp), n * 2
    if op == "reduce_scatter":
        inp = torch.randn(n, device=dev).to(torch.bfloat16)
        out = torch.empty(n // world, dtype=torch.bfloat16, device=dev)
        return lambda: dist.reduce_scatter_tensor(out, inp), n * 2
    buf = torch.randn(n, device=dev).to(torch.bfloat16)
    return lambda: dist.all_reduce(buf), n * 2


def iters_for(nbytes: int) -> int:
    return max(3, min(200, int(2e9 // max(nbytes, 1))))


def timed_queued(fn, iters: int, gpu: bool) -> float:
    """Mean microseconds per call, calls enqueued behind a GPU sleep."""
    if not gpu:
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t) / iters * 1e6
    dist.barrier()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e8))  # ~100 ms of GPU time: the host enqueues everything meanwhile
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1000 / iters


def timed_unqueued(fn, reps: int, gpu: bool) -> float:
    """Median host-observed microseconds of one call, launch included."""
    out = []
    for _ in range(reps):
        dist.barrier()
        if gpu:
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if gpu:
            torch.cuda.synchronize()
        out.append((time.perf_counter() - t) * 1e6)
    return statistics.median(out)


def interference(dev: torch.device, smoke: bool) -> dict:
    """A 1 GiB all_gather beside an 8192^3 bf16 GEMM: each alone, then together."""
    n = 256 if smoke else 8192
    a = torch.randn(n, n, device=dev).to(torch.bfloat16)
    b = torch.randn(n, n, device=dev).to(torch.bfloat16)
    ag, _ = make("all_gather", 2**12 if smoke else 2**30, dist.get_world_size(), dev)
    gpu = dev.type == "cuda"
    if not gpu:
        return {}
    comm = torch.cuda.Stream()
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731

    def gemm_alone(reps=10):
        for _ in range(3):
            a @ b
        s, e = ev(), ev()
        torch.cuda.synchronize()
        s.record()
        for _ in range(reps):
            a @ b
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) * 1000 / reps

    def ag_alone(reps=5):
        return timed_queued(ag, reps, True)

    def together(n_comm: int, n_gemm: int) -> tuple[float, float]:
        """Per-call times when both streams run at once (the shorter one sits inside the longer)."""
        dist.barrier()
        torch.cuda.synchronize()
        gs, ge, cs, ce = ev(), ev(), ev(), ev()
        torch.cuda._sleep(int(2e8))
        gs.record()
        with torch.cuda.stream(comm):
            comm.wait_stream(torch.cuda.current_stream())
            cs.record(comm)
            for _ in range(n_comm):
                ag()
            ce.record(comm)
        for _ in range(n_gemm):
            a @ b
        ge.record()
        torch.cuda.synchronize()
        return gs.elapsed_time(ge) * 1000 / n_gemm, cs.elapsed_time(ce) * 1000 / n_comm

    g0, c0 = gemm_alone(), ag_alone()
    print("alone", g0, c0, flush=True)
    # GEMM slowdown: a few GEMMs inside a long run of all_gathers; comm slowdown: the reverse
    # every rank must issue the same number of collectives (else NCCL hangs): agree on rank 0's counts
    counts = torch.tensor([max(4, int(6 * g0 * 10 / c0)), max(10, int(6 * c0 * 3 / g0))], device=dev)
    dist.broadcast(counts, 0)
    n_ag, n_gm = (int(x) for x in counts.tolist())
    g1, _ = together(n_ag, 10)
    print("gemm overlapped", g1, flush=True)
    _, c1 = together(3, n_gm)
    return {"gemm_alone_us": g0, "all_gather_1GiB_alone_us": c0, "gemm_overlapped_us": g1,
            "all_gather_overlapped_us": c1, "gemm_slowdown": g1 / g0, "comm_slowdown": c1 / c0,
            "design": f"gemm: 10 GEMMs inside {n_ag} all_gathers; comm: 3 all_gathers inside {n_gm} GEMMs"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--only-interference", action="store_true", help="skip the size sweep")
    ap.add_argument("--dense", nargs=3, type=float, metavar=("LO", "HI", "PER_OCTAVE"),
                    help="sizes 2^LO .. 2^HI bytes, PER_OCTAVE per octave; even steps are marked grid (calibration), "
                         "odd ones held out; skips the interference test")
    a = ap.parse_args()
    gpu = torch.cuda.is_available() and not a.smoke
    dist.init_process_group("nccl" if gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", rank % max(1, torch.cuda.device_count())) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(dev)
    rows = []
    if a.dense:
        lo, hi, per = a.dense
        plan = [(int(2 ** (lo + k / per)) // 4096 * 4096, k % 2 == 0) for k in range(int((hi - lo) * per) + 1)]
    else:
        plan = [(b, b & (b - 1) == 0) for b in sizes(a.smoke)]
    for op in () if a.only_interference else ("all_gather", "reduce_scatter", "all_reduce"):
        for nbytes, grid in plan:
            fn, real = make(op, nbytes, world, dev)
            for _ in range(3):
                fn()  # warm-up (NCCL setup, buffers)
            it = iters_for(real) if not a.smoke else 3
            row = {"op": op, "bytes": real, "group_size": world, "grid": grid,
                   "queued_a_us": timed_queued(fn, it, gpu), "queued_b_us": timed_queued(fn, it, gpu),
                   "unqueued_us": timed_unqueued(fn, 5 if real > 2**26 else 15, gpu), "iters": it}
            rows.append(row)
            if rank == 0:
                print(json.dumps(row), flush=True)
            del fn
    inter = {} if a.dense else interference(dev, a.smoke)
    if rank == 0:
        meta = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
                "nccl": ".".join(map(str, torch.cuda.nccl.version())) if gpu else None,
                "device": torch.cuda.get_device_name(dev) if gpu else "cpu", "world_size": world,
                "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_PROTO")}}
        with open(a.out, "w") as f:
            json.dump({"meta": meta, "collectives": rows, "interference": inter}, f, indent=1)
        print("interference", json.dumps(inter), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
