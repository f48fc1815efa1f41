"""Bit-identical arithmetic on every x86-64 CPU: work run in a child process whose kernels are pinned.

PyTorch, MKL, oneDNN, NNPACK and glibc's maths each pick their CPU kernels at run time from the
instruction sets the host offers (SSE4.2, AVX2, AVX-512, FMA). Each kernel sums and fuses in its
own order, so training the same model on two CPUs gives weights that differ in their last bits, and
after thousands of optimiser steps in every digit of a p-value. One thread fixes the summation order
across core counts, not across kernels.

:func:`run_pinned` runs a function (named ``"module:attr"``) in a fresh interpreter whose kernels are
fixed before torch is imported: ATen's portable kernels (``ATEN_CPU_CAPABILITY=default``), MKL's
conditional numerical reproducibility in its ``COMPATIBLE`` mode (the same code path on every CPU),
oneDNN and NNPACK off, glibc's maths without its FMA/AVX variants, one thread. What it returns must
be JSON. The demo builders train through it; it costs speed (measured in docs/portability.md), so
scoring and real models run with the host's fastest kernels.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

# glibc's x86-64 libm selects FMA, FMA4, AVX and AVX2 variants of exp, log, pow, sin, ... by CPU
# (ifunc); masking them gives every host the baseline SSE2 code. Unknown names are ignored by glibc.
_GLIBC_MASK = "glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F,-AVX512DQ,-AVX512BW,-AVX512VL"

PINNED_ENV = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",  # oneDNN is switched off in the child as well; this caps it if a path still reaches it
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

# The variables that choose CPU kernels or thread counts: recorded on every run (medexp.kernel.*).
KERNEL_VARIABLES = (
    "ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES",
    "OPENBLAS_CORETYPE", "GLIBC_TUNABLES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
)


class PinnedProcessError(RuntimeError):
    """The function failed in its pinned process; the message carries its error."""


def pinned_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with the kernel pins applied; glibc tunables the
    caller set are kept beside the mask."""
    env = dict(os.environ if environ is None else environ)
    env.update(PINNED_ENV)
    tunables = env.get("GLIBC_TUNABLES", "")
    if _GLIBC_MASK not in tunables:
        env["GLIBC_TUNABLES"] = f"{tunables}:{_GLIBC_MASK}" if tunables else _GLIBC_MASK
    return env


def run_pinned(target: str, **kwargs: Any) -> Any:
    """``target(**kwargs)`` (``target`` is ``"module:attr"``; arguments and result are JSON) in a
    child process with pinned kernels. A signal or error in the caller stops the child; an error in
    the child raises :class:`PinnedProcessError` naming it (its traceback is on the child's stderr)."""
    with tempfile.TemporaryDirectory(prefix="medexp-pinned-") as scratch:
        request, result = Path(scratch) / "request.json", Path(scratch) / "result.json"
        request.write_text(json.dumps({"target": target, "kwargs": kwargs}), encoding="utf-8")
        child = subprocess.Popen([sys.executable, "-m", "medexp.kernel.portable", str(request), str(result)],
                                 env=pinned_environment())
        try:
            status = child.wait()
        except BaseException:  # a signal or Ctrl-C in the caller: the child must not outlive it
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            raise
        outcome = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else {}
        if status != 0 or "error" in outcome:
            error = outcome.get("error", f"the process exited with status {status}")
            raise PinnedProcessError(f"{target} failed in its pinned-kernel process: {error}")
        return outcome["value"]


def kernel_settings() -> dict[str, str]:
    """How this process's CPU kernels are chosen: every kernel variable (``unset`` where absent), the
    core count and, once torch is loaded, ATen's kernel set, oneDNN's use and torch's thread count.
    Never imports torch itself (a cell that needs no model stays light)."""
    settings = {name.lower(): os.environ.get(name, "unset") for name in KERNEL_VARIABLES}
    settings["cpu_count"] = str(os.cpu_count())
    torch = sys.modules.get("torch")
    if torch is None:
        return {**settings, "aten_capability": "torch not loaded"}
    return {
        **settings,
        "aten_capability": torch.backends.cpu.get_cpu_capability(),
        "mkldnn_enabled": str(torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()),
        "torch_threads": str(torch.get_num_threads()),
    }


def _pin_torch() -> None:
    """What the environment alone cannot pin: oneDNN and NNPACK off, one thread; and a check that
    ATen took the portable kernels (a torch that ignores the variable must not train silently)."""
    import torch

    torch.backends.mkldnn.enabled = False
    torch.backends.nnpack.set_flags(False)
    torch.set_num_threads(1)
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "DEFAULT":
        raise RuntimeError(f"ATen runs its {capability} kernels although ATEN_CPU_CAPABILITY=default was set")


def _child(request_path: str, result_path: str) -> int:
    from medexp.kernel.atomic import atomic_write_bytes

    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    try:
        _pin_torch()
        module, attr = request["target"].split(":")
        value = getattr(importlib.import_module(module), attr)(**request["kwargs"])
        outcome, status = {"value": value}, 0
    except Exception as error:  # reported to the parent, which raises it with this text
        traceback.print_exc()
        outcome, status = {"error": f"{type(error).__name__}: {error}"}, 1
    atomic_write_bytes(Path(result_path), json.dumps(outcome).encode("utf-8"))
    return status


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(_child(*sys.argv[1:3]))
