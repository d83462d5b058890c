"""The toy store of docs/torch.md, and the `solve-cache` and `bench` output the page shows.

    python benchmarks/torch_toy.py > benchmarks/results/torch_toy_<date>.md

A three-layer step whose weights are all-gathered, forward and backward, compiled on rank 0 of two ranks of
torch's fake process group with `install("capture", store)`; then `overlapsat solve-cache STORE --time-limit 10`
and `overlapsat bench STORE --time-limit 10` on the store. Needs torch (CPU is enough).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile


def capture(store: str) -> None:
    import torch
    import torch._inductor.config as icfg
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from overlapsat.torch import install, uninstall

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    icfg.force_disable_caches = True
    install("capture", store)
    try:
        shards = [torch.randn(32, 64, requires_grad=True) for _ in range(3)]

        def step(x):
            for w in shards:
                x = torch.relu(x @ funcol.all_gather_tensor(w, 0, dist.group.WORLD).t())
            return x.sum()

        torch.compile(step)(torch.randn(16, 64)).backward()
    finally:
        uninstall()
        dist.destroy_process_group()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        store = os.path.join(tmp, "schedules")
        capture(store)
        for cmd in (["solve-cache", store, "--time-limit", "10"], ["bench", store, "--time-limit", "10"]):
            r = subprocess.run([sys.executable, "-m", "overlapsat.cli", *cmd], capture_output=True, text=True)
            print(f"$ overlapsat {' '.join(c if c != store else 'schedules' for c in cmd)}")
            print(r.stdout.replace(store, "schedules"), end="")
            if r.returncode:
                sys.exit(f"overlapsat {cmd[0]} exited {r.returncode}: {r.stderr}")


if __name__ == "__main__":
    main()
