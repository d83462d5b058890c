"""Fit the contention model's two slowdowns on some GPU runs and test it on others (#13, benchmarks/results/gpu_runs.md).

    python benchmarks/gpu/contention.py --fit RUN [RUN ...] --test RUN [RUN ...]
    python benchmarks/gpu/contention.py --objective RUN [RUN ...]

A RUN is a directory of benchmarks/gpu/e2e_step.py's output (results.json and
store.tar.gz), or `DIR:STORE_DIR` to borrow the graphs of another run of the
same configuration (solves are deterministic, so its captured and solved
orders are the ones that ran). For (a) the captured order and for (d) the
solved one, `simulate_contended` predicts the step, the exposed
communication, the compute-stream busy time and the NCCL busy time; the fit
picks the compute and NCCL slowdowns (a 0.01 grid) that best match the
measured compute and NCCL kernel times of the fit runs' (d), the only order
that overlaps much. The test runs are held out: their errors are the model's.

`--objective` asks whether the contention model would change the solver's
decisions on a run's graphs: it ranks the valid portfolio orders and the
solved one by plain and by contended makespan (at H200_STEP), and tries every
move of a collective or a wait by 1 to 40 places from the solved order that
keeps it valid, counting the moves that shorten the contended makespan.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.gpu.run_files import unpack_store  # noqa: E402
from overlapsat import is_valid, load_graph, simulate  # noqa: E402
from overlapsat.cost.interference import H200_STEP, Interference, simulate_contended  # noqa: E402
from overlapsat.cost.polish import SHIFTS, moved  # noqa: E402
from overlapsat.graph import COMPUTE  # noqa: E402
from overlapsat.heuristics.portfolio import run_all  # noqa: E402
from overlapsat.store import usable_schedule  # noqa: E402


def load_run(spec: str) -> tuple[dict, list]:
    """The run's results and its (graph, captured order, solved order) triples."""
    run, _, graphs_from = spec.partition(":")
    res = json.load(open(os.path.join(run, "results.json"), encoding="utf-8"))
    store = os.path.join(unpack_store(os.path.join(graphs_from or run, "store.tar.gz")), "store", "d")
    out = []
    for fn in sorted(os.listdir(store)):
        if fn.endswith(".graph.json"):
            g = load_graph(os.path.join(store, fn))
            order, why = usable_schedule(store, fn[: -len(".graph.json")], g)
            if order is None:
                raise SystemExit(f"{spec}: no usable schedule for {fn}: {why}")
            out.append((g, None, order))
    return res, out


def measured(res: dict, cfg: str) -> dict | None:
    c = res["configs"].get(cfg)
    if not c or "ranks" not in c:
        return None
    r0 = c["ranks"][0]
    p = r0.get("profile", {})
    return {"step": r0["step_ms_median"] * 1e3, "exposed": p.get("exposed_comm_us"),
            "compute": p.get("compute_kernels", {}).get("time_us"), "comm": p.get("nccl_kernels", {}).get("time_us")}


def predicted(graphs: list, cfg: str, inter: Interference) -> dict:
    tot = {"step": 0.0, "exposed": 0.0, "compute": 0.0, "comm": 0.0}
    for g, captured, solved in graphs:
        r = simulate_contended(g, captured if cfg == "a" else solved, inter)
        for k, v in (("step", r.makespan), ("exposed", r.exposed), ("compute", r.compute_busy), ("comm", r.comm_busy)):
            tot[k] += v
    return tot


def fit(runs: list) -> Interference:
    best = None
    for i in range(0, 101):
        for j in range(0, 151):
            inter = Interference(1 + i / 100, 1 + j / 100)
            err = 0.0
            for res, graphs in runs:
                m = measured(res, "d")
                p = predicted(graphs, "d", inter)
                err += ((p["compute"] - m["compute"]) / m["compute"]) ** 2 + ((p["comm"] - m["comm"]) / m["comm"]) ** 2
            if best is None or err < best[0]:
                best = (err, inter)
    return best[1]


def report(label: str, specs: list[str], runs: list, inter: Interference) -> list[dict]:
    rows = []
    print(f"\n{label}: compute x{inter.compute_slowdown:.2f}, NCCL x{inter.comm_slowdown:.2f}\n")
    print("| run | world | order | step ms meas / plain / contended | exposed ms meas / plain / contended | "
          "compute ms meas / contended | NCCL ms meas / contended |")
    print("| --- | ---: | --- | --- | --- | --- | --- |")
    for spec, (res, graphs) in zip(specs, runs):
        for cfg in ("a", "d"):
            m = measured(res, cfg)
            if m is None:
                continue
            plain, cont = predicted(graphs, cfg, Interference()), predicted(graphs, cfg, inter)

            def e(k, m=m, cont=cont):
                return f"{100 * (cont[k] / m[k] - 1):+.0f} %"
            name = os.path.basename(spec.partition(":")[0].rstrip("/"))
            print(f"| {name} | {res['meta']['args']['world']} | {cfg} | {m['step'] / 1e3:.2f} / {plain['step'] / 1e3:.2f} / "
                  f"{cont['step'] / 1e3:.2f} ({e('step')}) | {m['exposed'] / 1e3:.2f} / {plain['exposed'] / 1e3:.2f} / "
                  f"{cont['exposed'] / 1e3:.2f} ({e('exposed')}) | {m['compute'] / 1e3:.2f} / {cont['compute'] / 1e3:.2f} "
                  f"({e('compute')}) | {m['comm'] / 1e3:.2f} / {cont['comm'] / 1e3:.2f} ({e('comm')}) |")
            rows.append({"run": name, "config": cfg, "measured": m, "plain": plain, "contended": cont})
    return rows


def objective_check(graphs: list, inter: Interference = H200_STEP) -> list[dict]:
    """Per graph: the orders whose plain and contended rankings disagree, and the improving moves found."""
    out = []
    for g, _, stored in graphs:
        solved = g.order_indices(stored)
        rows = [(e.name, list(e.order)) for e in run_all(g) if e.valid] + [("solved", list(solved))]
        figs = [(nm, simulate(g, o).makespan, simulate_contended(g, o, inter).makespan) for nm, o in rows]
        swapped = sorted({(a[0], b[0]) for a in figs for b in figs if a[1] < b[1] and a[2] > b[2]})
        base = figs[-1][2]
        moves = better = worse = 0
        for v in [x for x in solved if g.kind[x] != COMPUTE]:
            i = solved.index(v)
            for d in SHIFTS:  # the polish's own moves (overlapsat/cost/polish.py)
                if not 0 <= i + d < len(solved):
                    continue
                cand = moved(solved, i, i + d)
                if not is_valid(g, cand):
                    continue
                moves += 1
                m = simulate_contended(g, cand, inter).makespan
                better += m < base - 1e-6
                worse += m > base + 1e-6
        best_plain, best_cont = min(figs, key=lambda f: f[1]), min(figs, key=lambda f: f[2])
        out.append({"graph": g.name, "nodes": len(g), "orders": len(figs), "swapped_pairs": swapped,
                    "same_best": best_plain[1] == min(f[1] for f in figs if f[2] == best_cont[2]),
                    "valid_moves": moves, "improving_moves": better, "worse_moves": worse})
        print(json.dumps(out[-1]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", nargs="+")
    ap.add_argument("--test", nargs="+")
    ap.add_argument("--objective", nargs="+", metavar="RUN")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    if a.objective:
        for spec in a.objective:
            objective_check(load_run(spec)[1])
        return
    if not (a.fit and a.test):
        ap.error("--fit and --test (or --objective) are required")
    fit_runs = [load_run(s) for s in a.fit]
    test_runs = [load_run(s) for s in a.test]
    inter = fit(fit_runs)
    out = {"interference": [inter.compute_slowdown, inter.comm_slowdown],
           "fit": report("Fitted on", a.fit, fit_runs, inter), "test": report("Held out", a.test, test_runs, inter)}
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
