"""The permutation draws behind exch_rank are identical on every x86-64 CPU and thread count.

The compiled shuffle (numba) is built for the CPU it runs on; NUMBA_CPU_NAME=generic builds it
for the plainest x86-64, beside numpy capped at SSE4.2 by the simulated CPU of
test_portable_build. Each run is a fresh process, so each compiles (or loads) its own kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from medexp.kernel.portable import KERNEL_VARIABLES
from tests.portability.test_portable_build import SIMULATED_CPUS

_DRAW = """
import hashlib, json, numba, numpy as np
from medexp.stats import rank_exchangeability
from medexp.stats.fisher_yates import permuted_dots
scores = np.round(np.random.default_rng(0).normal(size=2000), 1)  # ties, as in real scores
result = rank_exchangeability(scores, n_permutations=3000, seed=7)
rng = np.random.default_rng(8)
sums = permuted_dots(np.arange(2000), np.arange(2000), 3000, lambda count: rng.integers(0, 1 << 32, count, np.uint32))
print(json.dumps({"cpu": numba.config.CPU_NAME, "threads": numba.config.NUMBA_NUM_THREADS,
                  "result": repr(result), "sums": hashlib.sha256(sums.tobytes()).hexdigest()}))
"""

_NUMBA_VARIABLES = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "NUMBA_NUM_THREADS")


def _draw_on(simulated: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES + _NUMBA_VARIABLES}
    env.update(simulated)
    done = subprocess.run([sys.executable, "-c", _DRAW], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_seed_draws_the_same_permutations_on_every_cpu_and_thread_count():
    host = _draw_on({"OMP_NUM_THREADS": "2", "NUMBA_NUM_THREADS": "2"})
    plainest = _draw_on({**SIMULATED_CPUS["sse4.2"], "NUMBA_CPU_NAME": "generic", "NUMBA_NUM_THREADS": "1"})
    assert plainest["cpu"] == "generic" and host["cpu"] != "generic"  # the simulation is real
    assert (host["threads"], plainest["threads"]) == (2, 1)
    assert plainest["result"] == host["result"]
    assert plainest["sums"] == host["sums"]
