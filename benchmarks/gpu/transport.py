"""What an all_gather costs the GEMM beside it, by size, for each transport (#32).

    python benchmarks/gpu/transport.py --out DIR [--world 2] [--sizes-mb 8 32 128 512]

Per GEMM shape and all_gather output size, on `world` GPUs (one process each, NCCL):

- the GEMM chain alone, and each transport's all_gather alone;
- the GEMM chain with an all_gather of each transport launched just before it on another stream.

`--variants copy_engine_ws copy_engine_compiled` adds the copy engine as a plan's FX pass issues it: on an
input outside symmetric memory (the op copies it into the group's workspace first), and inside a compiled
function (on a torch without Inductor's lowering for the op, a fallback kernel); run 60.

Transports: `nccl` (NCCL's kernels, which take SMs) and `copy_engine` (torch's symmetric-memory
`_low_contention_all_gather`: peers' buffers pulled by copies, no SMs once the input lives in symmetric
memory; two barrier kernels of one block). The chain is as many GEMMs as last about as long as the
NCCL all_gather alone, so that the transfer overlaps compute from start to end. Reported per row: the
chain's slowdown beside the transfer, the pair's time against the longer of the two alone (1.0: the
transfer was free), the transfer alone, and for the copy engine its set-up time and the memory it holds
(the symmetric input buffer). Medians of `--iters` after `--warmup`, CUDA events on rank 0.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time

HOLD_CYCLES = 10_000_000  # about 5 ms at 1.98 GHz: longer than enqueueing a chain of 11 GEMMs and a transfer
SHAPES = {"step": (2048, 4096, 4096), "step_ffn": (2048, 4096, 11008), "big": (8192, 8192, 8192)}


def _timed(fn, iters: int, warmup: int) -> list[float]:
    """Medians' samples of `fn` alone, each started as the pairs are (the GPU held while it is enqueued; run 52
    timed these without the hold, so its one-GEMM chains alone carry their launch latency, about 25 us)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(HOLD_CYCLES)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e))
    return out


def worker(rank: int, world: int, a: argparse.Namespace, port: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0",
                      TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    group = dist.group.WORLD
    rows: list[dict] = []
    ce_error = None
    try:
        import torch.distributed._symmetric_memory as symm_mem

        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(group.group_name)
    except Exception as e:  # noqa: BLE001 - the NCCL rows stand without it
        ce_error = f"{type(e).__name__}: {e}"
    gname = group.group_name
    lc = torch.ops.symm_mem._low_contention_all_gather if ce_error is None else None
    compiled = torch.compile(lambda t: lc(t, gname), fullgraph=True) if lc is not None else None
    torch.manual_seed(rank)
    for shape in a.shapes:
        m, k, n = SHAPES[shape]
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        def chain(reps: int, x=x, w=w) -> None:
            for _ in range(reps):
                x @ w

        one = statistics.median(_timed(lambda: chain(1), a.iters, a.warmup))
        for mb in a.sizes_mb:
            numel = mb * 2**20 // 2 // world  # bf16 elements of one rank's shard
            inp = torch.randn(numel, device=dev, dtype=torch.bfloat16)
            out = torch.empty(numel * world, device=dev, dtype=torch.bfloat16)

            def nccl(out=out, inp=inp):
                dist.all_gather_into_tensor(out, inp, group=group, async_op=True).wait()

            transports = {"nccl": nccl}
            setup: dict = {}
            if ce_error is None:
                try:
                    before = torch.cuda.memory_allocated(dev)
                    t0 = time.monotonic()
                    sym = symm_mem.empty(numel, dtype=torch.bfloat16, device=dev)
                    symm_mem.rendezvous(sym, group.group_name)
                    sym.copy_(inp)
                    torch.cuda.synchronize()
                    # symmetric memory comes from its own allocator, which memory_allocated does not count:
                    # the buffer held is the shard itself, for as long as the input lives there
                    setup = {"copy_engine_setup_s": time.monotonic() - t0,
                             "copy_engine_held_bytes": numel * 2,
                             "caching_allocator_delta_bytes": torch.cuda.memory_allocated(dev) - before}

                    issue = {"copy_engine": lambda sym=sym: lc(sym, group.group_name),
                             # what a plan's FX pass issues: the input where the graph put it, so the op first
                             # copies it into the group's symmetric workspace; and that op inside a compiled
                             # graph (on a torch without Inductor's lowering for it, a fallback kernel)
                             "copy_engine_ws": lambda inp=inp: lc(inp, group.group_name),
                             "copy_engine_compiled": lambda inp=inp: compiled(inp)}
                    for t, f in issue.items():
                        if t != "copy_engine" and t not in a.variants:
                            continue

                        def ce(f=f):
                            torch.ops._c10d_functional.wait_tensor(f())

                        ce()
                        torch.cuda.synchronize()
                        transports[t] = ce
                except Exception as e:  # noqa: BLE001
                    ce_error = f"{type(e).__name__}: {e}"
            alone = {t: statistics.median(_timed(f, a.iters, a.warmup)) for t, f in transports.items()}
            reps = max(1, round(alone["nccl"] / one))
            chain_alone = statistics.median(_timed(lambda reps=reps: chain(reps), a.iters, a.warmup))
            for t in transports:
                gemm_ms, pair_ms = [], []
                for it in range(a.warmup + a.iters):
                    s, g, e = (torch.cuda.Event(enable_timing=True) for _ in range(3))
                    # the GPU held while the host enqueues the transfer and the chain, so both start together
                    # and the chain's time has no launch latency in it (the first run, without, read the
                    # copy-engine op's Python launch as GEMM slowdown)
                    torch.cuda._sleep(HOLD_CYCLES)
                    s.record()
                    if t == "nccl":
                        work = dist.all_gather_into_tensor(out, inp, group=group, async_op=True)
                    else:
                        r = issue[t]()
                    chain(reps)
                    g.record()
                    if t == "nccl":
                        work.wait()
                    else:
                        torch.ops._c10d_functional.wait_tensor(r)
                    e.record()
                    torch.cuda.synchronize()
                    if it >= a.warmup:
                        gemm_ms.append(s.elapsed_time(g))
                        pair_ms.append(s.elapsed_time(e))
                gm, pm = statistics.median(gemm_ms), statistics.median(pair_ms)
                rows.append({"shape": shape, "gemm_mnk": [m, k, n], "size_mb": mb, "transport": t, "gemms": reps,
                             "gemm_chain_alone_ms": chain_alone, "transfer_alone_ms": alone[t],
                             "gemm_chain_beside_ms": gm, "pair_ms": pm,
                             "gemm_slowdown": gm / chain_alone, "pair_over_longer": pm / max(chain_alone, alone[t]),
                             "transfer_busbw_gbs": mb * 2**20 * (world - 1) / world / (alone[t] * 1e-3) / 1e9,
                             **(setup if t.startswith("copy_engine") else {})})
                if rank == 0:
                    print(json.dumps(rows[-1]), flush=True)
            dist.barrier()
    if rank == 0:
        meta = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                "nccl": ".".join(map(str, torch.cuda.nccl.version())), "world": world, "copy_engine_error": ce_error}
        with open(os.path.join(a.out, "transport.json"), "w", encoding="utf-8") as fo:
            json.dump({"meta": meta, "rows": rows}, fo, indent=1)
        print(json.dumps(meta), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--shapes", nargs="+", default=["step", "step_ffn", "big"], choices=list(SHAPES))
    ap.add_argument("--sizes-mb", nargs="+", type=int, default=[8, 32, 128, 512])
    ap.add_argument("--variants", nargs="*", default=[], choices=["copy_engine_ws", "copy_engine_compiled"],
                    help="also the copy engine on a plain input (workspace copy), and inside torch.compile")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a.world, a, port), nprocs=a.world, join=True)


if __name__ == "__main__":
    sys.exit(main())
