"""Decision 127: CP-SAT's phase that searches around the solution hint, and its newer linear propagator, on models
with a memory cumulative.

    python benchmarks/bench_hint_phase.py [--time-limit 60] [--cap 20]

Two parts, with the library's parameters (the hint phase skipped, `hint_conflict_limit` 0; on windows the older
linear propagator, `new_linear_propagation` false) and with CP-SAT's defaults put back:
  - the saved models of tests/data/or_tools: the LNS windows of decisions 125, 126 and 127 (0.1 deterministic
    seconds each) and the whole model of decision 112 (0.166); per model the library's parameters, the hint phase
    put back, the newer propagator put back, both, and every CP-SAT default (probing and LP dives too: decisions
    125, 126 and 112 undone): wall seconds (capped at `--cap`), deterministic seconds, status, objective;
  - the order search of `heldout_moe_dsv3_L24_ep8_w256_bwd` under torch bucketed's peak (`optimize`, deterministic,
    level free, the held-out bench's "overlapsat order"): wall time, whether the clock cut it and how much of its
    work it had done, windows, the longest window, makespan.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from bench_window_probing import timed_search  # run as a script: benchmarks/ is on the path
from ortools.sat.python import cp_model

from overlapsat import SolveParams
from overlapsat.solver import cpsat
from overlapsat.solver import lns as lns_module

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "or_tools")
MODELS = (("lns_window_probing.pb.txt", "window, decision 125", True),
          ("lns_window_lp_dives.pb.txt", "window, decision 126", True),
          ("lns_window_hint_phase.pb.txt", "window, decision 127", True),
          ("lns_window_linear_propagation.pb.txt", "window, decision 127", True),
          ("fsdp_small_lp_dives.pb.txt", "whole model, decision 112", False))
GRAPH = "heldout_moe_dsv3_L24_ep8_w256_bwd"
DEFAULT_HINT_CONFLICTS = cp_model.CpSolver().parameters.hint_conflict_limit


def _solver(window: bool, cap: float) -> cp_model.CpSolver:
    """The library's solver of such a model: a budgeted window's, or a deterministic whole model's."""
    if window:
        return lns_module.window_solver(0.1, True, 1, cap, budgeted=True)
    s = cp_model.CpSolver()
    p = s.parameters
    p.num_workers, p.max_deterministic_time, p.max_time_in_seconds = 1, 0.166, cap
    cpsat.without_lp_dives(p, True)
    cpsat.without_hint_phase(p, True)
    return s


VARIANTS = (("the library's", False, False, False), ("hint phase back", True, False, False),
            ("newer linear propagator back", False, True, False), ("both back", True, True, False),
            ("every CP-SAT default", True, True, True))


def one_model(file: str, what: str, window: bool, variant: tuple[str, bool, bool, bool], cap: float) -> str:
    name, hint_phase, newer, cp_sats_own = variant
    m = cp_model.CpModel()
    with open(os.path.join(DATA, file), encoding="utf-8") as f:
        m.proto.parse_text_format(f.read())
    s = _solver(window, cap)
    p, plain = s.parameters, cp_model.CpSolver().parameters
    if hint_phase:
        p.hint_conflict_limit = DEFAULT_HINT_CONFLICTS
    if newer:
        p.new_linear_propagation = True
    if cp_sats_own:
        p.cp_model_probing_level = plain.cp_model_probing_level
        p.exploit_integer_lp_solution, p.exploit_all_lp_solution = True, True
    t = time.monotonic()
    st = s.solve(m)
    return (f"| {file} | {what} | {name} | "
            f"{time.monotonic() - t:.2f} | {s.deterministic_time:.4f} | {s.status_name(st)} | "
            f"{s.objective_value:,.0f} | {s.best_objective_bound:,.0f} |")


def search(limit: float, cp_sats: bool) -> str:
    def tweak(params: Any) -> None:
        if cp_sats:
            params.hint_conflict_limit = DEFAULT_HINT_CONFLICTS
            params.new_linear_propagation = True

    p, r, wall, walls = timed_search(os.path.join(HERE, "fx_heldout", f"{GRAPH}.json.gz"), limit, tweak)
    return (f"| {GRAPH} | {len(p.graph.nodes):,} | {'CP-SAT' if cp_sats else 'the library'} | {wall:.1f} | "
            f"{'yes' if r.stats.cut_by_wall_clock else 'no'} | {r.stats.get('work_used', 0.0):.2f} of "
            f"{SolveParams(time_limit=limit).total_work:.2f} | {len(walls)} | {max(walls, default=0.0):.2f} | "
            f"{r.makespan / 1e3:.2f} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--cap", type=float, default=20.0, help="wall seconds each saved model may run")
    a = ap.parse_args()
    print(f"The saved models, one worker, at most {a.cap:g} wall seconds each (the hint phase: CP-SAT's default "
          f"`hint_conflict_limit` {DEFAULT_HINT_CONFLICTS}):\n")
    print("| model | what | parameters | wall s | deterministic s | status | objective | bound |")
    print("| --- | --- | --- | ---: | ---: | --- | ---: | ---: |")
    for file, what, window in MODELS:
        for variant in VARIANTS:
            print(one_model(file, what, window, variant, a.cap), flush=True)
    print(f"\n`optimize`, deterministic, {a.time_limit:g} s, level free, under torch bucketed's peak (recorded):\n")
    print("| graph | nodes | hint phase and linear propagator of budgeted windows | wall s | cut by the clock | "
          "work done | windows | "
          "longest window s | makespan ms |")
    print("| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for cp_sats in (True, False):
        print(search(a.time_limit, cp_sats), flush=True)
