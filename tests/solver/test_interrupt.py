"""Ctrl-C returns the best valid order found so far, with status "interrupted", on every path."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from overlapsat.examples import bundled
from overlapsat.io import load_graph
from overlapsat.schedules import load_schedule
from overlapsat.simulate import simulate
from overlapsat.solver import Status, optimize
from overlapsat.validate import validate


def _sigint_after(seconds: float) -> threading.Timer:
    t = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    t.start()
    return t


def _check(g, r):
    assert validate(g, r.order) == []
    assert simulate(g, r.order).makespan == pytest.approx(r.makespan)
    assert r.stats["interrupted"] is True


def test_interrupt_in_lns_keeps_the_best_window_order():
    g = load_graph(bundled("tp_large"))  # 1954 nodes: LNS only
    seen = []

    def press_ctrl_c_on_second_improvement(p):
        seen.append(p.makespan_us)
        if len(seen) == 2:
            raise KeyboardInterrupt

    r = optimize(g, time_limit=60, on_progress=press_ctrl_c_on_second_improvement)
    _check(g, r)
    assert r.status is Status.INTERRUPTED and "interrupted" in r.message
    assert r.method == "cpsat-lns" and r.makespan == pytest.approx(seen[-1])  # the improvement that was reported


@pytest.mark.parametrize("workers", [1, 2])
def test_sigint_during_the_monolithic_solve(workers):
    """Ctrl-C 0.3 s into the whole-graph model (the phase announced, not a fixed time from the start: a loaded
    machine may still be in the heuristics at 0.5 s), with Python's own handler in place whatever an earlier test
    in this process left."""
    g = load_graph(bundled("tp_small"))  # the monolithic model alone takes ~5 s to its proof here
    timers: list[threading.Timer] = []
    started: list[float] = []

    def on_phase(p):
        if p.phase == "model" and not timers:
            started.append(time.monotonic())
            timers.append(_sigint_after(0.3))

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        r = optimize(g, time_limit=20, workers=workers, lns_min_window_nodes=10**6, work_limit=6.0,
                     on_phase=on_phase)
    finally:
        for t in timers:
            t.cancel()
        signal.signal(signal.SIGINT, old)
    assert timers, "the whole-graph model never ran"
    _check(g, r)
    assert r.status in (Status.INTERRUPTED, Status.OPTIMAL)
    # one worker in deterministic mode, whatever `workers` says (decision 84): stop_search() is safe and returns
    # at once
    assert time.monotonic() - started[0] < 5


def test_sigint_during_the_portfolio_returns_the_input_order_at_worst():
    g = load_graph(bundled("tp_small"))
    from overlapsat.heuristics import portfolio

    real = portfolio.run_all

    def slow(*a, **k):
        raise KeyboardInterrupt

    portfolio.run_all = slow
    try:
        import importlib

        mod = importlib.import_module("overlapsat.solver.search")
        old, mod.run_all = mod.run_all, slow
        r = optimize(g, time_limit=5)
    finally:
        portfolio.run_all = real
        mod.run_all = old
    _check(g, r)
    assert r.status in (Status.INTERRUPTED, Status.HEURISTIC_OPTIMAL)
    assert r.makespan <= simulate(g).makespan + 1e-9


def test_cli_solve_writes_the_best_order_on_ctrl_c(tmp_path):
    out = tmp_path / "s.json"
    p = subprocess.Popen([sys.executable, "-m", "overlapsat", "solve", "tp_large", "--time-limit", "120", "--out",
                          str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # interrupted once the search is past the portfolio: its progress line for the CP-SAT phases (not a clock,
    # which a loaded machine outruns)
    seen = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        seen.append(line)
        if not line or line.startswith(("INFO lns:", "INFO model:")):
            break
    assert seen and seen[-1].startswith(("INFO lns:", "INFO model:")), seen
    p.send_signal(signal.SIGINT)
    so, se = p.communicate(timeout=60)
    se = "".join(seen) + se
    assert p.returncode == 130, se
    # the search's own summary, or (a Ctrl-C between two of its phases) the CLI's line that it wrote the input order
    assert any(f"status {st}" in so for st in ("interrupted", "heuristic", "optimal")) or \
        "interrupted: wrote the input order" in se, (so, se)
    g = load_graph(bundled("tp_large"))
    sched = load_schedule(str(out), g)
    assert validate(g, sched.order) == []
