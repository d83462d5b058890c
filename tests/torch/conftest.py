"""Every bridge test leaves torch's Inductor config as it found it, and the session's rank scripts share one
cache of compiled kernels.

Tests patch the config through its own `patch` context: pytest 9.2's `monkeypatch` undo deletes a config
setting instead of restoring it, and every later test then compiled without it. This guard fails the test
that leaks a change, and restores the config so that the tests after it still run on torch's settings."""

import os

import pytest

from tests.torch.scripts import KERNELS_ENV

torch = pytest.importorskip("torch")


@pytest.fixture(scope="session", autouse=True)
def shared_kernel_cache(tmp_path_factory):
    """One cache of compiled C++ kernels for every rank script of the session (`scripts.KERNELS_ENV`); under
    xdist both workers' folders sit in one session folder, so they share it too."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "inductor_kernels"
    path.mkdir(exist_ok=True)
    old = os.environ.get(KERNELS_ENV)
    os.environ[KERNELS_ENV] = str(path)
    yield
    if old is None:
        os.environ.pop(KERNELS_ENV, None)
    else:
        os.environ[KERNELS_ENV] = old


def config_changes(before: dict, after: dict) -> list[str]:
    """The settings added, removed or changed between two copies of a torch config."""
    keys = before.keys() | after.keys()
    return sorted(k for k in keys if k not in before or k not in after or (before[k] is not after[k] and before[k] != after[k]))


@pytest.fixture(autouse=True)
def inductor_config_unchanged():
    import torch._inductor.config as icfg

    from overlapsat.torch import installing

    before = icfg.get_config_copy()
    yield
    installing._SWAPS.clear()  # an install inside icfg.patch leaves a record whose settings patch restored
    changed = config_changes(before, icfg.get_config_copy())
    if changed:
        icfg.load_config(before)
        pytest.fail(f"the test left torch._inductor.config changed: {', '.join(changed)}")
