"""The kernel settings every run records (tags medexp.kernel.<name>)."""

from __future__ import annotations

import os
import subprocess
import sys

from medexp.kernel.portable import KERNEL_VARIABLES, kernel_settings


def test_kernel_settings_name_every_kernel_variable(monkeypatch):
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    settings = kernel_settings()
    assert settings["mkl_enable_instructions"] == "AVX2" and settings["onednn_max_cpu_isa"] == "unset"
    assert settings["cpu_count"] == str(os.cpu_count())
    assert {name.lower() for name in KERNEL_VARIABLES} <= set(settings)


def test_atens_kernel_set_is_read_from_torch_once_loaded():
    """A process started with ATen capped at AVX2 reports AVX2 (or less, on a host without it)."""
    code = ("import torch; from medexp.kernel.portable import kernel_settings; s = kernel_settings(); "
            "print(s['aten_capability'], s['aten_cpu_capability'], s['torch_threads'])")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600, check=True)
    capability, variable, threads = out.stdout.split()
    assert capability in ("AVX2", "DEFAULT") and variable == "avx2" and threads == "1"
