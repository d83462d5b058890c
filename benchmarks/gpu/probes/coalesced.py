"""What a bucket costs issued as one coalesced NCCL group call instead of through one copied buffer (decision 55).

    python benchmarks/gpu/probes/coalesced.py --out DIR [--world 2]

Per bucket (shards of the step's weights, bf16, as SimpleFSDP gathers them), on `world` GPUs (NCCL), each alone,
medians of CUDA events on rank 0:

- `copy`: torch's bucket: the shards copied into one buffer, one all_gather, the result copied out per weight
  (what `merge_all_gather_bucket` issues, and what MODEL.md's copy layout prices);
- `flat`: that all_gather alone (no copies): what the copy layout's collective is priced as;
- `coalesced`: `_c10d_functional.all_gather_into_tensor_coalesced` on the shards, a wait per output;
- `separate`: one all_gather per weight (no bucket).

The same for reduce_scatter (gradients of the same weights). The question is whether NCCL's group call moves
the bucket as fast as one flat collective (then the coalesced layout's price, one collective of the summed
bytes, holds) and how much the copies cost.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys

DIM, FFN = 4096, 11008
BUCKETS = {  # name -> weight shapes (full, before sharding on dim 0)
    "layer": [(DIM, DIM)] * 4 + [(FFN, DIM)] * 3 + [(DIM,)] * 2,  # a decoder block, its two norms included
    "attention": [(DIM, DIM)] * 4,
    "mlp": [(FFN, DIM)] * 3,
    "small_16x1MB": [(512, 1024)] * 16,
    "norms_8": [(DIM,)] * 8,
}


def _time(fn, iters: int, warmup: int) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def worker(rank: int, world: int, port: int, out: str, iters: int, warmup: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    rows = []
    for bname, shapes in BUCKETS.items():
        dist.barrier()
        row = {"bucket": bname, "members": len(shapes), **_measure(shapes, world, iters, warmup)}
        rows.append(row)
        if rank == 0:
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                  flush=True)
        torch.cuda.empty_cache()
    if rank == 0:
        import torch.cuda.nccl as nccl

        with open(os.path.join(out, "coalesced.json"), "w") as f:
            json.dump({"torch": torch.__version__, "nccl": str(nccl.version()),
                       "gpu": torch.cuda.get_device_name(), "world": world, "iters": iters, "rows": rows}, f,
                      indent=1)
    dist.destroy_process_group()


def _measure(shapes: list[tuple[int, ...]], world: int, iters: int, warmup: int) -> dict:
    """One bucket's timings, each way of issuing it (ms)."""
    import torch
    import torch.distributed as dist

    grp = dist.group.WORLD
    name = grp.group_name
    c10d = torch.ops._c10d_functional
    shards = [torch.randn((s[0] // world, *s[1:]), device="cuda", dtype=torch.bfloat16) for s in shapes]
    grads = [torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in shapes]
    n_in = sum(t.numel() for t in shards)
    flat_in = torch.empty(n_in, device="cuda", dtype=torch.bfloat16)
    flat_out = torch.empty(n_in * world, device="cuda", dtype=torch.bfloat16)
    sizes = [t.numel() for t in shards]

    def copy() -> None:
        torch.cat([t.reshape(-1) for t in shards], out=flat_in)
        dist.all_gather_into_tensor(flat_out, flat_in, group=grp)
        per_rank = flat_out.view(world, n_in).split(sizes, dim=1)
        [p.contiguous() for p in per_rank]  # each weight: its rows from every rank, one copy

    def flat() -> None:
        dist.all_gather_into_tensor(flat_out, flat_in, group=grp)

    def coalesced() -> None:
        for t in c10d.all_gather_into_tensor_coalesced(shards, world, name):
            c10d.wait_tensor(t)

    def separate() -> None:
        for t in shards:
            c10d.wait_tensor(c10d.all_gather_into_tensor(t, world, name))

    n_g = sum(t.numel() for t in grads)
    g_flat = torch.empty(n_g, device="cuda", dtype=torch.bfloat16)
    g_out = torch.empty(n_g // world, device="cuda", dtype=torch.bfloat16)

    def rs_copy() -> None:
        torch.cat([t.reshape(world, -1) for t in grads], dim=1, out=g_flat.view(world, -1))
        dist.reduce_scatter_tensor(g_out, g_flat, group=grp)
        g_out.split([t.numel() // world for t in grads])  # views: a reduce_scatter's results need no copy
        # out of the bucket beyond the split (torch's merge views them)

    def rs_flat() -> None:
        dist.reduce_scatter_tensor(g_out, g_flat, group=grp)

    def rs_coalesced() -> None:
        for t in c10d.reduce_scatter_tensor_coalesced(grads, "sum", world, name):
            c10d.wait_tensor(t)

    def rs_separate() -> None:
        for t in grads:
            c10d.wait_tensor(c10d.reduce_scatter_tensor(t, "sum", world, name))

    row = {"gather_out_bytes": 2 * n_in * world}
    for k, fn in (("copy", copy), ("flat", flat), ("coalesced", coalesced), ("separate", separate),
                  ("rs_copy", rs_copy), ("rs_flat", rs_flat), ("rs_coalesced", rs_coalesced),
                  ("rs_separate", rs_separate)):
        dist.barrier()
        row[k + "_ms"] = _time(fn, iters, warmup)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a.world, port, a.out, a.iters, a.warmup), nprocs=a.world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
