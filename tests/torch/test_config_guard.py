"""The guard in conftest.py sees the change that broke CI under pytest 9.2 (a setting deleted), a changed
value, and nothing where `icfg.patch` restored the config."""

import torch._inductor.config as icfg

from tests.torch.conftest import config_changes


def test_guard_sees_a_deleted_or_changed_setting_and_nothing_after_patch():
    before = icfg.get_config_copy()
    deleted = dict(before)
    del deleted["allow_buffer_reuse"]
    assert config_changes(before, deleted) == ["allow_buffer_reuse"]
    flipped = dict(before, allow_buffer_reuse=not before["allow_buffer_reuse"])
    assert config_changes(before, flipped) == ["allow_buffer_reuse"]
    with icfg.patch(allow_buffer_reuse=not before["allow_buffer_reuse"]):
        assert config_changes(before, icfg.get_config_copy()) == ["allow_buffer_reuse"]
    assert config_changes(before, icfg.get_config_copy()) == []
