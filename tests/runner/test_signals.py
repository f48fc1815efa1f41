"""Signals during a cell: SIGUSR1/SIGUSR2 are caught only when a Python handler (submitit's
checkpoint-and-requeue) waits for them, and that handler runs after the cell has ended."""

from __future__ import annotations

import os
import signal

import pytest

from medexp.runner import signals as signals_module
from medexp.runner.signals import Interrupted, signals_raise


@pytest.fixture(autouse=True)
def forget_received_signals():
    """The signals these tests raise must not stay on record for later tests of the process (a sweep
    ended aborted names the last one received as its reason)."""
    before = list(signals_module._received)
    yield
    signals_module._received[:] = before


@pytest.fixture
def usr2_default():
    old = signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGUSR2, old)


def test_usr2_left_alone_without_a_python_handler(usr2_default):
    with signals_raise():
        assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL
        assert callable(signal.getsignal(signal.SIGTERM))
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL


def test_usr2_ends_the_block_first_then_the_launchers_handler_runs(usr2_default):
    events = []

    def requeue(signum, frame):  # what submitit's handler does: requeue the job, then exit
        events.append(("launcher", signal.Signals(signum).name))
        raise SystemExit(-1)

    signal.signal(signal.SIGUSR2, requeue)
    with pytest.raises(SystemExit):
        with signals_raise():
            try:
                os.kill(os.getpid(), signal.SIGUSR2)
                signal.pause()  # not reached: the handler raises in this thread
            except Interrupted as error:
                events.append(("cell ended", error.signal_name))  # the run is ended KILLED here
                raise
    assert events == [("cell ended", "SIGUSR2"), ("launcher", "SIGUSR2")]
    assert signal.getsignal(signal.SIGUSR2) is requeue


def test_sigterm_is_not_handed_to_a_previous_handler(usr2_default):
    called = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: called.append(signum))
    try:
        with pytest.raises(Interrupted), signals_raise():
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()
        assert called == []
    finally:
        signal.signal(signal.SIGTERM, old)
