"""Checks every test of the suite keeps."""

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
