"""What pinned kernels cost the demo build (``python -m pytest -m perf tests/perf/test_pinned_build.py -s``).

The default clean demo model (``model=demo_clean``) trained twice from the same generated
benchmark: through :func:`medexp.kernel.portable.run_pinned` (ATen's portable kernels, MKL in its
compatible mode, oneDNN off, one thread; what ``python -m medexp`` does), and, as the baseline, in
this process on the host's fastest kernels with one thread (what the builder did before pinning).
Reported as a ratio in ``benchmark.extra_info``; nothing asserts wall time.
"""

from __future__ import annotations

import time

import pytest
from omegaconf import OmegaConf

pytestmark = pytest.mark.perf


def test_pinned_demo_build_against_host_kernels(benchmark, tmp_path):
    import torch

    from medexp.config import compose
    from medexp.demo.cache import demo_benchmark_root
    from medexp.demo.models import build_demo_model
    from medexp.kernel.portable import run_pinned

    settings = OmegaConf.to_container(compose(["model=demo_clean"]).model.demo)
    demo_benchmark_root(OmegaConf.create(settings["bench"]), tmp_path)
    seconds = {}

    def pinned():
        started = time.perf_counter()
        run_pinned("medexp.demo.models:build_demo_model", settings=settings, cache_dir=str(tmp_path),
                   out_dir=str(tmp_path / "pinned"), base_dir=None)
        seconds["pinned"] = time.perf_counter() - started

    benchmark.pedantic(pinned, rounds=1, iterations=1)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        started = time.perf_counter()
        build_demo_model(settings, str(tmp_path), str(tmp_path / "host"), None)
        seconds["host_kernels"] = time.perf_counter() - started
    finally:
        torch.set_num_threads(previous)
    benchmark.extra_info.update({**{f"{name}_s": round(value, 1) for name, value in seconds.items()},
                                 "aten_capability_host": torch.backends.cpu.get_cpu_capability(),
                                 "ratio_pinned_to_host": round(seconds["pinned"] / seconds["host_kernels"], 2)})
    print(benchmark.extra_info)
