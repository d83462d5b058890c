"""Does the library, as shipped, leave Inductor's memory-planning info on this torch? A CPU check for the GPU
machines' torch (after run 39, benchmarks/results/gpu_runs.md).

    python benchmarks/gpu/probes/reuse_probe.py

Run 39 applied run 33's stored `free` orders with the library's informed buffer-reuse gate (decisions.md 22)
and peaked where the blind gate had (5.41 GB), not where runs 34-37 had (5.26 GB): torch 2.11 has Inductor's
`_post_fusion_custom_pass` slot but not `CustomSchedulerPass`, and the check was only installed where it has
both. This script compiles the small re-gather step at `free` under the budget 1.3 (fake process group) three
ways and walks each generated `call` (benchmarks/gpu/probes/code_memory.py): the library alone; the library behind
e2e_step's own after-fusion hook (as runs 34-39 compiled rank 0); and that hook alone, which leaves no info
(the blind gate). The first two must agree, and differ from the third.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def main() -> None:
    import torch
    import torch._inductor.config as icfg
    import torch._inductor.memory as memory
    import torch.distributed as dist
    from torch._inductor.utils import run_and_get_code

    from benchmarks.gpu.probes.code_memory import small_step, walk
    from benchmarks.gpu.probes.fusion_memory import after_fusion
    from overlapsat.store import solve_store
    from overlapsat.torch import after_fusion as af
    from overlapsat.torch.fx_apply import install_fx

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("overlapsat.torch.after_fusion").setLevel(logging.DEBUG)
    print("torch", torch.__version__, "| prepare_planning_info:", hasattr(memory, "prepare_planning_info"),
          "| CustomSchedulerPass:", af._Base is not object, "| slot:", hasattr(icfg, "_post_fusion_custom_pass"))
    model, x = small_step("ind_probe_")
    store = tempfile.mkdtemp(prefix="osat_probe_")
    install_fx("capture", store, collective_order="free")
    torch.compile(model)(x).sum().backward()
    solve_store(store, time_limit=300, work_limit=6, workers=2, collective_order="free", memory_budget="1.3x")
    walks = {}
    for variant in ("library", "e2e_hook", "hook_alone"):
        est: list = []
        torch._dynamo.reset()
        install_fx("apply", store, collective_order="free")
        lib = icfg._post_fusion_custom_pass
        if variant == "e2e_hook":
            icfg._post_fusion_custom_pass = lambda n, prev=lib, est=est: prev(after_fusion(n, est))
        elif variant == "hook_alone":
            icfg._post_fusion_custom_pass = lambda n, est=est: after_fusion(n, est)
        _, codes = run_and_get_code(lambda: torch.compile(model)(x).sum().backward())
        icfg._post_fusion_custom_pass = None
        bodies = [c.split("def call(", 1)[1] for c in codes if "def call(" in c]
        walks[variant] = [round(walk(b) / 1e6, 2) for b in bodies]
        print(f"{variant}: library check installed: {isinstance(lib, af.AfterFusionCheck)} | code walk, MB: "
              f"{walks[variant]} | '# reuse' lines: {[b.count('# reuse') for b in bodies]}")
    informed = walks["library"] == walks["e2e_hook"] != walks["hook_alone"]
    print("the library leaves the info on this torch:", informed)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
