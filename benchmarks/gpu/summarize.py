"""Per-run tables from the raw files of benchmarks/gpu/e2e_step.py runs.

benchmarks/results/gpu_tables.md is this script's output over every run.

    python benchmarks/gpu/summarize.py benchmarks/results/gpu_2026-11-22/run*/results.json

Per run: each configuration's median step time, its change against no reordering and against the best of
torch's reorderings (b_iter, b_three, c), the exposed communication the profiler saw, kernel time, the
in-step slowdowns, peak memory and whether the compiled loss matched; then overlapsat's predictions for
the captured order (what a runs) and the solved one (what d runs) against the measurements.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

NAMES = {"a": "a: no reordering", "b_iter": "b: iterative pair", "b_three": "b: three passes",
         "c": "c: FX OverlapScheduler", "d": "d: overlapsat (FX)", "d_int": "d_int: overlapsat, transfers x1.5",
         "d_tie": "d_tie: overlapsat, contention tie-break", "d_mem": "d_mem: overlapsat, memory budget",
         "d_hold": "d_hold: overlapsat, partial-hold tie-break",
         "d_kern": "d_kern: overlapsat, GEMMs priced by size"}
OURS = ("d", "d_int", "d_tie", "d_mem", "d_hold", "d_kern")


def ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1e3:.2f}"


def waits_table(d: dict, step: dict) -> None:
    """Runs 13 on: the exposed-communication measure fixed before they ran (waits on NCCL after the profiler's
    warm-up step) against the plain and contended predictions, and measured peaks against predicted ones."""
    cfgs = d["configs"]
    rows = []
    for c in NAMES:
        p = cfgs.get(c, {}).get("ranks", [{}])[0].get("profile", {})
        if "waits_on_nccl_us" not in p:
            continue
        if c in OURS:  # the solved order, on the graphs this configuration solved
            gs, label = d.get("prediction" if c == "d" else f"prediction_{c}", {}).get("graphs"), "solved"
        else:  # (a) runs the captured order of d's graphs
            gs, label = (d.get("prediction", {}).get("graphs") if c == "a" else None), "captured"
        pe = pc = pk = pb = ph = "-"
        if gs and all(label in g for g in gs):
            fig = [g[label] for g in gs]
            pe = ms(sum(f["exposed_us"] for f in fig))
            pc = ms(sum(f["contended_exposed_us"] for f in fig))
            if all("boundary_exposed_us" in f for f in fig):  # recorded from run 19 on
                pb = ms(sum(f["boundary_exposed_us"] for f in fig))
            if all("hold_exposed_us" in f for f in fig):  # recorded after run 26
                ph = ms(sum(f["hold_exposed_us"] for f in fig))
            # the parameters are the forward graph's primals (backward sees only those it reads); the files are
            # in hash order, so take the largest rather than the first (runs 13-18 had the same in both)
            params = max(g.get("primals_bytes") or 0 for g in gs)
            pk = f"{(params + max(f['peak_bytes'] for f in fig)) / 1e9:.2f}"
        r0 = cfgs[c]["ranks"][0]
        rows.append(f"| {NAMES[c]} | {step[c]:.2f} | {ms(p['waits_on_nccl_us'])} | "
                    f"{ms(p['waits_on_nccl_median_step_us'])} | {pe} | {pc} | {pb} | {ph} | "
                    f"{ms(p.get('exposed_after_warmup_us'))} | "
                    f"{r0['peak_memory_bytes'] / 1e9:.2f} | {pk} |")
    if rows:
        print("\nWaits on NCCL (the measure fixed before runs 13 on; mean over the profiled steps after the warm-up "
              "step) against overlapsat's predictions; peaks: measured, and predicted as the graph inputs (primals) "
              "plus the larger graph peak:\n")
        print("| configuration | step ms | waits on NCCL ms | median step | predicted plain | predicted contended | "
              "predicted, boundary rule | predicted, hold 0.70 | old reading (NCCL alone), same steps | peak GB | "
              "predicted peak GB |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        print("\n".join(rows))


def main(paths: list[str]) -> None:
    wins: dict[str, list[float]] = {}
    for path in paths:
        d = json.load(open(path, encoding="utf-8"))
        late = os.path.join(os.path.dirname(path), "prediction_offline.json")
        if os.path.exists(late) and not all("solved" in g for g in d.get("prediction", {}).get("graphs", [{}])):
            # runs 24 and 26 (collective_order="free"): the run read the schedules at "group" and predicted no
            # solved order; `e2e_step.py --predict` recomputed it afterwards from the stored graphs and schedules
            d["prediction"] = json.load(open(late, encoding="utf-8"))
            print(f"\n(predictions for {path}: computed after the run from its stored graphs, prediction_offline.json)")
        meta, cfgs = d["meta"], d["configs"]
        args = meta["args"]
        print(f"\n### {path}\n\n{meta['date']}, torch {meta['torch']}, NCCL {meta.get('nccl')}, {meta.get('gpu')} x "
              f"{args['world']}; {args['layers']} layers, dim {args['dim']}, ffn {args['ffn']}, seq {args['seq']}, "
              f"bf16; median of {args['steps']} steps after {args['warmup']}; profiler over {args['prof_steps']} steps\n")
        step = {c: v["ranks"][0]["step_ms_median"] for c, v in cfgs.items() if "ranks" in v}
        if "a" not in step:
            print("(no run without reordering in this file)\n")
        torch_best = min(((step[c], c) for c in ("b_iter", "b_three", "c") if c in step), default=None)
        print("| configuration | step ms (rank 0 / 1) | vs a | vs best of b, c | exposed comm ms | NCCL kernels ms | "
              "compute kernels ms | slowdown overlapped: compute / NCCL | peak memory GB | loss = eager (bf16) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |")
        for c in NAMES:
            if c not in cfgs:
                continue
            if "ranks" not in cfgs[c]:
                print(f"| {NAMES[c]} | failed: {cfgs[c]['error'][-120:]} |")
                continue
            r0, r1 = cfgs[c]["ranks"][0], cfgs[c]["ranks"][-1]
            p = r0.get("profile", {})
            ck, nk = p.get("compute_kernels", {}), p.get("nccl_kernels", {})
            sd = " / ".join("-" if k.get("slowdown") is None else f"{k['slowdown']:.2f}" for k in (ck, nk))
            rel_a = f"{100 * (step[c] / step['a'] - 1):+.1f} %" if "a" in step else "-"
            rel_b = f"{100 * (step[c] / torch_best[0] - 1):+.1f} %" if torch_best else "-"
            same = abs(r0["loss_compiled"] - r0["loss_eager"]) <= 0.01 * abs(r0["loss_eager"])
            print(f"| {NAMES[c]} | {step[c]:.2f} / {r1['step_ms_median']:.2f} | {rel_a} | {rel_b} | "
                  f"{ms(p.get('exposed_comm_us'))} | {ms(nk.get('time_us'))} | {ms(ck.get('time_us'))} | {sd} | "
                  f"{r0['peak_memory_bytes'] / 1e9:.3f} | {'yes' if same else 'NO'} ({r0['loss_compiled']:.4f} / "
                  f"{r0['loss_eager']:.4f}) |")
        if "d" in step and torch_best and ("b_iter" in step or "b_three" in step):  # a run without (b): no claim
            key = (f"{args['world']} GPUs, {args['layers']} layers, seq {args['seq']}"
                   + (", re-gathered in backward" if args.get("regather") else ""))
            wins.setdefault(key, []).append(100 * (step["d"] / torch_best[0] - 1))
        for c in NAMES:  # from the runs after run 33 on: the allocator's peaks by phase (e2e_step.memory_phases)
            r0 = cfgs.get(c, {}).get("ranks", [{}])[0]
            af = r0.get("after_fusion_peaks")
            if af:
                print(f"\n{NAMES[c]}: Inductor's peak after fusion per graph (collectives: MB): "
                      + ", ".join(f"{k}: {v / 1e6:.1f}" if k != "error" else f"error {v}" for k, v in af))
            m = r0.get("memory")
            if m and "error" not in m:
                print(f"\n{NAMES[c]}: one step's peaks, GB: requested {(m.get('requested_bytes_peak') or 0) / 1e9:.3f}, "
                      f"allocated {(m.get('allocated_bytes_peak') or 0) / 1e9:.3f}, forward graph "
                      f"{m['forward_peak_bytes'] / 1e9:.3f}, reserved {(m.get('reserved_bytes_peak') or 0) / 1e9:.3f}")
        pred = d.get("prediction")
        if not pred:  # a run of overlapsat's variants only (run 33: d_mem): their own predictions, if any
            waits_table(d, step)
            continue
        gs = pred["graphs"]
        print("\nPredicted (overlapsat's simulator on the captured FX graphs, forward + backward) against measured:\n")
        print("| order | predicted makespan ms | measured step ms | predicted exposed ms | with interference "
              "(pre-enqueued 1.016 / 1.044) | (alternating 1.22 / 1.47) | measured exposed ms |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, c in (("captured", "a"), ("solved", "d")):
            if not all(label in g for g in gs) or c not in cfgs or "ranks" not in cfgs[c]:
                continue
            tot = {k: sum(g[label][k] for g in gs) for k in gs[0][label]}
            meas = cfgs[c]["ranks"][0].get("profile", {}).get("exposed_comm_us")
            print(f"| {label} ({c}) | {ms(tot['makespan_us'])} | {step[c]:.2f} | {ms(tot['exposed_us'])} | "
                  f"{ms(tot['exposed_with_nvlink_pre_enqueued_us'])} | {ms(tot['exposed_with_issue_alternating_us'])} | "
                  f"{ms(meas)} |")
        comp = sum(g["compute_us"] for g in gs)
        meas_comp = cfgs["a"]["ranks"][0].get("profile", {}).get("compute_kernels", {}).get("time_us") if "a" in cfgs else None
        print(f"\nCompute the model prices: {ms(comp)} ms; compute kernels measured in a (little overlap): "
              f"{ms(meas_comp)} ms. Predicted peaks (captured / solved, parameters excluded): "
              + ", ".join(f"{g['captured']['peak_bytes'] / 1e9:.2f} / {g['solved']['peak_bytes'] / 1e9:.2f} GB"
                          for g in gs if "solved" in g))
        waits_table(d, step)
    for key, ws in wins.items():
        print(f"\n{key}: overlapsat against the best of torch's reorderings, per run: "
              f"{', '.join(f'{w:+.1f} %' for w in ws)} (median {statistics.median(ws):+.1f} %)")


if __name__ == "__main__":
    main(sys.argv[1:])
