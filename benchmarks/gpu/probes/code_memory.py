"""Does Inductor's emitted code depend on memory-planning info left on its nodes after fusion? A CPU check
(after runs 33-37, benchmarks/results/gpu_runs.md; the answer led to decisions.md 22: Inductor's buffer-reuse gate reads
that info, and `install_fx` now leaves it).

    python benchmarks/gpu/probes/code_memory.py

Runs 33 and 37 applied the same stored `free` order under the budget 1.3 on 2 H200s and peaked at 5.41 and
5.26 GB. Between them, the check after fusion (decisions.md 21) had started to assign Inductor's planning info
to the fused nodes (`plan_memory`), and left it there. This script compiles the small re-gather step at `free`
(fake process group) with and without that info left behind, and walks each generated `call`: every block it
allocates, aliases (`reinterpret_tensor`, `# reuse`) and deletes, by Python reference counts. The walk sizes
the graph inputs and CPU attention's outputs from the code's own size asserts, so its absolute peak is not
Inductor's estimate; the difference between the variants is what it measures. A third variant turns off
Inductor's buffer reuse (`allow_buffer_reuse`), which holds a freed buffer until a later one of the same size
takes it over.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

ITEM = {"torch.float32": 4, "torch.bfloat16": 2, "torch.float16": 2, "torch.int64": 8, "torch.int32": 4,
        "torch.bool": 1, "torch.uint8": 1}


def _ints(s: str) -> list[int]:
    s = s.strip().strip("()").strip()
    return [int(x) for x in s.split(",") if x.strip()] if s else []


def _nbytes(shape: list[int], stride: list[int], item: int) -> int:
    if any(d == 0 for d in shape):
        return 0
    return (1 + sum((d - 1) * st for d, st in zip(shape, stride))) * item


def walk(body: str, item: int = 4) -> int:
    """The peak bytes of a wrapper `call` body: inputs (asserted 'input') live from the start, each
    `empty_strided_*`, op result and tuple element a block, aliases share a block, `del` drops a reference."""
    lines = body.splitlines()
    sizes = {}
    for ln in lines:
        m = re.match(r"\s*assert_size_stride\((\w+), \(([^)]*)\), \(([^)]*)\)", ln)
        if m:
            sizes[m.group(1)] = (_ints(m.group(2)), _ints(m.group(3)))
    ref: dict[str, int] = {}
    block: dict[int, list[int]] = {}
    state = {"cur": 0, "peak": 0, "next": 0}

    def new(name: str, b: int) -> None:
        state["next"] += 1
        block[state["next"]] = [b, 1]
        ref[name] = state["next"]
        state["cur"] += b
        state["peak"] = max(state["peak"], state["cur"])

    def drop(name: str) -> None:
        bid = ref.pop(name, None)
        if bid is not None:
            block[bid][1] -= 1
            if block[bid][1] == 0:
                state["cur"] -= block[bid][0]

    for ln in lines:
        m = re.match(r"\s*assert_size_stride\((\w+),.*'input'", ln)
        if m:
            new(m.group(1), _nbytes(*sizes[m.group(1)], item))
    for ln in lines:
        s = ln.strip()
        if not s or s.startswith("#"):
            continue
        for part in (p.strip() for p in s.split(";")):
            if m := re.match(r"(\w+) = empty_strided_\w+\(\(([^)]*)\), \(([^)]*)\), (torch\.\w+)\)", part):
                new(m.group(1), _nbytes(_ints(m.group(2)), _ints(m.group(3)), ITEM.get(m.group(4), item)))
            elif m := (re.match(r"(\w+) = reinterpret_tensor\((\w+),", part) or re.match(r"(\w+) = (\w+)$", part)):
                bid = ref.get(m.group(2))
                if bid is not None:
                    drop(m.group(1))
                    ref[m.group(1)] = bid
                    block[bid][1] += 1
            elif m := re.match(r"(\w+) = (\w+)\[(\d+)\]$", part):
                new(m.group(1), _nbytes(*sizes[m.group(1)], item) if m.group(1) in sizes else 0)
            elif m := re.match(r"(\w+) = torch\.ops\.\S+\(", part):
                new(m.group(1), _nbytes(*sizes[m.group(1)], item) if m.group(1) in sizes else 0)
            elif m := re.match(r"del (\w+)", part):
                drop(m.group(1))
    return state["peak"]


def small_step(prefix: str) -> tuple:
    """The small re-gather step on the fake process group of 2 ranks (CPU, caches off): (model, input)."""
    import torch
    import torch._inductor.config as icfg
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from benchmarks.gpu.e2e_step import build

    icfg.force_disable_caches = True
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix=prefix)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    torch.manual_seed(0)
    return build(512, 8, 1376, 2, 256, 2, "cpu", torch.float32, 1, True), torch.randn(1, 256, 512)


def main() -> None:
    import torch
    import torch._inductor.config as icfg
    import torch.distributed as dist
    from torch._inductor.utils import run_and_get_code

    from benchmarks.gpu.e2e_step import after_fusion
    from overlapsat.store import solve_store
    from overlapsat.torch.after_fusion import plan_memory
    from overlapsat.torch.fx_apply import install_fx

    model, x = small_step("ind_code_")
    print("| order | graph (collectives) | Inductor's estimate after fusion, MB | code walk, no planning info (blind "
          "reuse gate, before decision 22), MB | code walk, info left (as shipped), MB | code walk, no info, "
          "allow_buffer_reuse=False, MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for budget in (1.3, None):
        store = tempfile.mkdtemp(prefix="osat_code_")
        torch._dynamo.reset()
        install_fx("capture", store, collective_order="free")
        torch.compile(model)(x).sum().backward()
        solve_store(store, time_limit=300, work_limit=6, workers=2, collective_order="free", memory_budget=budget)
        rows: dict[int, list] = {}
        for left, reuse in ((False, True), (True, True), (False, False)):
            est: list = []
            torch._dynamo.reset()
            install_fx("apply", store, collective_order="free")
            icfg._post_fusion_custom_pass = (lambda n, est=est: (after_fusion(n, est), plan_memory(n), n)[2]) \
                if left else (lambda n, est=est: after_fusion(n, est))
            with icfg.patch(allow_buffer_reuse=reuse):
                _, codes = run_and_get_code(lambda: torch.compile(model)(x).sum().backward())
            icfg._post_fusion_custom_pass = None
            bodies = [c.split("def call(", 1)[1] for c in codes if "def call(" in c]
            for body, (colls, peak) in zip(bodies, est):
                rows.setdefault(colls, [peak]).append(walk(body))
        for colls, (peak, restored, left_behind, no_reuse) in sorted(rows.items()):
            print(f"| {'budget 1.3' if budget else 'no budget'} | {colls} | {peak / 1e6:.2f} | {restored / 1e6:.2f} "
                  f"| {left_behind / 1e6:.2f} | {no_reuse / 1e6:.2f} |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
