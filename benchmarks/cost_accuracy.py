"""Accuracy of overlapsat's cost model against measurements (docs/cost_model.md tables).

    python benchmarks/cost_accuracy.py

Collectives: measured = pass B of benchmarks/calibrate_collectives.py; the
calibrated model's tables come from pass A at power-of-two sizes only, so
off-grid sizes (1.5 x 2^k) test the interpolation. Inductor's prediction is
torch 2.13's estimate_nccl_collective_runtime_impl with the GPU type set to
Hopper (what it detects on an H200) and its NVLink bandwidth; "NCCL model"
is overlapsat's NCCL-style model with NCCL's constants and full link
bandwidth. GEMMs and memory-bound kernels: held-out shapes only.
"""

from __future__ import annotations

import json
import os

from overlapsat.cost import AnalyticalCostModel, build_calibration, estimate, load_profile
from overlapsat.cost.model import CalibratedCostModel

HERE = os.path.join(os.path.dirname(__file__), "results")


def inductor_us(op: str, nbytes: int, n: int) -> float:
    from torch._inductor import comm_analysis as ca

    ca.get_gpu_type = lambda: ca.NVIDIA_GPU_TYPE.HOPPER  # what it detects on an H200
    coll = {"all_gather": ca.NCCL_COLL.ALL_GATHER, "reduce_scatter": ca.NCCL_COLL.REDUCE_SCATTER,
            "all_reduce": ca.NCCL_COLL.ALL_REDUCE}[op]
    inp = nbytes // n if op == "all_gather" else nbytes  # Inductor prices the collective's input
    return ca.estimate_nccl_collective_runtime_impl(inp, n, coll) * 1000


def combined_collectives() -> dict:
    """The full sweep (1 KiB - 1 GiB) plus the dense 0.5 - 16 MiB sweep (8 sizes per octave)."""
    with open(os.path.join(HERE, "collectives_h200x2_2026-11-22.json")) as f:
        main = json.load(f)
    with open(os.path.join(HERE, "collectives_dense_h200x2_2026-11-22.json")) as f:
        dense = json.load(f)
    for r in dense["collectives"]:
        r["dense"] = True
    return {"meta": {"sweep": main["meta"], "dense": dense["meta"]},
            "collectives": main["collectives"] + dense["collectives"]}


def err(pred: float, meas: float) -> str:
    return f"{100 * (pred / meas - 1):+.1f}%"


def main() -> None:
    coll = combined_collectives()
    with open(os.path.join(HERE, "compute_h200_2026-11-22.json")) as f:
        comp = json.load(f)
    hw = load_profile("h200")
    cal = build_calibration("h200", coll, comp)
    model = CalibratedCostModel(AnalyticalCostModel(hw), cal)
    analytical = AnalyticalCostModel(hw)
    worst = {"overlapsat": 0.0, "analytical": 0.0, "inductor": 0.0, "nccl": 0.0}
    worst_held = 0.0
    print("| op | size | measured us | overlapsat us | err | analytical us | err | Inductor 2.13 us | err | "
          "NCCL model us | err |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = sorted(coll["collectives"], key=lambda r: (["all_gather", "reduce_scatter", "all_reduce"].index(r["op"]),
                                                      r["bytes"], r.get("dense", False)))
    for r in rows:
        b, op, n = r["bytes"], r["op"], r["group_size"]
        if b < 2**20:
            continue
        meas = r["queued_b_us"]
        preds = {"overlapsat": model.collective_us(op, b, n), "analytical": analytical.collective_us(op, b, n),
                 "inductor": inductor_us(op, b, n), "nccl": estimate(op, b, n, hw).time_us}
        for k, v in preds.items():
            worst[k] = max(worst[k], abs(v / meas - 1))
        if not r.get("grid", b & (b - 1) == 0):
            worst_held = max(worst_held, abs(preds["overlapsat"] / meas - 1))
        grid = r.get("grid", b & (b - 1) == 0)
        size = f"{b / 2**20:.4g} MiB" + ("" if grid else " (held out)") + (" d" if r.get("dense") else "")
        print(f"| {op} | {size} | {meas:.1f} | {preds['overlapsat']:.1f} | {err(preds['overlapsat'], meas)} | "
              f"{preds['analytical']:.1f} | {err(preds['analytical'], meas)} | {preds['inductor']:.1f} | "
              f"{err(preds['inductor'], meas)} | {preds['nccl']:.1f} | {err(preds['nccl'], meas)} |")
    print()
    print("worst |error| 1 MiB - 1 GiB: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in worst.items()))
    print(f"overlapsat on held-out sizes only: worst |error| {100 * worst_held:.1f}%")
    print()
    print("| kernel | shape | measured us | overlapsat us | err | roofline us | err |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    wg = wr = 0.0
    for k in comp["kernels"]:
        held = (k["kind"] == "gemm" and k["m"] == 4096) or (k["kind"] == "memory" and k["name"] in ("layernorm", "softmax"))
        if not held:
            continue
        gemm = k["kind"] == "gemm"
        pred = model.compute_us(k["flops"] if gemm else 0.0, k["bytes"], gemm)
        roof = analytical.compute_us(k["flops"] if gemm else 0.0, k["bytes"])
        shape = f"{k['m']}x{k['k']}x{k['n']}" if gemm else f"{k['numel']} elems"
        if gemm:
            wg, wr = max(wg, abs(pred / k["us"] - 1)), max(wr, abs(roof / k["us"] - 1))
        print(f"| {k['name']} | {shape} | {k['us']:.1f} | {pred:.1f} | {err(pred, k['us'])} | {roof:.1f} | "
              f"{err(roof, k['us'])} |")
    print()
    print(f"GEMMs (held out, m=4096): worst |error| overlapsat {100 * wg:.1f}%, roofline {100 * wr:.1f}%")


if __name__ == "__main__":
    main()
