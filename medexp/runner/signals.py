"""Signals that end a cell: SIGTERM (Slurm's time limit, preemption), SIGHUP (a closed terminal)
and SIGINT (Ctrl-C) become exceptions, so the run is ended KILLED with the signal named and
every cache shard written so far stays valid for a rerun to resume from."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

CAUGHT = (signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A signal stopped the work (a BaseException, like KeyboardInterrupt: no ``except Exception``
    swallows it)."""

    def __init__(self, signum: int):
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.signal_name}")


_received: list[str] = []  # signals turned into exceptions in this process, in order


def last_signal() -> str | None:
    """The last signal :func:`signals_raise` turned into an exception in this process, if any."""
    return _received[-1] if _received else None


def signal_name(error: BaseException) -> str | None:
    """The signal behind an interruption (KeyboardInterrupt is SIGINT), or None."""
    if isinstance(error, Interrupted):
        return error.signal_name
    if isinstance(error, KeyboardInterrupt):
        return "SIGINT"
    return None


def exit_status(error: BaseException) -> int:
    """The status a process killed by that signal reports (128 + its number)."""
    signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
    return 128 + int(signum)


@contextmanager
def signals_raise() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread
    (SIGINT raises KeyboardInterrupt as always); the previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; the launcher's main thread has its own
        return

    def handler(signum, frame):
        _received.append(signal.Signals(signum).name)
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, handler) for signum in CAUGHT}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
