"""The core installs and runs with torch absent: torch is the optional extra `overlapsat[torch]`."""

import re
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys
    sys.modules["torch"] = None  # any `import torch` now fails, as on a machine without it
    import overlapsat as osat
    from overlapsat.examples import bundled
    g = osat.load_graph(bundled("tp_small"))
    r = osat.optimize(g, time_limit=2)
    assert osat.validate(g, r.order) == [] and r.makespan <= osat.simulate(g).makespan
    from overlapsat.cli import main
    assert main(["compare", "--time-limit", "1", "--json", "--no-progress"]) == 0
    from overlapsat.torch import capture, import_snodes  # the bridge imports, and says what it needs when used
    for call in (lambda: capture(None, None), lambda: import_snodes([])):
        try:
            call()
        except osat.GraphError as e:
            assert "overlapsat[torch]" in str(e), e
        else:
            raise AssertionError("the bridge ran without torch")
    assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None and m.split(".")[0] == "torch"]
    print("ok")
""")


def test_core_imports_and_solves_without_torch():
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().endswith("ok")


def test_package_metadata_does_not_require_torch():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    meta = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    assert not any(d.split("[")[0].split("=")[0].split(">")[0].strip() == "torch" for d in meta["dependencies"])
    assert any(d.startswith("torch>=2.10") for d in meta["optional-dependencies"]["torch"])


def test_compare_plot_without_matplotlib_fails_before_solving(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time
        sys.modules["matplotlib"] = None
        import importlib.util
        real = importlib.util.find_spec
        importlib.util.find_spec = lambda name, *a: None if name == "matplotlib" else real(name, *a)
        from overlapsat.cli import main
        t = time.monotonic()
        rc = main(["compare", "--time-limit", "30", "--plot", {str(tmp_path / "t.png")!r}, "--no-progress"])
        print(rc, round(time.monotonic() - t, 1))
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    rc, took = p.stdout.split()
    assert rc != "0" and float(took) < 5 and "matplotlib" in p.stderr
    assert not (tmp_path / "t.png").exists()


ORTOOLS = textwrap.dedent("""
    import sys
    from overlapsat import _process
    _process.defer_or_tools = True  # as the command line and a store's worker set it (decision 115)
    import overlapsat as osat
    from overlapsat.examples import bundled
    g = osat.load_graph(bundled("fsdp_small"))
    r = osat.optimize(g, time_limit=5)  # a heuristic order meets the bound: no CP-SAT phase runs
    assert r.status.value == "heuristic_optimal", r.status
    assert "ortools.sat.python.cp_model" not in sys.modules and "pandas" not in sys.modules
    r = osat.optimize(osat.load_graph(bundled("tp_small")), time_limit=5)  # a CP-SAT phase: OR-Tools loads
    assert "ortools.sat.python.cp_model" in sys.modules
    print("ok")
""")

LIBRARY = textwrap.dedent("""
    import sys
    from overlapsat import optimize
    assert "ortools.sat.python.cp_model" in sys.modules  # before any call: no call's clock pays the import
    print("ok")
""")


@pytest.mark.parametrize(("script", "why"), [(ORTOOLS, "cli"), (LIBRARY, "library")], ids=["cli", "library"])
def test_or_tools_loads_where_no_clock_pays_for_it(script, why):
    """Decision 115: OR-Tools' CP-SAT module imports pandas (0.5 s). In the command line's process, whose limit
    counts from its start, it loads with the first CP-SAT phase, so a search that runs none does not pay it; in a
    library user's process it loads with the solver package, so no call's clock pays it."""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (why, p.stderr[-3000:])
    assert p.stdout.strip().endswith("ok")


def test_the_command_line_does_not_import_or_tools_for_a_search_that_runs_no_cp_sat_phase(tmp_path):
    """The entry point sets the deferral before the command line imports the solver: `python -X importtime` lists
    no CP-SAT module for a plan that a heuristic order proves."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "overlapsat", "solve", "fsdp_small", "--time-limit",
                        "5", "--out", str(tmp_path / "s.json"), "--no-progress", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert '"heuristic_optimal"' in p.stdout and "overlapsat.solver.search" in p.stderr, p.stdout[-500:]
    assert "ortools.sat.python.cp_model" not in p.stderr and not re.search(r"\|\s+pandas$", p.stderr, re.M)
