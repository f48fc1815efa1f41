"""How a process's CPU kernels are chosen, recorded on every run (tags ``medexp.kernel.<name>``).

PyTorch (ATen), MKL, oneDNN and glibc's maths each pick their CPU kernels at run time from the
instruction sets the host offers (SSE4.2, AVX2, AVX-512, FMA), and each kernel sums in its own
order; so two CPUs can give a trained model, and a p-value, that differ. Recording the settings
beside the package versions says which kernels a result came from.
"""

from __future__ import annotations

import os
import sys

# The variables that choose CPU kernels or thread counts.
KERNEL_VARIABLES = (
    "ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES",
    "GLIBC_TUNABLES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
)


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
