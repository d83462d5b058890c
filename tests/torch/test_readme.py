"""The README's torch.compile snippet runs as written (#11)."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_torch_snippet() -> str:
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text[text.index("### With torch.compile"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.compile
def test_readme_torch_snippet_runs_as_written(tmp_path):
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    p = subprocess.run([sys.executable, "-c", readme_torch_snippet()], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().startswith("tensor(")
    files = sorted(os.listdir(tmp_path / "schedules"))
    graphs = [f for f in files if f.endswith(".graph.json")]
    assert graphs and all(f.replace(".graph.json", ".schedule.json") in files for f in graphs)
    assert "keeping Inductor" not in p.stderr and "not usable" not in p.stderr  # no fallback on the happy path
