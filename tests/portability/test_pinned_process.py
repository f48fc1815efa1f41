"""run_pinned: the child's kernels are pinned, its value comes back, its errors are named, and it
never outlives a caller that is interrupted."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from medexp.kernel.portable import PINNED_ENV, PinnedProcessError, pinned_environment, run_pinned
from medexp.runner.signals import Interrupted, signals_raise


def test_the_child_runs_the_portable_kernels_on_one_thread_without_onednn():
    settings = run_pinned("medexp.kernel.portable:kernel_settings")
    assert settings["aten_capability"] == "DEFAULT"
    assert settings["torch_threads"] == "1" and settings["omp_num_threads"] == "1"
    assert settings["mkldnn_enabled"] == "False"
    assert settings["mkl_cbwr"] == "COMPATIBLE"
    assert "-FMA" in settings["glibc_tunables"] and "-AVX2" in settings["glibc_tunables"]


def test_pins_override_the_hosts_kernel_variables_and_keep_its_glibc_tunables():
    host = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AUTO", "GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}
    env = pinned_environment(host)
    assert all(env[name] == value for name, value in PINNED_ENV.items())
    assert env["GLIBC_TUNABLES"].startswith("glibc.malloc.arena_max=2:") and "-AVX2" in env["GLIBC_TUNABLES"]
    assert pinned_environment(env)["GLIBC_TUNABLES"] == env["GLIBC_TUNABLES"]  # applied twice, masked once


def test_an_error_in_the_child_is_raised_with_its_text():
    with pytest.raises(PinnedProcessError, match="ValueError: bad settings"):
        run_pinned("tests.portability.pinned_targets:fail", message="bad settings")


def test_a_signal_to_the_caller_stops_the_child(tmp_path):
    pid_file = tmp_path / "child.pid"

    def terminate_when_started():
        while not pid_file.exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_when_started, daemon=True).start()
    with pytest.raises(Interrupted), signals_raise():
        run_pinned("tests.portability.pinned_targets:write_pid_then_sleep", pid_file=str(pid_file), seconds=600)
    child = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # reaped: gone

