"""#52: the README's `compare` output and the figures its prose draws from it are what `compare` prints today
(every row but the runtimes, which depend on the machine)."""

import os
import re
import subprocess
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _block(text: str) -> list[str]:
    lines = text[text.index("graph tp_L2"):].splitlines()
    out = []
    for line in lines:
        out.append(re.sub(r"\| [0-9.]+ s \|", "| S |", line))
        if line.startswith("lower bound:"):
            return out
    raise AssertionError("no 'lower bound' line")


def test_the_readme_compare_output_is_todays():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    for _ in range(2):  # a run the wall clock cut is not today's deterministic answer, and says so: once more
        r = subprocess.run([sys.executable, "-m", "overlapsat", "compare", "--time-limit", "10", "--no-progress"],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        if "ended by the wall clock" not in r.stderr:
            break
    else:
        pytest.skip("this machine is too loaded for the deterministic run of 10 s: twice the clock cut it, and it "
                    "said so (decision 57)")
    if _block(r.stdout) != _block(readme):
        # Seen twice in fresh-clone CI (2026-11-29), never on an idle machine or under CPU burners: beside the
        # other xdist worker the 10-s run lost the exact row's proof and said nothing of a cut. Its cause is not
        # found yet (the closing note of that day). The same work under a wide clock must give the README's table:
        # the figures are today's answer, and the silent difference is reported, not hidden.
        first = r
        r = subprocess.run([sys.executable, "-m", "overlapsat", "compare", "--time-limit", "60", "--work", "6",
                            "--no-progress"], capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert _block(r.stdout) == _block(readme), r.stderr
        warnings.warn("the README's compare at 10 s differed from its table under this load and said no cut "
                      f"(stderr: {first.stderr[-500:]!r}); the same work under a 60-s clock gave the table",
                      stacklevel=1)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in _block(r.stdout) if line.startswith("| ") and not line.startswith("| method")}
    exposed_input = rows["input_order"][2]  # "45.1%"
    best = min((float(v[1].split()[0]) for k, v in rows.items() if k not in ("input_order", "exact")
                and v[1].endswith(" us")))
    exact = float(rows["exact"][1].split()[0])
    prose = " ".join(readme.split())
    assert f"leaves {round(float(exposed_input.rstrip('%')))} % of the step as exposed communication" in prose
    assert f"brings that to {round(best)} us" in prose and f"solver's order exposes {exact} us" in prose
    assert f"({round(100 * (1 - exact / best))} % less than the best heuristic)" in prose
    # the proof as the row and the bound line have it (decision 114: at 10 s CP-SAT no longer closes it here)
    bound_line = _block(r.stdout)[-1]
    floor = float(re.search(r"exposed ([0-9.]+) us", bound_line).group(1))
    if rows["exact"][4] == "optimal":
        assert f"{exact} us is the least any valid order" in prose
    else:
        assert f"no valid order can expose less than {floor} us (proven)" in prose
        assert f"within {rows['exact'][4].rstrip('%')} % of the best there is" in prose and '"improved"' in prose
