"""Heap corruption in torch's gloo backend when functional collectives overlap (found 2026-11-22, torch 2.13.0 CPU).

    python benchmarks/gloo_overlap_crash.py [IN_FLIGHT] [ITERATIONS]

Pure torch, no overlapsat: two gloo ranks issue IN_FLIGHT `all_gather_into_tensor` functional collectives,
then wait on each in turn while allocating, ITERATIONS times. With one collective in flight (each waited at
once) 6 of 6 runs of 600 iterations passed; with 2 in flight 1 of 5 runs of 300 aborted ("malloc():
unaligned tcache chunk detected"), with 16 in flight 2 of 5. Any order that overlaps collectives (torch's own
reordering passes as much as overlapsat's) can therefore crash a CPU run on gloo; it was first seen in a
compiled re-gather step whose order kept 13-15 gathers in flight (docs/torch.md, "Known hazards").
"""

from __future__ import annotations

import os
import socket
import sys


def worker(rank: int, in_flight: int, iterations: int, port: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    ag, wait = torch.ops._c10d_functional.all_gather_into_tensor.default, torch.ops._c10d_functional.wait_tensor.default
    shards = [torch.randn(64 if i % 3 else 64 * 128) for i in range(in_flight)]
    for _ in range(iterations):
        outs = [ag(t, 2, "0") for t in shards]
        total = 0.0
        for o in outs:
            wait(o)
            torch.empty(64)  # an allocation between waits, as compiled code makes
            total += float(o.sum())
        del outs
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(f"ok: {in_flight} in flight, {iterations} iterations", flush=True)


if __name__ == "__main__":
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    it = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    mp.spawn(worker, args=(n, it, free_port), nprocs=2)
