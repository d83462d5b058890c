"""The coalesced plans of runs 91-94 predicted again with the group call's measured time per member (decision 56).

    python benchmarks/gpu/probes/reprice_coalesced.py [RESULTS_DIR]

The runs predicted their coalesced plans (`p_co`) at `group_member_us` 0. This reads each run's stored graphs
and plans again, prices them with the run's own profile as it stands now (the H100 profiles say 10.5 us, run 91's
probe), and prints, per run, the contended estimate before and after against the measured step: the same plans,
repriced offline, not a plan chosen at this price.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.e2e_step import predict  # noqa: E402
from benchmarks.gpu.plan_verdict import predicted, step_of  # noqa: E402
from benchmarks.gpu.run_files import unpack_store  # noqa: E402


def rows(results_dir: str) -> list[str]:
    from overlapsat.cost import cost_model
    from overlapsat.plan import group_member_us

    out = ["| run | step | measured ms | group_member_us | contended estimate at 0 | vs measured | "
           "at the profile's | vs measured |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for path in sorted(glob.glob(os.path.join(results_dir, "run*", "results.json"))):
        res = json.load(open(path))
        cfg = res["configs"].get("p_co", {})
        tar = os.path.join(os.path.dirname(path), "store.tar.gz")
        was = predicted(res, "p_co")
        if "ranks" not in cfg or not os.path.exists(tar) or was is None:
            continue
        args = res["meta"]["args"]
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(unpack_store(tar, tmp), "store", "p_co")
            now = predicted({"prediction_p_co": predict(store, args["collective_order"], args["profile"])}, "p_co")
        ms = cfg["ranks"][0]["step_ms_median"]
        member = group_member_us(cost_model(args["profile"]).duration)
        out.append(f"| {os.path.basename(os.path.dirname(path))[:5]} | {step_of(res)} | {ms:.2f} | {member:g} | "
                   f"{was[1]:.2f} | {100 * (was[1] / ms - 1):+.1f} % | {now[1]:.2f} | {100 * (now[1] / ms - 1):+.1f} % |")
    return out


if __name__ == "__main__":
    print("\n".join(rows(sys.argv[1] if len(sys.argv) > 1 else
                         os.path.join(ROOT, "benchmarks", "results", "gpu_2026-11-27"))))
