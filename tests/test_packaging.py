"""Packaging (#11): a fresh venv without torch installs overlapsat and runs `compare`; installing it next
to another torch version leaves that torch alone (torch is an optional extra with a range, never a pin)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pip(py, *args):
    return subprocess.run([py, "-m", "pip", *args], capture_output=True, text=True, timeout=900)


def _fake_torch(venv_py, version):
    """An installed 'torch' distribution of `version` (metadata only), as pip sees a user's own torch."""
    site = subprocess.run([venv_py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    info = os.path.join(site, f"torch-{version}.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    with open(os.path.join(info, "INSTALLER"), "w") as f:
        f.write("pip\n")
    open(os.path.join(info, "RECORD"), "w").close()


@pytest.mark.slow
def test_fresh_venv_without_torch_installs_and_compares(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    r = _pip(py, "install", "-v", ROOT)
    if r.returncode != 0 and ("Could not find a version" in r.stderr or "connection" in r.stderr.lower()):
        pytest.skip("no package index reachable from this machine")
    assert r.returncode == 0, r.stderr[-2000:]
    said = (r.stdout + r.stderr).lower().splitlines()  # the build's own warnings (verbose): none on the license
    assert not [line for line in said if "license" in line and "deprecat" in line], "license deprecation warned"
    assert subprocess.run([py, "-c", "import torch"], capture_output=True).returncode != 0  # no torch came with it
    c = subprocess.run([str(venv / "bin" / "overlapsat"), "compare", "--time-limit", "2"], capture_output=True,
                       text=True, timeout=300)
    assert c.returncode == 0, c.stderr[-2000:]
    assert "| exact |" in c.stdout

    # next to a user's torch 2.14 (metadata only), neither the package nor its torch extra touches torch
    _fake_torch(py, "2.14.0")
    for spec in (ROOT, f"{ROOT}[torch]"):
        report = tmp_path / "report.json"
        r = _pip(py, "install", "--dry-run", "-q", "--report", str(report), spec)
        assert r.returncode == 0, r.stderr[-2000:]
        names = [x["metadata"]["name"].lower() for x in json.loads(report.read_text())["install"]]
        assert "torch" not in names, (spec, names)
