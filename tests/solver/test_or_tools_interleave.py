"""OR-Tools 9.15 aborts the process under interleaved search when the wall clock ends it as presolve ends
(CHECK solution->size() == postsolve_mapping.size()); the library never interleaves (decision 84)."""

import os
import subprocess
import sys
import textwrap

import pytest
from ortools.sat.python import cp_model

import overlapsat as osat
from overlapsat.cost import cost_model
from overlapsat.examples import bundled

MODEL = os.path.join(os.path.dirname(__file__), "..", "data", "or_tools", "interleave_postsolve_abort.pb.txt")

# One child per clock limit, forked: the abort needs the limit to fall as presolve ends (about 5 ms for this model
# on an idle 2-core machine, later under load), so each round first measures where presolve ends now (a solve whose
# deterministic limit ends it as the search starts), then sweeps 0.7 to 1.6 times that; rounds run until a child
# aborts or the probe's seconds are spent.
PROBE = textwrap.dedent("""
    import os, sys, time
    from ortools.sat.python import cp_model
    text, workers, budget = open(sys.argv[1]).read(), int(sys.argv[2]), float(sys.argv[3])

    def solver(t, dt):
        m = cp_model.CpModel()
        m.proto.parse_text_format(text)
        s = cp_model.CpSolver()
        s.parameters.num_workers = workers
        s.parameters.interleave_search = workers > 1
        s.parameters.max_deterministic_time = dt
        s.parameters.max_time_in_seconds = t
        return s, m

    class Seen(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self):
            self.last = self.objective_value

    aborted = runs = 0
    end = time.monotonic() + budget
    while time.monotonic() < end and not aborted:
        s, m = solver(10.0, 1e-9)
        s.solve(m)
        w = s.wall_time
        for k in range(60):
            pid = os.fork()
            if pid == 0:
                s, m = solver(w * (0.7 + 0.9 * k / 60), 0.022)
                s.solve(m, Seen())
                os._exit(0)
            aborted += os.waitpid(pid, 0)[1] != 0
            runs += 1
    print("ABORTED", aborted, "RUNS", runs)
""")


def _probe(workers: int, seconds: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, MODEL, str(workers), str(seconds)], capture_output=True,
                          text=True, timeout=300)


def test_interleaved_search_cut_by_the_clock_as_presolve_ends_aborts_or_tools():
    """The root cause on the bare model (a whole-graph model of fsdp_small's plan search without a budget, as
    the `frontier` command built it when CI's run aborted). If a later OR-Tools stops aborting, this says so."""
    p = _probe(2, 30)
    if "ABORTED 0" in p.stdout:
        pytest.skip(f"no clock limit of the sweep aborted this OR-Tools here ({p.stdout.strip()}); the guard can be "
                    "revisited")
    assert "ABORTED" in p.stdout, p.stderr[-2000:]  # the parent survives: only children abort


def test_the_same_model_with_one_worker_never_aborts_at_any_clock_limit():
    p = _probe(1, 8)
    assert "ABORTED 0" in p.stdout, (p.stdout, p.stderr[-2000:])


@pytest.mark.parametrize("budget", ["none", "1.0x"])
def test_a_deterministic_search_never_interleaves_whatever_its_workers(monkeypatch, budget):
    """Every CP-SAT call of a deterministic `optimize` and `optimize_plan` runs one worker, not interleaved."""
    seen: list[tuple[int, bool]] = []
    real = cp_model.CpSolver.solve

    def solve(self, model, *args):
        seen.append((self.parameters.num_workers, self.parameters.interleave_search))
        return real(self, model, *args)

    monkeypatch.setattr(cp_model.CpSolver, "solve", solve)
    g = osat.load_graph(bundled("tp_small"))
    r = osat.optimize(g, time_limit=4, workers=4, memory_budget=None if budget == "none" else budget)
    assert osat.validate(g, r.order) == []
    n_order = len(seen)
    assert n_order > 0, "no CP-SAT call: the test shows nothing"
    pb = osat.Problem.of(osat.load_graph(bundled("fsdp_small")), budget)
    osat.optimize_plan(pb, cost_model("h200").duration, time_limit=4, workers=4)
    assert len(seen) > n_order
    assert set(seen) == {(1, False)}, seen
