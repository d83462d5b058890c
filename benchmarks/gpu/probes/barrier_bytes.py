"""What `dist.barrier()` leaves allocated on the GPU under NCCL: the bytes the caching allocator holds (allocated and
requested) before and after each call, on one rank. Written after the budgeted plans of 2026-11-28 to 2026-12-01
measured 512 B (1 requested byte) above `a` before their timed steps began: only the configurations that capture and
solve a store call `dist.barrier()` before those steps (benchmarks/gpu/e2e_step.py).

    NCCL_NVLS_ENABLE=0 python benchmarks/gpu/probes/barrier_bytes.py > barrier_bytes.json
"""

from __future__ import annotations

import json
import os


def held(torch) -> dict[str, int]:
    st = torch.cuda.memory_stats()
    return {"allocated": torch.cuda.memory_allocated(), "requested": int(st.get("requested_bytes.all.current", 0))}


def main() -> None:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    out = {"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())), "steps": []}
    out["steps"].append({"after": "init_process_group", **held(torch)})
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)
    del x
    torch.cuda.synchronize()
    out["steps"].append({"after": "all_reduce of a 4 KiB tensor, freed", **held(torch)})
    for k in range(3):
        dist.barrier()
        torch.cuda.synchronize()
        out["steps"].append({"after": f"barrier {k + 1}", **held(torch)})
    obj = [0]
    dist.broadcast_object_list(obj, src=0)
    torch.cuda.synchronize()
    out["steps"].append({"after": "broadcast_object_list([0])", **held(torch)})
    dist.destroy_process_group()
    torch.cuda.synchronize()
    out["steps"].append({"after": "destroy_process_group", **held(torch)})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
