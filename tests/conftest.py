"""Checks every test of the suite keeps."""

import logging
import signal
import threading

import pytest

# A suite started in the background by a shell without job control (`cmd &`) inherits Ctrl-C ignored, and so
# would every process a test starts: the tests that send SIGINT to a command would see it finish instead (the
# fresh-clone run of 2026-11-28 failed 9 of them so). A handler here is not inherited across exec, so the
# commands the tests start get Python's own again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _sigint_handler_kept():
    """A test leaves the process's Ctrl-C handler as it found it: a handler left behind (OR-Tools' own, a CLI's)
    makes a later test's SIGINT vanish."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        pytest.fail(f"the test left another SIGINT handler in place ({after!r}, was {before!r})")


@pytest.fixture(autouse=True)
def _logging_left_on():
    """A test leaves logging as it found it: `logging.disable` left behind silences every later test's caplog in
    that worker (the plan soak's `check` once did, and a later test's logged error went unseen)."""
    before = logging.root.manager.disable
    yield
    after = logging.root.manager.disable
    if after != before:
        logging.disable(before)
        pytest.fail(f"the test left logging disabled up to level {after} (was {before})")


# the end-to-end runs (two gloo ranks, torchtitan, the allocator: up to 2.5 min each on two cores) and the
# largest property samples; with two workers the suite's tail was one worker waiting them out (its last 3 % took
# 12 of 25 minutes). Run first, with work stealing (pyproject's addopts): fresh clones took 24.7 and 22.8 min
# against 24.7-27.1 before (2026-12-01, one host at varying speed): a start, not yet a balance
LONG_FIRST = ("tests/torch/", "tests/test_soundness.py", "tests/test_packaging.py", "tests/test_progress.py",
              "tests/solver/test_determinism.py", "tests/test_titan_ep_overlap.py", "tests/test_store.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest tests first (`LONG_FIRST`), the rest in their order."""
    root = str(config.rootpath)

    def first(item: pytest.Item) -> int:
        rel = str(item.path)[len(root) + 1:].replace("\\", "/")
        return 0 if rel.startswith(LONG_FIRST) else 1

    items.sort(key=first)
