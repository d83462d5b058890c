"""Every bridge test leaves torch's Inductor config as it found it.

Tests patch the config through its own `patch` context: pytest 9.2's `monkeypatch` undo deletes a config
setting instead of restoring it, and every later test then compiled without it. This guard fails the test
that leaks a change, and restores the config so that the tests after it still run on torch's settings."""

import pytest

torch = pytest.importorskip("torch")


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
