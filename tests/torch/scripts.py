"""Running a compile test's script in a fresh interpreter (Inductor and the process group stay out of the
test process), and the handler those scripts use to count overlapsat's warnings."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pasted into a script after `import logging`: every warning overlapsat logs lands in `warnings`
CATCH_WARNINGS = """
warnings = []
class Catch(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            warnings.append(record.getMessage())
logging.getLogger("overlapsat").addHandler(Catch())
"""


def run_script(script: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """`python -c script args...` with this checkout first on the path; fails the test if it exits non-zero."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout,
                       env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def run_ranks(script: str, phase: str, workdir, stores: list, tag: str = "") -> list[dict]:
    """Run `script` (a file beside these tests) as one process per entry of `stores` (gloo ranks meeting at a
    file under `workdir`), with argv PHASE RANK WORLD INIT_FILE STORE OUT; each rank's OUT, read back as JSON."""
    import json

    world = len(stores)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    init = workdir / f"pg_{phase}{tag}"
    outs = [workdir / f"{phase}{tag}{r}.json" for r in range(world)]
    here = os.path.dirname(os.path.abspath(__file__))
    procs = [subprocess.Popen([sys.executable, os.path.join(here, script), phase, str(r), str(world), str(init),
                               str(stores[r]), str(outs[r])], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for r in range(world)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    return [json.loads(o.read_text()) for o in outs]
