"""Demo builds are bit-identical on every x86-64 CPU; scores agree to float rounding.

Each build runs in a subprocess whose environment simulates another CPU before numpy and torch are
imported: ATen's kernel set, MKL's and oneDNN's instruction sets, numpy's dispatched SIMD targets,
OpenBLAS's core type and glibc's maths variants. On a host without AVX-512 the first two settings
coincide (ATen falls back to the best set the CPU has); the test still compares two CPUs. The
default suite compares the host with the SSE4.2 machine; ``MEDEXP_PORTABILITY_CPUS=all`` adds AVX2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from medexp.kernel.portable import KERNEL_VARIABLES

pytestmark = pytest.mark.extended

HERE = Path(__file__).resolve().parent

GLIBC_NO_AVX512 = "glibc.cpu.hwcaps=-AVX512F,-AVX512DQ,-AVX512BW,-AVX512VL"
GLIBC_BASELINE = "glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F,-AVX512DQ,-AVX512BW,-AVX512VL"
SIMULATED_CPUS = {
    "host": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR", "OPENBLAS_CORETYPE": "Haswell",
             "GLIBC_TUNABLES": GLIBC_NO_AVX512},
    "sse4.2": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41",
               "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR", "OPENBLAS_CORETYPE": "Nehalem",
               "GLIBC_TUNABLES": GLIBC_BASELINE},
}


def build_on(cpu: str, cache: Path, threads: int = 1) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES}
    env.update(SIMULATED_CPUS[cpu])
    done = subprocess.run([sys.executable, str(HERE / "build_digest.py"), str(cache), str(threads)], env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "cache": cache}


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, dict]:
    """The host and the plainest x86-64 CPU, the two furthest apart; MEDEXP_PORTABILITY_CPUS=all
    adds the AVX2 machine (each build costs about a minute)."""
    cpus = SIMULATED_CPUS if os.environ.get("MEDEXP_PORTABILITY_CPUS") == "all" else ("host", "sse4.2")
    return {cpu: build_on(cpu, tmp_path_factory.mktemp(cpu.replace(".", ""))) for cpu in cpus}


@pytest.mark.slow
def test_the_simulated_cpus_run_other_kernels(builds):
    """The simulation is real: ATen reports the kernel set each process asked for (capped by the host)."""
    assert builds["sse4.2"]["aten_capability"] == "DEFAULT"
    assert builds["host"]["aten_capability"] != "DEFAULT"


@pytest.mark.slow
def test_demo_benchmark_and_weights_are_bit_identical_on_every_simulated_cpu(builds):
    reference = builds["host"]
    for cpu, build in builds.items():
        assert build["benchmark"] == reference["benchmark"], cpu
        assert build["clean_weights"] == reference["clean_weights"], cpu
        assert build["weights"] == reference["weights"], cpu


@pytest.mark.slow
def test_scores_on_other_kernels_and_thread_counts_agree_to_float_rounding(builds):
    """Scoring runs on the host's fastest kernels, so only rounding may differ: far below the
    digits medexp prints (docs/portability.md)."""
    reference = np.array(builds["host"]["scores"])
    two_threads = np.array(build_on("host", builds["host"]["cache"], threads=2)["scores"])  # built: scores only
    for cpu, other in [*((cpu, np.array(build["scores"])) for cpu, build in builds.items()), ("2 threads", two_threads)]:
        np.testing.assert_allclose(other, reference, rtol=1e-5, err_msg=cpu)
