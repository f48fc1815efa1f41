"""Image search performance (``python -m pytest -m perf tests/perf/test_image_search.py -s``).

Exact nearest-neighbour search of 1,000 queries over 10k, 100k and 1M synthetic 1152-d float16
vectors (SigLIP SO400M width), against a plain baseline in the same run: the corpus converted
to float32 once, then numpy matmul + argmax per query batch. Each method runs in its own
subprocess, and its peak resident memory above the loaded float16 corpus is read from
/proc/self/status (VmHWM, reset through /proc/self/clear_refs once the corpus is loaded; Linux).
Reported as ratios in ``benchmark.extra_info``; nothing asserts wall time. The PMC-OA-sized run
(1.85M vectors, 11.7k queries, through image_nn's search and detector) is perf/pmcoa_scale.py;
it is checked here at a small size.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.perf

DIM = 1152
N_QUERIES = 1000
CHUNK = 50_000
REPO = Path(__file__).resolve().parents[2]

_RUNNER = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np

    def status_kib(field):
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))

    corpus_path, queries_path, method, out = sys.argv[1:5]
    corpus = np.load(corpus_path)  # float16, fully resident
    queries = np.load(queries_path)
    if method != "baseline":
        import faiss  # noqa: F401  (library load is not search memory)
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # reset the peak (VmHWM) to the current resident size
    before = status_kib("VmRSS")
    started = time.perf_counter()
    if method == "baseline":
        full = corpus.astype(np.float32)
        nearest = np.concatenate([np.argmax(queries[i:i + 100] @ full.T, axis=1) for i in range(0, len(queries), 100)])
    else:
        from medexp.images.search import ExactSearch
        from medexp.images.store import EmbeddingSet
        corpus_set = EmbeddingSet([str(i) for i in range(len(corpus))], [corpus])
        started = time.perf_counter()  # the id list is bookkeeping, not search
        nearest = ExactSearch(corpus_set, use_gpu=False).search(queries, 1)[1][:, 0]
    seconds = time.perf_counter() - started
    peak = status_kib("VmHWM")
    np.save(out, nearest)
    print(json.dumps({"seconds": seconds, "peak_extra_mib": (peak - before) / 1024}))
    """
)


def _unit_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    block = rng.standard_normal((count, DIM), dtype=np.float32)
    return block / np.linalg.norm(block, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("image-search")


def _write_data(directory: Path, n: int) -> tuple[Path, Path]:
    corpus_path, queries_path = directory / f"corpus_{n}.npy", directory / "queries.npy"
    rng = np.random.default_rng(n)
    corpus = np.lib.format.open_memmap(corpus_path, mode="w+", dtype=np.float16, shape=(n, DIM))
    for start in range(0, n, CHUNK):  # in chunks: 1M float32 rows at once would take 4.6 GB
        corpus[start : start + CHUNK] = _unit_rows(rng, min(CHUNK, n - start)).astype(np.float16)
    corpus.flush()
    del corpus
    np.save(queries_path, _unit_rows(np.random.default_rng(0), N_QUERIES))
    return corpus_path, queries_path


def _run(method: str, corpus_path: Path, queries_path: Path, out: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(corpus_path), str(queries_path), method, str(out)],
        cwd=REPO, capture_output=True, text=True, check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("n", [10_000, 100_000, 1_000_000])
def test_exact_search_vs_numpy_baseline(benchmark, data_dir, n):
    corpus_path, queries_path = _write_data(data_dir, n)
    baseline = _run("baseline", corpus_path, queries_path, data_dir / "baseline.npy")
    ours = benchmark.pedantic(_run, args=("exact", corpus_path, queries_path, data_dir / "exact.npy"), rounds=1, iterations=1)
    agreement = np.mean(np.load(data_dir / "baseline.npy") == np.load(data_dir / "exact.npy"))
    assert agreement >= 0.99  # same neighbours (fp16 re-normalisation may reorder near-ties)
    info = {
        "corpus_vectors": n,
        "queries_per_s": N_QUERIES / ours["seconds"],
        "baseline_queries_per_s": N_QUERIES / baseline["seconds"],
        "speedup_vs_baseline": baseline["seconds"] / ours["seconds"],
        "peak_extra_mib": ours["peak_extra_mib"],
        "baseline_peak_extra_mib": baseline["peak_extra_mib"],
        "memory_ratio_vs_baseline": ours["peak_extra_mib"] / max(baseline["peak_extra_mib"], 1e-9),
        "neighbour_agreement": float(agreement),
    }
    benchmark.extra_info.update(info)
    print(f"\nexact search over {n:,} x {DIM} float16: {info['queries_per_s']:.0f} q/s vs baseline "
          f"{info['baseline_queries_per_s']:.0f} q/s (x{info['speedup_vs_baseline']:.2f}); extra peak memory "
          f"{info['peak_extra_mib']:.0f} MiB vs {info['baseline_peak_extra_mib']:.0f} MiB (ratio {info['memory_ratio_vs_baseline']:.2f})")


def test_pmcoa_scale_script_finds_every_planted_copy(tmp_path):
    """perf/pmcoa_scale.py at a small size (its full size, 1.85M vectors, takes ~10 minutes
    on 2 cores: docs/images.md "At PMC-OA scale"): every planted copy found and flagged, the
    corpus's planted duplicates collapsed, and its memory report present."""
    result = subprocess.run(
        [sys.executable, "perf/pmcoa_scale.py", "--dir", str(tmp_path), "--corpus", "60000", "--queries", "500",
         "--planted", "40"],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["planted_found_and_flagged"] == report["planted_queries"] == 40
    assert report["planted_same_vector"] == 20  # the stored-vector copies are exact duplicates
    assert report["corpus_distinct"] == report["corpus_vectors"] - report["corpus_duplicates_planted"] > 0
    assert report["corpus_duplicates_planted"] > 0 and report["p_value"] < 1e-6
    assert report["peak_rss_anon_kib"] > 0 and report["peak_vmhwm_kib"] > 0
