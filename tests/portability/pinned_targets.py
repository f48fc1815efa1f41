"""Functions the pinned-process tests run in the child (named "module:attr", as run_pinned takes them)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def write_pid_then_sleep(pid_file: str, seconds: float) -> None:
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(seconds)


def fail(message: str) -> None:
    raise ValueError(message)
