"""Rank 0's memory on one GPU, the fake process group standing for the other ranks: the table, from the raw files.

    python benchmarks/gpu/fake_memory.py [benchmarks/results/gpu_2026-12-02_fake] > FOLDER/table.md

Reads `*/results.json` of `benchmarks/gpu/fake_memory.sh` (and `eq_shape.sh` with `EXTRA=--fake`). Per step and
configuration: the caching allocator's peak (`torch.cuda.max_memory_allocated`, the blocks it handed out) and the
bytes the tensors asked for (`requested_bytes_peak`), the budget of a plan under the default budget (`a`'s
measured peak in the same call: the order it replaces), the predicted peak (`equal_memory.predicted_peak`, and
read after Inductor's fusion, `after_fusion_peak`) and,
where the same shape ran on NCCL before, that run's measured peak for the same configuration: where the two are
equal, the fake process group is a faithful stand-in for that configuration's memory.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.equal_memory import (  # noqa: E402
    GEMM_WORKSPACES,
    LOSS_COPIES,  # noqa: F401 - the test reads them here
    LOSS_SCALARS,  # noqa: F401
    after_fusion_peak,
    predicted_peak,
    primals_bytes,
    replayed_run,
    saved_in,
    step_prediction,
)

# each step's earlier run on NCCL (2 or 4 GPUs), for the configurations both ran
NCCL_RUNS = {"eq": "gpu_2026-11-28/eq", "w4_regather": "gpu_2026-11-28/eqshape_w4_regather",
             "w4_regather_rounds": "gpu_2026-11-28/eqshape_w4_regather",
             "tp2_regather": "gpu_2026-11-30_w4/eqshape_w4_tp2_regather",
             "tp2_regather_again": "gpu_2026-11-30_w4/eqshape_w4_tp2_regather",
             "tp2_regather_again_snapshot": "gpu_2026-11-30_w4/eqshape_w4_tp2_regather",
             "w4_regather_trial": "gpu_2026-11-28/eqshape_w4_regather"}
# (a step that applied an NCCL run's plan store, `--store-from`, is compared with that run: `replayed_run`)
DEFAULT_BUDGET = ("p", "p_co")  # plans under the default budget: the captured order's peak


def saved_for_backward(folder: str, step: str) -> int | None:
    """`equal_memory.saved_in` for a step of this folder: a step run again (`_again*`, `_trial`, `_rounds`) has
    its first run's graphs."""
    base = re.sub(r"(_again.*|_trial|_rounds)$", "", step)
    return saved_in(os.path.join(folder, step), os.path.join(folder, base))


def rows(folder: str) -> list[dict]:
    """One row per step and configuration, in the order the calls ran them."""
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*", "results.json"))):
        step = os.path.basename(os.path.dirname(path))
        d = json.load(open(path, encoding="utf-8"))
        nccl_run = NCCL_RUNS.get(step) or replayed_run(d) or "-"
        real_path = os.path.join(ROOT, "benchmarks", "results", nccl_run, "results.json")
        real = json.load(open(real_path, encoding="utf-8"))["configs"] if os.path.exists(real_path) else {}
        a_row, saved = d["configs"]["a"]["ranks"][0], saved_for_backward(folder, step)
        for cfg, v in d["configs"].items():
            r = v["ranks"][0]
            peak = r["peak_memory_bytes"]
            real_ranks = (real.get(cfg) or {}).get("ranks") or []
            nccl = [x.get("peak_memory_bytes") for x in real_ranks]
            out.append({"step": step, "config": cfg, "peak": peak, "requested": r["memory"]["requested_bytes_peak"],
                        "budget": a_row["peak_memory_bytes"] if cfg in DEFAULT_BUDGET else None,
                        "a_requested": a_row["memory"]["requested_bytes_peak"],
                        "predicted": predicted_peak(d, cfg), "fused": after_fusion_peak(d, cfg),
                        "step_predicted": step_prediction(d, cfg, saved),
                        "nccl": max(nccl) if nccl and all(nccl) else None,
                        "rounds": len(r.get("resolved") or []),
                        # a plan store of an earlier run applied as it was (`--store-from`), and the FX graphs'
                        # sizes as this run and the NCCL run applied them
                        "replayed": bool(d["meta"]["args"].get("store_from")) and cfg != "a",
                        "applied": r.get("applied_graphs"),
                        "nccl_applied": real_ranks[0].get("applied_graphs") if real_ranks else None})
    return out


def table(folder: str) -> list[str]:
    """The raw folder's table (`table.md`): every row, the bytes exact, so a test can hold a page to them."""
    out = ["| step | configuration | measured peak B (allocator) | requested B | budget B | over it B | "
           "predicted B (FX) | vs measured | predicted after fusion | vs measured | predicted step B | vs measured | "
           "- requested B | NCCL run's peak B | fake - NCCL B |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for x in rows(folder):
        over = "-" if x["budget"] is None else f"{x['peak'] - x['budget']:,}"
        pred = "-" if x["predicted"] is None else f"{x['predicted']:,}"
        err = "-" if x["predicted"] is None else f"{100 * (x['predicted'] / x['peak'] - 1):+.1f} %"
        fused = "-" if x["fused"] is None else f"{x['fused']:,}"
        ferr = "-" if x["fused"] is None else f"{100 * (x['fused'] / x['peak'] - 1):+.1f} %"
        nccl = "-" if x["nccl"] is None else f"{x['nccl']:,}"
        diff = "-" if x["nccl"] is None else f"{x['peak'] - x['nccl']:,}"
        sp = x["step_predicted"]
        step = "- | - | -" if sp is None else (f"{sp:,} | {100 * (sp / x['peak'] - 1):+.1f} % | "
                                                f"{sp - x['requested']:+,}")
        cfg = x["config"] + (f", {x['rounds']} round(s) solved again" if x["rounds"] else "")
        budget = "-" if x["budget"] is None else f"{x['budget']:,}"
        out.append(f"| {x['step']} | `{cfg}` | {x['peak']:,} | {x['requested']:,} | {budget} | {over} | {pred} | "
                   f"{err} | {fused} | {ferr} | {step} | {nccl} | {diff} |")
    return out


def summary(folder: str) -> list[str]:
    """The sentences a page quotes: the stand-in against NCCL, the default budget, the predictions (a step run
    again, `<step>_again` or `<step>_again_<why>`, and `a` of a `<step>_trial`, is counted once: its own sentence
    says whether it measured the same)."""
    every = rows(folder)

    def repeat(x: dict) -> bool:  # `a` of a `_trial` or `_111` step is the same order again, in a call of its own
        return "_again" in x["step"] or (x["step"].endswith(("_trial", "_111")) and x["config"] == "a")

    def base_of(x: dict) -> str:  # the run a repeat repeats: `a` is the same order in every run of a step
        step = x["step"].split("_again")[0]
        return step.removesuffix("_trial").removesuffix("_111") if x["config"] == "a" else step

    xs = [x for x in every if not repeat(x)]
    again = [(x, _run_of(xs, x["config"], base_of(x))) for x in every if repeat(x)]
    same = [x for x in xs if x["nccl"] is not None and abs(x["peak"] - x["nccl"]) <= 512]
    other = [x for x in xs if x["nccl"] is not None and abs(x["peak"] - x["nccl"]) > 512 and not x["replayed"]]
    held = [x for x in xs if x["budget"] is not None]
    over = [x for x in held if x["peak"] > x["budget"]]
    fx = [x for x in xs if x["predicted"] is not None]
    fused = [x for x in xs if x["fused"] is not None]

    def within(rs, key):
        return sum(abs(x[key] / x["peak"] - 1) <= 0.05 for x in rs)

    return [
        f"Against the NCCL runs of the same shapes: {len(same)} of {len(same) + len(other)} rows measure the same "
        f"peak to 512 B ({', '.join(sorted({x['config'] for x in same}))}); the other {len(other)} are "
        f"configurations that ran other schedules ({', '.join(sorted({x['config'] for x in other}))}).",
        f"Plans under the default budget: {len(held) - len(over)} of {len(held)} measure within it; over it: "
        + "; ".join(f"{x['step']} `{x['config']}` by {x['peak'] - x['budget']:,} B (requested "
                    f"{x['requested'] - x['a_requested']:+,} B)" for x in over) + ".",
        f"Predicted peak within 5 % of measured: {within(fx, 'predicted')} of {len(fx)} by the FX graphs, "
        f"{within(fused, 'fused')} of {len(fused)} read after fusion.",
        step_sentence(xs),
        f"Run again in a call of its own: {sum(x['peak'] == y['peak'] for x, y in again)} of {len(again)} "
        "configurations measured the same peak to the byte.",
        trial_sentence(every),
        kept_sentence(every),
        emitted_sentence(every),
        replay_sentence(every),
    ]


def replay_sentence(every: list[dict]) -> str:
    """An NCCL run's own plan store applied by a later library (`--store-from`): the same plans, measured and
    predicted again, and the applied FX graphs' sizes on both sides (a bucket's copies are ops of the applied
    graph: where the sizes differ, the plans were applied otherwise)."""
    rs = [x for x in every if x["replayed"] and x["nccl"] is not None]
    return "The NCCL runs' own plan stores applied by this folder's library: " + "; ".join(
        f"{x['step']} `{x['config']}` measured {x['peak']:,} B, {x['peak'] - x['nccl']:+,} B against the NCCL "
        f"run's {x['nccl']:,} B, predicted for the whole step at {100 * (x['step_predicted'] / x['peak'] - 1):+.1f} %"
        f" (applied FX graphs of {', '.join(f'{n:,}' for n in x['applied'])} nodes, against "
        f"{', '.join(f'{n:,}' for n in x['nccl_applied'])} there)" for x in rs) + "."


def step_sentence(xs: list[dict]) -> str:
    """The page's sentence on the whole step's prediction (`step_prediction`) against the allocator's peak and
    against the bytes the tensors asked for."""
    got = [x for x in xs if x["step_predicted"] is not None]
    err = [100 * (x["step_predicted"] / x["peak"] - 1) for x in got]
    req = [x["step_predicted"] - x["requested"] for x in got]
    return (f"Predicted for the whole step (the graphs' inputs and the GEMM workspaces, {GEMM_WORKSPACES:,} B, plus "
            f"the largest phase: each graph read after fusion, or the harness's eager loss between them): "
            f"{sum(abs(e) <= 5 for e in err)} of {len(got)} rows within 5 % of measured ({min(err):+.1f} to "
            f"{max(err):+.1f} %: below, the allocator's blocks above the tensors; above, on "
            f"{sum(e > 0 for e in err)} rows, graphs Inductor re-sorted by memory after the reading, as it does "
            f"without overlapsat); against the bytes the tensors asked for "
            f"at the peak, {sum(r == 0 for r in req)} of {len(got)} to the byte and "
            f"{sum(abs(r) <= 0.01 * x['requested'] for r, x in zip(req, got))} within 1 % "
            f"({min(req):+,} to {max(req):+,} B).")


def _run_of(rows: list[dict], cfg: str, *steps: str) -> dict:
    """The row of `cfg` in the first of `steps` that ran it: a step's earlier run, to compare a later one with."""
    return next(y for s in steps for y in rows if y["step"] == s and y["config"] == cfg)


def _over(x: dict) -> str:
    """A default-budget row's bytes over its budget, measured and requested (against `a`'s)."""
    return f"{x['peak'] - x['budget']:,} B (requested {x['requested'] - x['a_requested']:+,} B)"


def kept_sentence(every: list[dict]) -> str:
    """Decision 111 (`<step>_111`: a graph compiled as it came gets Inductor's own re-sorting by memory, and the
    captured order's peak after fusion is read after it) against the same step's latest run before it (with
    decision 110 where there is one): the default-budget plans' bytes over their budget."""
    pairs = [(x, _run_of(every, x["config"], x["step"][: -len("_111")] + "_trial", x["step"][: -len("_111")]))
             for x in every if x["step"].endswith("_111") and x["budget"] is not None]
    return ("With decision 111 a default-budget plan whose graph is set aside compiles that graph as Inductor alone "
            "would: " + "; ".join(f"{y['step']} `{y['config']}` over by {_over(y)} before it, by {_over(x)} with it"
                                  for x, y in pairs) + ".")


def emitted_sentence(every: list[dict]) -> str:
    """The harness's readings after fusion on the order Inductor emits (`e2e_step.emitted_order`, `_emitted`
    steps) against the same configurations read before: the whole step's prediction."""
    def err(x: dict) -> str:
        return f"{100 * (x['step_predicted'] / x['peak'] - 1):+.1f} %"

    pairs = [(x, _run_of(every, x["config"], x["step"].split("_again")[0])) for x in every
             if x["step"].endswith("_emitted")]
    return ("Read on the order Inductor emits (the harness reads after overlapsat's check and, where Inductor "
            "re-sorts by memory, after that re-sorting, since the `_emitted` call), the whole step's prediction: "
            + "; ".join(f"{y['step']} `{x['config']}` {err(x)} (read before: {err(y)})" for x, y in pairs) + ".")


def trial_sentence(every: list[dict]) -> str:
    """Decision 110 (`<step>_trial`: the library with the trial lowering) against the same step's first compile
    before it: the default-budget plans' bytes over their budget, measured and requested."""
    pairs = [(x, _run_of(every, x["config"], x["step"][: -len("_trial")])) for x in every
             if x["step"].endswith("_trial") and x["budget"] is not None]

    return ("With the trial lowering (decision 110), the first compile of a default-budget plan over its budget after "
            "fusion keeps the captured order for that graph: " + "; ".join(
                f"{y['step']} `{y['config']}` over by {_over(y)} before it, by {_over(x)} with it" for x, y in pairs)
            + ".")


def loss_phase(folder: str, step: str = "tp2_regather_again_snapshot") -> dict:
    """Where `a`'s peak falls on `step` (a run with `--snapshot`: the allocator's events of one step, kept as
    `events_a.json.xz`), and what is live there, by who asked for each block: the bytes held before the step,
    the compiled graphs' blocks (the frame is a module of Inductor's), and the harness's eager loss
    (`.float().pow(2).mean()` and its backward: e2e_step.py's frames, and autograd's, which have none outside
    torch). Beside them the FX model's figure for what the forward graph leaves the backward: the backward
    graph's freeable inputs less its incoming gradient (`tangents_*`), read from the plan store of the step's
    earlier call, whose captured graphs are the same."""
    import lzma

    with lzma.open(os.path.join(folder, step, "events_a.json.xz"), "rt", encoding="utf-8") as f:
        snap = json.load(f)
    base, live, cur, peak, at_peak = snap["base_allocated_bytes"], {}, snap["base_allocated_bytes"], 0, {}
    for action, addr, size, where in snap["events"]:
        if action == "alloc":
            live[addr] = (size, where)
            cur += size
        elif action == "free_completed":
            cur -= live.pop(addr, (size, ""))[0]
        if cur > peak:
            peak, at_peak = cur, dict(live)
    loss = [s for s, w in at_peak.values() if w.startswith("e2e_step.py") or w == "-"]
    graphs = sum(s for s, _ in at_peak.values()) - sum(loss)
    base_step = step.split("_again")[0]
    saved = saved_in(os.path.join(folder, base_step))
    d = json.load(open(os.path.join(folder, step, "results.json"), encoding="utf-8"))
    r0 = d["configs"]["a"]["ranks"][0]
    return {"peak": peak, "base": base, "held_before_steps": r0["allocated_before_steps_bytes"],
            "graphs": graphs, "model_saved": saved, "loss": sum(loss), "loss_blocks": sorted(loss, reverse=True),
            "requested_peak": r0["memory"]["requested_bytes_peak"], "measured": r0["peak_memory_bytes"],
            "primals": primals_bytes(json.load(open(os.path.join(folder, base_step, "results.json"),
                                                    encoding="utf-8")), "a")}


def loss_phase_sentence(folder: str) -> str:
    """The page's sentence on where the tensor-parallel step's `a` peaks, from `loss_phase` and the loss-in-graph
    run (`tp2_regather_loss_in_graph`)."""
    x = loss_phase(folder)
    fp32 = [s for s in x["loss_blocks"] if s > 1024]
    lig = {r["config"]: r for r in rows(folder) if r["step"] == "tp2_regather_loss_in_graph"}["a"]
    return (f"The tensor-parallel step's `a` peaks in neither compiled graph but in the harness's eager loss "
            f"between them (`.float().pow(2).mean()` and its backward, outside `torch.compile`). A memory snapshot "
            f"of one step (`tp2_regather_again_snapshot`) holds at its peak of {x['peak']:,} B: {x['base']:,} B "
            f"held before the step, {x['graphs']:,} B the forward graph left for the backward (the FX model's "
            f"saved inputs of the backward graph: {x['model_saved']:,} B), and {x['loss']:,} B of the loss "
            f"({len(fp32)} fp32 copies of the step's output, {fp32[0]:,} B each, and scalars). The FX model prices "
            f"the graphs only; the sum above is {x['peak'] - x['requested_peak']:+,} B from the timed steps' "
            f"requested peak ({x['requested_peak']:,} B: the bytes by which what is held before the step passes "
            f"the graphs' inputs and the GEMM workspaces, {x['held_before_steps'] - x['primals'] - GEMM_WORKSPACES:,} "
            f"B, are no tensor of the peak, as the whole step's prediction meets that peak without them) and "
            f"{100 * (x['peak'] / x['measured'] - 1):+.1f} % from their measured peak. With the loss "
            f"inside the compiled graph (`tp2_regather_loss_in_graph`, `--loss-in-graph`) `a` measures "
            f"{lig['peak']:,} B and the FX model reads it at {100 * (lig['predicted'] / lig['peak'] - 1):+.1f} %.")


def trial_log(folder: str, step: str) -> dict:
    """What a step's INFO lines (`OVERLAPSAT_LOG=INFO`) say of its plans after fusion, per graph: the trial's
    reading (decision 110: `peak`, `budget`, and whether it `applied` the plan) and whether the check after
    fusion then found the applied plan over its budget (`check_over`)."""
    out: dict[str, dict] = {}
    trial = re.compile(r"graph (\w+): the plan, lowered and fused as Inductor will, peaks at (\d+) B after fusion"
                       r".*?(within|over) its budget of (\d+) B")
    check = re.compile(r"graph (\w+) was ordered within a memory budget .* but after Inductor's fusion its peak is")
    for line in open(os.path.join(folder, step, "log.txt"), encoding="utf-8"):
        if m := trial.search(line):
            out[m[1]] = {"peak": int(m[2]), "budget": int(m[4]), "applied": m[3] == "within", "check_over": False}
        elif m := check.search(line):
            out[m[1]]["check_over"] = True
    return out


def pins_sentence(folder: str, before: str = "newshape_w4_tp2_regather_again_info",
                  after: str = "newshape_w4_tp2_regather_again_pins") -> str:
    """The trial with the plan's pins (`after`) against the trial without them (`before`) on the graph where the
    two differ: the one the check after fusion found over its budget."""
    b, a = trial_log(folder, before), trial_log(folder, after)
    g = next(k for k, v in b.items() if v["check_over"])
    checks = sum(v["check_over"] for v in a.values())
    return (f"The trial's copy with the plan's pins (`{after}`, 2026-12-02 evening): graph {g[:8]}'s plan read "
            f"{a[g]['peak']:,} B after fusion against its budget of {a[g]['budget']:,} B, and was "
            f"{'applied' if a[g]['applied'] else 'set aside in that compile'}; the check after fusion found "
            f"{checks} applied plan(s) over budget. Without the pins (`{before}`) the trial had applied it "
            f"({b[g]['peak']:,} B after its moves) and the check had found it over.")


def backward_launches(folder: str, step: str = "shape3_w4_tp2_regather_again_snapshot") -> dict[str, list[str]]:
    """Per configuration of a `--snapshot` step, the kernels its backward graph's generated code launches, in order
    (numbered kernels by their fused ops' names): which order each compile emitted. The modules were kept as
    `snapshot_<cfg>.modules.tgz`; a configuration whose process compiled the backward graph more than once (a
    trial lowering) keeps the module its snapshot ran, the one the allocator's events name."""
    import lzma
    import tarfile

    out = {}
    for tgz in sorted(glob.glob(os.path.join(folder, step, "snapshot_*.modules.tgz"))):
        cfg = os.path.basename(tgz)[len("snapshot_"):-len(".modules.tgz")]
        with lzma.open(os.path.join(folder, step, f"events_{cfg}.json.xz"), "rt", encoding="utf-8") as f:
            ran = {w.split(":")[0] for *_, w in json.load(f)["events"] if w.endswith(tuple("0123456789"))}
        with tarfile.open(tgz) as t:
            for m in t.getmembers():
                text = t.extractfile(m).read().decode() if m.isfile() else ""
                if os.path.basename(m.name) in ran and "_backward" in text.split("\n", 1)[0]:
                    call = text.split("def call(", 1)[1]
                    out[cfg] = [re.sub(r"_\d+$", "", k) for k in re.findall(r"(triton_\w+?_\d+)\.run", call)]
    return out


def page(folder: str) -> str:
    """`table.md`: the table, then the sentences."""
    return ("\n".join(table(folder)) + "\n\n" + "\n\n".join(summary(folder)) + "\n\n" + loss_phase_sentence(folder)
            + "\n\n" + pins_sentence(folder) + "\n")


def expandable_page(folder: str, default: str, steps: dict[str, str]) -> str:
    """`table.md` of a folder run with the caching allocator's expandable segments
    (`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, torchtitan's launch setting): the table, then per step its
    default-budget plan against its budget, and against the same step under the default allocator (`default`'s
    step `steps[step]`)."""
    every = rows(folder)
    base = {(x["step"], x["config"]): x for x in rows(default)}
    out = ["\n".join(table(folder))]
    held = [x for x in every if x["budget"] is not None]
    over = [x for x in held if x["peak"] > x["budget"]]
    out.append(f"With expandable segments, plans under the default budget: {len(held) - len(over)} of {len(held)} "
               f"measure within it (" + "; ".join(f"{x['step']} `{x['config']}` {x['peak'] - x['budget']:+,} B"
                                                   for x in held) + ").")
    for x in held:
        a = next(r for r in every if r["step"] == x["step"] and r["config"] == "a")
        da, dp = base[(steps[x["step"]], "a")], base[(steps[x["step"]], x["config"])]
        out.append(f"{x['step']}: `a` measures {a['peak']:,} B and `{x['config']}` {x['peak']:,} B, "
                   f"{a['peak'] - a['requested']:,} and {x['peak'] - x['requested']:,} B above the bytes their "
                   f"tensors asked for at the peak; under the default allocator (`{steps[x['step']]}`, 2026-12-02) "
                   f"{da['peak']:,} and {dp['peak']:,} B, {dp['peak'] - dp['budget']:+,} B against that run's budget.")
    return "\n\n".join(out) + "\n"


EXPANDABLE = {"tp2_regather": "tp2_regather_111", "shape3_w4_tp2_regather": "shape3_w4_tp2_regather_111",
              "w4_regather": "w4_regather_111", "newshape_w4_tp2_regather": "newshape_w4_tp2_regather",
              "eq": "eq", "shape3_w4": "shape3_w4"}


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "benchmarks", "results", "gpu_2026-12-02_fake")
    if os.path.basename(os.path.normpath(folder)).endswith("_expandable"):  # 2026-12-03: the allocator's setting
        print(expandable_page(folder, os.path.join(ROOT, "benchmarks", "results", "gpu_2026-12-02_fake"), EXPANDABLE),
              end="")
        return
    print(page(folder), end="")


if __name__ == "__main__":
    main()
