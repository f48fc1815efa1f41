"""Signals that end a cell: SIGTERM (Slurm's time limit, preemption, `scontrol requeue`), SIGHUP (a
closed terminal) and SIGINT (Ctrl-C) become exceptions, so the run is ended KILLED with the signal
named and every cache shard written so far stays valid for a rerun to resume from.

SIGUSR1 and SIGUSR2 are left alone unless the process already handles them in Python: submitit
(the Slurm launcher) does, with the handler that checkpoints and requeues its job when Slurm
signals a coming time limit or preemption (`--signal=USR2@<signal_delay_s>`). Then the cell's run
is ended KILLED first, and that handler runs after, so the requeued job resumes the cell from its
shards."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("medexp")

CAUGHT = (signal.SIGTERM, signal.SIGHUP)
CHAINED = (signal.SIGUSR1, signal.SIGUSR2)  # caught only when a Python handler (submitit's) waits for them


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


def signals_received() -> int:
    """How many signals :func:`signals_raise` has turned into exceptions in this process: one more
    after a block than before it means a signal stopped the block, whatever was raised after it
    (a launcher's handler of that signal raises its own errors)."""
    return len(_received)


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
def signals_raise(before_raising: Callable[[int], None] | None = None) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread, and
    SIGINT raises KeyboardInterrupt (unless the process ignores it, as a background job does);
    the previous handlers come back afterwards.

    Only the first signal raises: one arriving while the block unwinds (Ctrl-C pressed twice, a
    launcher forwarding the signal a terminal already delivered) is noted and ignored, so the
    run is ended, not left RUNNING. ``before_raising(signum)`` runs first (a sweep's driver
    stops the cells it started).

    SIGUSR1 and SIGUSR2 raise :class:`Interrupted` too when a Python handler was set for them
    before the block; once the block has ended on that interruption (the run KILLED), that
    handler is called with the signal (submitit's checkpoints, requeues and exits)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; the launcher's main thread has its own
        return
    raised: list[int] = []

    def handler(signum, frame):
        _received.append(signal.Signals(signum).name)
        if raised:
            log.warning("%s received while stopping on %s: ignored until the runs are ended",
                        signal.Signals(signum).name, signal.Signals(raised[0]).name)
            return
        raised.append(signum)
        if before_raising is not None:
            before_raising(signum)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted(signum)

    chained = [signum for signum in CHAINED if callable(signal.getsignal(signum))]
    sigint = [signal.SIGINT] if signal.getsignal(signal.SIGINT) is signal.default_int_handler else []
    previous = {signum: signal.signal(signum, handler) for signum in (*CAUGHT, *sigint, *chained)}
    try:
        yield
    except Interrupted as error:
        if error.signum in chained:
            _restore(previous)
            previous[error.signum](error.signum, None)  # submitit's requeue; it exits the process
        raise
    finally:
        _restore(previous)


def _restore(previous: dict) -> None:
    for signum, old in previous.items():
        signal.signal(signum, old)
