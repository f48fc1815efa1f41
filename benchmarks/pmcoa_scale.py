"""image_nn at PMC-OA scale: search and detector over a synthetic 1.85M x 1152 float16 corpus.

PMC-OA holds about 1.65M image-caption pairs; 1.85M x 1152 (SigLIP SO400M width) float16 is
4.26 GB, and 11,700 queries are about the test images of the audited benchmarks. The corpus is
written to disk block by block as float16 ``.npy`` shards of the embedding cache's shard size
(``EmbedderBase.shard_size``), then a fresh process runs the steps of
:func:`medexp.images.audit.image_nn_audit` that follow embedding, with medexp's own code: shards
memory-mapped as the cache reads them, :class:`~medexp.images.audit.DeduplicatedCorpus` (float16
vector hashing), :func:`~medexp.images.audit.match_images` (the configured exact search over the
distinct vectors, 5,000 self-excluded calibration queries plus the benchmark's) and
:func:`~medexp.detectors.image_nn.image_nn_detector`. Only image decoding, embedding and the
adjudication panels are left out (there are no image files).

Planted truth, so the run checks what it found: a share of corpus rows are exact float16 copies
of earlier rows (re-published figures; they exercise deduplication), and some benchmark queries
are the stored vector of a corpus row (``same_vector``) or a noisy near-copy of one. The run
fails unless every planted query is flagged with its source as neighbour.

Memory is read from /proc/self/status (Linux): VmHWM, the peak resident size, counts the pages
of the memory-mapped corpus that were read (file-backed, dropped by the kernel under pressure),
so a sampling thread also records the peak of RssAnon (memory the process allocated) and
RssFile separately.

    PYTHONPATH=$PWD python benchmarks/pmcoa_scale.py --dir /tmp/pmcoa_scale            # full size
    PYTHONPATH=$PWD python benchmarks/pmcoa_scale.py --dir /tmp/pmcoa_small --corpus 100000 --queries 1000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

DIM = 1152
GENERATION_CHUNK = 50_000  # float32 rows generated at once (230 MB): the corpus never sits in memory
NEAR_COPY_NOISE = 0.01  # per-component noise of a near-copy: cosine distance about DIM * noise^2 / 2 = 0.06


def unit_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    rows = rng.standard_normal((count, DIM), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def generate(directory: Path, n_corpus: int, n_queries: int, duplicate_rate: float, planted: int, shard_size: int,
             seed: int) -> None:
    """Write the corpus shards, the benchmark queries and the planted truth under ``directory``."""
    rng = np.random.default_rng(seed)
    shard_dir = directory / "shards"
    shard_dir.mkdir(parents=True, exist_ok=True)
    # Duplicates copy one of the first chunk's rows (held in memory while later chunks are written).
    is_duplicate = rng.random(n_corpus) < duplicate_rate
    is_duplicate[:GENERATION_CHUNK] = False
    source_of = np.where(is_duplicate, rng.integers(0, min(GENERATION_CHUNK, n_corpus), n_corpus), -1)
    first_chunk = None
    for shard_start in range(0, n_corpus, shard_size):
        stop = min(shard_start + shard_size, n_corpus)
        np.lib.format.open_memmap(shard_dir / f"{shard_start // shard_size:06d}.npy", mode="w+", dtype=np.float16,
                                  shape=(stop - shard_start, DIM))
    for start in range(0, n_corpus, GENERATION_CHUNK):
        stop = min(start + GENERATION_CHUNK, n_corpus)
        chunk = unit_rows(rng, stop - start).astype(np.float16)
        if first_chunk is None:
            first_chunk = chunk.copy()
        copies = np.flatnonzero(is_duplicate[start:stop])
        chunk[copies] = first_chunk[source_of[start + copies]]
        for shard_start in range(start - start % shard_size, stop, shard_size):
            shard = np.load(shard_dir / f"{shard_start // shard_size:06d}.npy", mmap_mode="r+")
            lo, hi = max(start, shard_start), min(stop, shard_start + len(shard))
            shard[lo - shard_start : hi - shard_start] = chunk[lo - start : hi - start]
            shard.flush()
            del shard
    # Planted benchmark queries: the first half are a corpus row's stored float16 vector, the
    # second half a noisy copy of one; the rest are fresh random vectors.
    queries = unit_rows(rng, n_queries)
    targets = np.sort(rng.choice(np.flatnonzero(~is_duplicate), size=planted, replace=False))
    target_rows = np.stack([np.load(shard_dir / f"{t // shard_size:06d}.npy", mmap_mode="r")[t % shard_size]
                            for t in targets]).astype(np.float32)
    positions = rng.choice(n_queries, size=planted, replace=False)
    exact = planted // 2
    noisy = target_rows[exact:] + rng.standard_normal(target_rows[exact:].shape, dtype=np.float32) * NEAR_COPY_NOISE
    queries[positions[:exact]] = target_rows[:exact]
    queries[positions[exact:]] = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    np.save(directory / "queries.npy", queries.astype(np.float16))
    np.savez(directory / "truth.npz", positions=positions, targets=targets, n_exact=exact, n_corpus=n_corpus,
             n_duplicates=int(is_duplicate.sum()))


class MemorySampler:
    """Peaks of RssAnon and RssFile (KiB), read from /proc/self/status every ``interval`` seconds."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak = {"RssAnon": 0, "RssFile": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        for field, value in read_status("RssAnon", "RssFile").items():
            self.peak[field] = max(self.peak[field], value)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def read_status(*fields: str) -> dict[str, int]:
    """Fields of /proc/self/status in KiB."""
    values = {}
    with open("/proc/self/status") as status:
        for line in status:
            name = line.split(":", 1)[0]
            if name in fields:
                values[name] = int(line.split()[1])
    return values


def measure(directory: Path, seed: int) -> dict:
    """Run medexp's post-embedding image_nn steps over the stored corpus (in this process)."""
    from omegaconf import OmegaConf

    import faiss  # noqa: F401  (loaded before the baseline: a library is not search memory)
    from medexp.benchmarks.base import Example
    from medexp.config.schemas.images import ImageNNConfig
    from medexp.detectors.image_nn import image_nn_detector
    from medexp.images.audit import DeduplicatedCorpus, EmbeddedSide, match_images
    from medexp.images.embedders import OpenClipEmbedder
    from medexp.images.store import DistinctImages, EmbeddingSet

    detector_cfg = OmegaConf.structured(ImageNNConfig)
    truth = np.load(directory / "truth.npz")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # VmHWM restarts from the current resident size: imports are not counted
    baseline = read_status("VmRSS", "RssAnon", "RssFile")
    seconds: dict[str, float] = {}
    with MemorySampler() as sampler:
        started = time.perf_counter()
        shards = [np.load(path, mmap_mode="r") for path in sorted((directory / "shards").glob("*.npy"))]
        n = sum(len(shard) for shard in shards)
        # what the corpus loader and the byte digests would give: one row and one digest per file
        digests = [f"{i:064x}" for i in range(n)]
        rows = [Example(f"pmc_oa::{i}", i, Path(f"/pmc_oa/{i}.jpg"), "", "") for i in range(n)]
        corpus = EmbeddedSide(rows, DistinctImages(digests, [row.image for row in rows], np.arange(n)),
                              EmbeddingSet(digests, shards))
        queries = np.load(directory / "queries.npy")
        bench_digests = [f"bench{i:059x}" for i in range(len(queries))]
        bench_rows = [Example(f"bench::{i}", i, Path(f"/bench/{i}.png"), "q", "a") for i in range(len(queries))]
        bench = EmbeddedSide(bench_rows, DistinctImages(bench_digests, [row.image for row in bench_rows],
                                                         np.arange(len(queries))), EmbeddingSet(bench_digests, [queries]))
        seconds["load"] = time.perf_counter() - started
        started = time.perf_counter()
        reference = DeduplicatedCorpus.build(corpus)
        seconds["deduplicate"] = time.perf_counter() - started
        started = time.perf_counter()
        calibration, table, metrics = match_images(bench, reference, detector_cfg.calibration_size, detector_cfg.index,
                                                   seed, "pmc_oa_synthetic")
        seconds["search"] = time.perf_counter() - started
        started = time.perf_counter()
        result = image_nn_detector(table, calibration, detector_cfg.tau_alpha, detector_cfg.sweep_alphas,
                                   detector_cfg.alpha, OpenClipEmbedder.resolution)
        seconds["detector"] = time.perf_counter() - started
    peak = read_status("VmHWM")["VmHWM"]

    positions, targets, n_exact = truth["positions"], truth["targets"], int(truth["n_exact"])
    found = result.table.set_index("image_index").loc[positions]
    expected_neighbour = np.array([f"pmc_oa::{t}" for t in targets])
    planted_ok = (found["flagged"].to_numpy() & (found["neighbour_id"].to_numpy() == expected_neighbour))
    return {
        "corpus_vectors": n,
        "corpus_distinct": int(metrics["corpus_n_distinct"]),
        "corpus_duplicates_planted": int(truth["n_duplicates"]),
        "queries": len(queries),
        "calibration_queries": len(calibration),
        "seconds": seconds,
        "seconds_total": sum(seconds.values()),
        "search_queries_per_s": (len(queries) + len(calibration)) / seconds["search"],
        "baseline_kib": baseline,
        "peak_vmhwm_kib": peak,
        "peak_rss_anon_kib": sampler.peak["RssAnon"],
        "peak_rss_file_kib": sampler.peak["RssFile"],
        "planted_queries": len(positions),
        "planted_found_and_flagged": int(planted_ok.sum()),
        "planted_same_vector": int((found["match"].to_numpy()[:n_exact] == "same_vector").sum()),
        "tau": result.metrics["tau"],
        "n_images_flagged": int(result.metrics["n_images_flagged"]),
        "p_value": result.metrics["p_value"],
        "loadavg_after": os.getloadavg(),
        "threads": __import__("faiss").omp_get_max_threads(),
    }


def main(argv: list[str] | None = None) -> int:
    from medexp.config.schemas.images import EmbedderBase

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="where the synthetic corpus is written (4.3 GB at full size)")
    parser.add_argument("--corpus", type=int, default=1_850_000)
    parser.add_argument("--queries", type=int, default=11_700)
    parser.add_argument("--duplicate-rate", type=float, default=0.01, help="share of corpus rows that copy another")
    parser.add_argument("--planted", type=int, default=100, help="benchmark queries that copy a corpus row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    if args.measure_only:
        print(json.dumps(measure(args.dir, args.seed)))
        return 0
    if not (args.dir / "truth.npz").exists():
        started = time.perf_counter()
        generate(args.dir, args.corpus, args.queries, args.duplicate_rate, args.planted, EmbedderBase.shard_size,
                 args.seed)
        print(f"generated {args.corpus:,} x {DIM} float16 in {time.perf_counter() - started:.0f} s under {args.dir}",
              file=sys.stderr)
    loadavg_before = os.getloadavg()
    # a fresh process, so that its peak memory is the measured run's alone
    child = subprocess.run([sys.executable, __file__, "--dir", str(args.dir), "--seed", str(args.seed), "--measure-only"],
                           capture_output=True, text=True)
    if child.returncode:
        sys.stderr.write(child.stderr)
        return child.returncode
    result = json.loads(child.stdout.strip().splitlines()[-1])
    result["loadavg_before"] = loadavg_before
    print(json.dumps(result, indent=1))
    if result["planted_found_and_flagged"] != result["planted_queries"]:
        print(f"FAILED: {result['planted_found_and_flagged']} of {result['planted_queries']} planted copies found",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
