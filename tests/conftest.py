"""Checks every test of the suite keeps."""

import signal
import threading

import pytest


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
