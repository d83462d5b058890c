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
