"""The command line as a user meets it (#11): entry points, names, paths, budgets, output that reads well."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

import overlapsat as osat
from overlapsat import __version__
from overlapsat.examples import bundled
from overlapsat.graph import Buffer, Graph, Node, NodeKind
from overlapsat.io import load_graph, save_graph

ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args, module="overlapsat"):
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=ENV, timeout=300)


def test_version_and_python_dash_m():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"overlapsat {__version__}"
    assert "exit codes:" in run("--help").stdout


def test_debug_is_accepted_before_and_after_the_command():
    for args in (["--debug", "inspect", "tp_small"], ["inspect", "tp_small", "--debug"]):
        r = run(*args)
        assert r.returncode == 0, (args, r.stderr)
    # --debug after the command really turns on tracebacks
    r = run("inspect", "no/such/file.json", "--debug")
    assert "Traceback" in r.stderr
    assert "Traceback" not in run("inspect", "no/such/file.json").stderr


def test_bundled_examples_by_name():
    r = run("inspect", "fsdp_small", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["graph"] == load_graph(bundled("fsdp_small")).name
    r = run("inspect", "nosuch")
    assert r.returncode == 2 and "nosuch" in r.stderr and "tp_small" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("opt", ["--plot", "--trace", "--out", "--csv"])
def test_output_paths_are_checked_before_any_solving(tmp_path, opt):
    bad = str(tmp_path / "missing_dir" / ("x.png" if opt == "--plot" else "x.json"))
    cmd = {"--out": ["solve", "tp_small"], "--csv": ["bench", bundled("tp_small")]}.get(opt, ["compare", "tp_small"])
    t = time.monotonic()
    r = run(*cmd, opt, bad, "--time-limit", "60")
    assert r.returncode == 2 and bad in r.stderr and "Traceback" not in r.stderr
    assert time.monotonic() - t < 20  # a 60 s solve would have run first


def test_plot_name_is_checked_before_solving(tmp_path):
    r = run("compare", "tp_small", "--plot", str(tmp_path / "t.bmpx"), "--time-limit", "60")
    assert r.returncode == 2 and ".png" in r.stderr


def test_a_write_error_names_the_users_path(tmp_path, monkeypatch):
    from overlapsat import io
    from overlapsat.errors import GraphError

    def deny(src, dst):
        raise PermissionError(13, "Permission denied", src)

    monkeypatch.setattr(io.os, "replace", deny)
    target = tmp_path / "sched.json"
    with pytest.raises(GraphError) as e:
        io.atomic_write_text(target, "{}")
    assert str(target) in str(e.value) and ".tmp-" not in str(e.value)
    assert not any(p.name.startswith(".tmp-") for p in tmp_path.iterdir())  # no half-written file left


def test_the_cli_turns_an_os_error_into_a_user_error(tmp_path):
    d = tmp_path / "dir.json"
    d.mkdir()
    r = run("solve", "tp_small", "--out", str(d))
    assert r.returncode == 2 and str(d) in r.stderr and "internal error" not in r.stderr


def test_a_float_budget_is_refused_with_both_spellings():
    from overlapsat.budget import MemoryBudget, resolve_budget
    from overlapsat.errors import GraphError

    r = run("compare", "tp_small", "--memory-budget", "1.2")
    assert r.returncode == 2 and "'1.2x'" in r.stderr and "'1.2B'" in r.stderr
    with pytest.raises(GraphError, match="ambiguous"):
        MemoryBudget.parse("1.2")
    g = load_graph(bundled("tp_small"))
    # the same text means the same in Python and on the command line; in Python an int is bytes (a size is an
    # integer), and a float, once read as a ratio, is refused: `1` and `1.0` must not mean different things
    assert resolve_budget(g, "1.2x") == resolve_budget(g, MemoryBudget(ratio=1.2))
    assert resolve_budget(g, "123B") == resolve_budget(g, MemoryBudget(bytes=123)) == resolve_budget(g, 123) == 123
    for bare in (1.0, 1.2, 123.0):
        with pytest.raises(GraphError, match=rf"memory budget {bare!r}: a float is ambiguous; write '{bare}x'"):
            resolve_budget(g, bare)
    with pytest.raises(GraphError, match="a float is ambiguous"):
        osat.optimize(g, time_limit=1, memory_budget=1.0)


@pytest.mark.parametrize(("text", "said"), [
    ("0x", "a ratio of the input order's peak must be a finite number > 0, such as '1.2x'"),
    ("-1x", "a ratio of the input order's peak must be a finite number > 0, such as '1.2x'"),
    ("1e400x", "a ratio of the input order's peak must be a finite number > 0, such as '1.2x'"),
    ("9e15GiB", "a size must be from 0 B to 2**63 - 1 B"),
    ("1e400B", "a size must be from 0 B to 2**63 - 1 B"),
    ("-5GB", "a size must be from 0 B to 2**63 - 1 B"),
    ("1.2.3x", "expected a ratio like '1.2x' or a size like '40GiB'"),
])
def test_a_budget_out_of_range_is_told_which_way(text, said):
    """A number the parser reads but cannot take says why: a ratio at or below 0 (or infinite) was answered
    "expected a ratio like '1.2x'", and 9e15 GiB "bytes must be an integer >= 0", which it is."""
    from overlapsat.budget import MemoryBudget, resolve_size
    from overlapsat.errors import GraphError

    with pytest.raises(GraphError) as e:
        MemoryBudget.parse(text)
    assert str(e.value) == f"memory budget {text!r}: {said}"
    if not text.endswith("x"):  # a bucket cap is a size too, and is told the same
        with pytest.raises(GraphError, match=re.escape(f"--bucket-cap {text!r}: {said}")):
            resolve_size(text, "--bucket-cap")
    assert MemoryBudget.parse("9.2e18B").bytes == 9_200_000_000_000_000_000  # the largest sizes still read


@pytest.mark.parametrize("option", ["--memory-budget", "--bucket-cap"])
def test_a_negative_size_as_two_words_is_told_what_is_wrong_with_it(option, tmp_path):
    """`--memory-budget -5GB` was read by argparse as an option ("expected one argument"), where
    `--memory-budget=-5GB` got the size's own message."""
    out = tmp_path / "p.json"
    extra = ["--profile", "h200"] if option == "--bucket-cap" else []
    what = "memory budget" if option == "--memory-budget" else "bucket cap"
    for argv in ([option, "-5GB"], [f"{option}=-5GB"]):
        r = run("plan", "fsdp_small", *extra, *argv, "--time-limit", "5", "--out", str(out))
        assert r.returncode == 2 and not out.exists(), r.stderr
        assert r.stderr.strip() == f"overlapsat: error: {what} '-5GB': a size must be from 0 B to 2**63 - 1 B"


def test_workers_without_timed_are_refused_not_ignored(tmp_path):
    """A deterministic search runs one CP-SAT worker: `--workers 4` without `--timed` was silently ignored."""
    out = tmp_path / "s.json"
    r = run("solve", "fsdp_small", "--workers", "4", "--time-limit", "5", "--out", str(out))
    assert r.returncode == 2 and "--workers" in r.stderr and "--timed" in r.stderr and not out.exists()
    r = run("solve", "fsdp_small", "--workers", "2", "--timed", "--time-limit", "5", "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert out.exists()


def test_a_ratio_budget_resolves_exactly_on_a_huge_peak():
    """'1.0x' is the input order's own peak to the byte, at 2^50 B too (a float product once lost bytes)."""
    from overlapsat.budget import resolve_budget
    from overlapsat.graph import GraphBuilder
    from overlapsat.simulate import peak_memory

    b = GraphBuilder()
    b.compute("a", 1.0, writes={"big": 2**50 + 12345})
    b.compute("c", 1.0, reads=["big"])
    g = b.build()
    peak = peak_memory(g)
    assert peak == 2**50 + 12345
    assert resolve_budget(g, "1.0x") == peak
    assert resolve_budget(g, "1.1x") == (11 * peak) // 10


def test_repr_is_short_on_a_large_graph():
    from overlapsat.simulate import simulate
    from overlapsat.solver import optimize

    g = load_graph(bundled("tp_large"))
    assert len(repr(g)) < 200 and "1954" in repr(g)
    r = optimize(g, time_limit=1, work_limit=0.2)
    assert len(repr(r)) < 400 and "exposed_us=" in repr(r)
    assert r.exposed_us == r.exposed and r.makespan_us == r.makespan and r.peak_memory_bytes == r.peak_memory
    s = simulate(g)
    assert len(repr(s)) < 200 and s.exposed_us == s.exposed


def test_clip_cuts_at_a_word_boundary():
    from overlapsat.fmt import clip

    text = "collective 'all_gather_3' is issued before 'all_gather_2', reversing their input order in group 'tp'"
    out = clip(text, 60)
    assert len(out) <= 60 and out.endswith("…") and text.startswith(out[:-1]) and not text[len(out) - 1].isalnum()
    assert clip("short", 60) == "short"


def test_violations_name_ordering_only_edges():
    from overlapsat.validate import validate

    nodes = [Node("a", NodeKind.COMPUTE, 1.0), Node("b", NodeKind.COMPUTE, 1.0), Node("c", NodeKind.COMPUTE, 1.0)]
    g = Graph(nodes, (Buffer("x", "a", ("b",), 4, 4),), fake_edges=(("b", "c"),))
    msgs = [v.message for v in validate(g, ["c", "b", "a"])]
    assert any("'c'" in m and "fake" in m for m in msgs), msgs
    assert any("'b'" in m and "data dependency" in m for m in msgs), msgs


def test_inspect_and_compare_print_the_bound_the_same_way():
    a = run("inspect", "tp_small").stdout
    b = run("compare", "tp_small", "--time-limit", "3").stdout
    la = next(x for x in a.splitlines() if "lower bound:" in x).strip()
    lb = next(x for x in b.splitlines() if "lower bound:" in x).strip()
    assert la.startswith("lower bound: makespan ") and lb.startswith("lower bound: makespan ")
    assert "collective order 'group'" in la and "collective order 'group'" in lb


def test_reprice_and_profile_options_price_for_other_hardware(tmp_path):
    from overlapsat.cost import builtin_calibration, cost_model

    out = tmp_path / "h100.json"
    r = run("reprice", "tp_small", "--profile", "h100_sxm", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    g, h = load_graph(bundled("tp_small")), load_graph(str(out))
    assert h.nodes[0].duration == pytest.approx(round(cost_model("h100_sxm").duration(g.nodes[0]), 4))
    assert h.fingerprint() != g.fingerprint()
    # calibrate's output is consumed: a calibration file prices for its own profile
    cal = tmp_path / "cal.json"
    builtin_calibration("h200").save(str(cal))
    r2 = run("compare", "tp_small", "--calibration", str(cal), "--time-limit", "1", "--json")
    assert r2.returncode == 0, r2.stderr
    assert json.loads(r2.stdout)["rows"][0]["makespan_us"] > 0
    r3 = run("solve", "tp_small", "--profile", "h100_sxm", "--calibration", str(cal), "--out", str(tmp_path / "s.json"))
    assert r3.returncode == 2 and "profile" in r3.stderr  # H200 tables for an H100: refused, naming the mismatch
    r4 = run("compare", "tp_small", "--profile", "no_such_gpu")
    assert r4.returncode == 2 and "no_such_gpu" in r4.stderr


def test_optimize_and_compare_take_a_path_and_refuse_other_things(tmp_path):
    g = load_graph(bundled("tp_small"))
    p = tmp_path / "g.json"
    save_graph(g, p)
    by_path = osat.optimize(str(p), time_limit=30, work_limit=0.2, workers=1)
    by_graph = osat.optimize(g, time_limit=30, work_limit=0.2, workers=1)
    assert by_path.names == by_graph.names and by_path.makespan == by_graph.makespan
    assert osat.compare(p, time_limit=1).graph.fingerprint() == g.fingerprint()
    from overlapsat.errors import GraphError

    with pytest.raises(GraphError, match="expected a Graph or the path of a graph file, got dict"):
        osat.optimize({"nodes": []})
    with pytest.raises(GraphError, match="does not exist"):
        osat.optimize(str(tmp_path / "missing.json"))
