"""Paths the command line writes: checked before any work by a real probe, never a device or FIFO replaced by
a file, `-` as standard output, links written through; and Ctrl-C at any moment of a solve."""

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from overlapsat.examples import bundled
from overlapsat.examples.models import generate
from overlapsat.io import load_graph, save_graph
from overlapsat.schedules import load_schedule
from overlapsat.validate import validate
from tests.test_cli_user import ENV, run


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_target_that_is_not_a_regular_file_is_refused_and_left_alone(tmp_path, kind):
    if kind == "fifo":
        target = tmp_path / "fifo"
        os.mkfifo(target)
    elif kind == "device":
        target = "/dev/full"
        if not os.path.exists(target):
            pytest.skip("no /dev/full")
    else:
        target = tmp_path / "dir"
        target.mkdir()
    before = os.stat(target).st_mode
    for cmd in (["solve", "tp_small", "--out", str(target)], ["compare", "tp_small", "--trace", str(target)],
                ["compare", "tp_small", "--plot", str(target)]):
        r = run(*cmd, "--time-limit", "1")
        assert r.returncode == 2, r.stderr
        assert str(target) in r.stderr and ("not a regular file" in r.stderr or "is a directory" in r.stderr)
        assert "graph tp_" not in r.stdout  # refused before any work
        assert os.stat(target).st_mode == before and not stat.S_ISREG(before)


def test_dash_is_standard_output_and_the_report_goes_to_stderr(tmp_path):
    r = run("solve", "tp_small", "--out", "-", "--time-limit", "5", "--no-progress")
    assert r.returncode == 0, r.stderr
    (tmp_path / "s.json").write_text(r.stdout)
    g = load_graph(bundled("tp_small"))
    assert validate(g, load_schedule(tmp_path / "s.json", g).order) == []
    assert "-> standard output" in r.stderr and "status" in r.stderr
    assert not os.path.exists("-")
    both = run("compare", "tp_small", "--trace", "-", "--json")
    assert both.returncode == 2 and "only one output" in both.stderr
    assert run("compare", "tp_small", "--plot", "-").returncode == 2


def test_a_symbolic_link_is_written_through(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    r = run("solve", "tp_small", "--out", str(link), "--time-limit", "2", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["format"] == "overlapsat-schedule"


def test_an_unwritable_place_is_found_by_a_probe_before_any_work(tmp_path):
    """As root, `os.access` says a read-only file system is writable; the probe does not."""
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(ro)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a read-only file system here")
    try:
        r = run("solve", "tp_small", "--out", str(ro / "s.json"), "--time-limit", "30")
        assert r.returncode == 2 and "Read-only file system" in r.stderr and str(ro / "s.json") in r.stderr
        assert ".tmp" not in r.stderr and "status" not in r.stdout
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


@pytest.fixture(scope="module")
def big_graph(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "tp12k.json"
    save_graph(generate("tp", nodes=12000, seed=1), path)
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.5, 0.8, 1.5, 3.0, 6.0])  # from 0.5 s: Python itself has started
def test_ctrl_c_at_any_moment_ends_cleanly_and_writes_only_a_valid_order(tmp_path, big_graph, delay):
    """Whenever Ctrl-C lands: exit 130, no traceback; a file is written only once an order within the budget
    is known, and then it is valid; otherwise the message says that nothing was written."""
    out = tmp_path / "s.json"
    p = subprocess.Popen([sys.executable, "-m", "overlapsat", "solve", big_graph, "--out", str(out), "--time-limit",
                          "60", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    # 130, or killed by SIGINT itself (-2, which a shell also reports as 130): seen once in CI, when the signal
    # landed inside OR-Tools' import; the message and the files are what the user relies on
    assert p.returncode in (130, -signal.SIGINT), err
    assert "Traceback" not in err
    if out.exists():
        g = load_graph(big_graph)
        assert validate(g, load_schedule(out, g).order) == []
    else:
        assert "nothing written" in err
    if delay >= 6.0:  # the graph is loaded and the input order is known by then
        assert out.exists()


INTERRUPT_AS_IMPORT_ERROR = r"""
import signal, sys
import overlapsat.cli as cli
def inspect_interrupted(args):  # Ctrl-C inside a C extension's import: it surfaces as an ImportError
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        raise ImportError("initialization failed")
cli.cmd_inspect = inspect_interrupted
code = cli.main(["inspect", "fsdp_small"])
print("exit", code, "handler restored", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
def broken(args):
    raise ImportError("initialization failed")
cli.cmd_inspect = broken
print("exit", cli.main(["inspect", "fsdp_small"]))  # no Ctrl-C this time: a bug, reported as one
"""


def test_a_ctrl_c_that_surfaces_as_another_exception_is_still_an_interrupt():
    """Seen once in three runs of the Ctrl-C test: the interrupt landed while a C extension was being imported and
    came out as ImportError("initialization failed"), reported as an internal error. A Ctrl-C the command saw is
    reported as the interrupt (exit 130); the same exception without one is still a bug (exit 4)."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run([sys.executable, "-c", INTERRUPT_AS_IMPORT_ERROR], capture_output=True, text=True, env=env,
                       timeout=300)
    lines = p.stdout.splitlines()
    assert lines[0] == "exit 130 handler restored True", (p.stdout, p.stderr)
    assert lines[1] == "exit 4", (p.stdout, p.stderr)
    assert "interrupted" in p.stderr and "internal error: ImportError" in p.stderr


INTERRUPT_SWALLOWED = r"""
import gc, signal
import overlapsat.cli as cli
class Dropped:  # Ctrl-C while a finalizer runs: Python reports the KeyboardInterrupt as unraisable and goes on
    def __del__(self):
        signal.raise_signal(signal.SIGINT)
def inspect_interrupted(args):
    Dropped()
    gc.collect()
    print("the command went on", flush=True)
    return 0
cli.cmd_inspect = inspect_interrupted
print("exit", cli.main(["inspect", "fsdp_small"]), flush=True)
"""


def test_a_ctrl_c_python_swallows_still_ends_the_command_as_interrupted():
    """Seen once in the Ctrl-C test (0.5 s): the interrupt landed in a weakref callback of an import lock, Python
    printed "Exception ignored ... KeyboardInterrupt" with a traceback, and `solve` ran to the end with exit 0.
    Now: no traceback, exit 130, and the interrupted message."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run([sys.executable, "-c", INTERRUPT_SWALLOWED], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.stdout.splitlines() == ["the command went on", "exit 130"], (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "overlapsat: interrupted:" in p.stderr, p.stderr


INTERRUPT_OUTSIDE_THE_COMMAND = r"""
import signal, sys
import overlapsat.cli as cli
building = cli.build_parser
def interrupted_while_building():  # Ctrl-C while argparse builds the parser (it reads the locale then)
    signal.raise_signal(signal.SIGINT)
    return building()
cli.build_parser = interrupted_while_building
print("exit", cli.main(["solve", "fsdp_small", "--out", sys.argv[1]]), flush=True)
cli.build_parser = building
def failing(args):  # the command wrote its file, then failed, and Ctrl-C landed while the error was reported
    open(args.out, "w").write("{}")
    raise cli.GraphError("a bad input")
real_print = print
def print_interrupted(*a, **k):
    if a and str(a[0]).startswith("overlapsat: error"):
        signal.raise_signal(signal.SIGINT)
    return real_print(*a, **k)
cli.cmd_solve = failing
cli.print = print_interrupted
real_print("exit", cli.main(["solve", "fsdp_small", "--out", sys.argv[2]]), flush=True)
"""


def test_a_ctrl_c_outside_the_commands_own_handler_is_still_an_interrupt(tmp_path):
    """Seen in CI at 0.5 s once the command line stopped loading OR-Tools first: the interrupt landed while argparse
    built the parser, before the command's handler, and printed a traceback. Both places outside that handler now
    end as an interrupt (exit 130) that says truly what was written."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    p = subprocess.run([sys.executable, "-c", INTERRUPT_OUTSIDE_THE_COMMAND, str(first), str(second)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.stdout.splitlines() == ["exit 130", "exit 130"], (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    said = [ln for ln in p.stderr.splitlines() if ln.startswith("overlapsat: interrupted")]
    assert said == ["overlapsat: interrupted: nothing written",
                    f"overlapsat: interrupted: wrote {second}; the outputs not yet written were not written"], p.stderr
    assert not first.exists()


INTERRUPT_AROUND_THE_WRITE = r"""
import signal, sys
import overlapsat.cli as cli
out = sys.argv[1]
def solve_then_ctrl_c(args):  # the answer written, then a Ctrl-C held during the write ends the command
    open(out, "w").write("{}")
    raise KeyboardInterrupt
def ctrl_c_as_import_error(args):  # nothing written: the Ctrl-C surfaced inside an import
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        raise ImportError("initialization failed")
for fn in (ctrl_c_as_import_error, solve_then_ctrl_c):
    cli.cmd_solve = fn
    print("exit", cli.main(["solve", "fsdp_small", "--out", out]), flush=True)
"""


def test_an_interrupt_says_what_it_wrote_read_off_the_files(tmp_path):
    """The interrupt's message is read off the output files, not the command: a Ctrl-C that surfaced as another
    exception before any write says 'nothing written' (the Ctrl-C test's message at 0.8 s, once in eight, said
    neither), and one held while `solve` wrote its answer names the file it wrote (it had said 'nothing
    written')."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = tmp_path / "s.json"
    p = subprocess.run([sys.executable, "-c", INTERRUPT_AROUND_THE_WRITE, str(out)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.stdout.splitlines() == ["exit 130", "exit 130"], (p.stdout, p.stderr)
    first, second = [ln for ln in p.stderr.splitlines() if ln.startswith("overlapsat: interrupted")]
    assert first == "overlapsat: interrupted: nothing written"
    assert second == f"overlapsat: interrupted: wrote {out}; the outputs not yet written were not written"
