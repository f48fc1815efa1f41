"""image_nn at PMC-OA scale: cache, search and detector over a synthetic 1.85M x 1152 corpus.

PMC-OA holds about 1.65M image-caption pairs; 1.85M x 1152 (SigLIP SO400M width) float16 is
4.26 GB, and 11,700 queries are about the test images of the audited benchmarks. A synthetic
embedder stands in for SigLIP (seeded random unit vectors, one block of rows at a time), and
everything after it is medexp's own code: :func:`~medexp.images.store.embed_images` writes the
corpus as float16 cache shards (``EmbedderBase.shard_size`` images each) on a first run; a fresh
process then runs the steps of :func:`~medexp.images.audit.image_nn_audit` on the warm cache:
``embed_images`` again (every shard's bytes verified, then memory-mapped),
:class:`~medexp.images.audit.DeduplicatedCorpus` (float16 vector hashing),
:func:`~medexp.images.audit.match_images` (the configured exact search over the distinct vectors:
5,000 self-excluded calibration queries plus the benchmark's) and
:func:`~medexp.detectors.image_nn.image_nn_detector`. Only image decoding, the benchmark's own
embedding and the adjudication panels are left out (there are no image files).

Planted truth, so the run checks what it found: a share of corpus rows are exact copies of rows
of the first block (re-published figures; they exercise deduplication), and some benchmark
queries are the stored vector of a corpus row (``same_vector``) or a noisy near-copy of one. The
run fails unless every planted query is flagged with its source as neighbour.

Memory is read from /proc/self/status (Linux): VmHWM, the peak resident size, counts the pages
of the memory-mapped corpus that were read (file-backed, dropped by the kernel under pressure),
so a sampling thread also records the peak of RssAnon (memory the process allocated) and
RssFile separately.

    PYTHONPATH=$PWD python perf/pmcoa_scale.py --dir /tmp/pmcoa_scale            # full size
    PYTHONPATH=$PWD python perf/pmcoa_scale.py --dir /tmp/pmcoa_small --corpus 100000 --queries 1000
    PYTHONPATH=$PWD python perf/pmcoa_scale.py --dir /tmp/pmcoa_small --corpus 100000 --queries 1000 --compare

``--compare`` times faiss-cpu's ``IndexFlatIP`` (the whole corpus in float32, one call), medexp's
blocked float32 search and its bfloat16 search (:class:`~medexp.images.search.Bfloat16Search`) on the same
corpus and queries in one process, and fails unless all three give the same neighbour and distance
for every query.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

DIM = 1152
BLOCK = 4096  # rows generated from one seed: the synthetic embedder's unit of work
NEAR_COPY_NOISE = 0.01  # per-component noise of a near-copy: cosine distance about DIM * noise^2 / 2 = 0.06


def unit_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    rows = rng.standard_normal((count, DIM), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


class SyntheticEmbedder:
    """Stands in for SigLIP: the vector of corpus image ``i`` (file ``<i>.jpg``) is row ``i % BLOCK``
    of block ``i // BLOCK``, drawn from a generator seeded by ``(seed, block)``; a planted
    duplicate is instead the vector of its source row in block 0. Deterministic, whatever order
    or batch the store asks in."""

    dim = DIM

    def __init__(self, n: int, duplicate_rate: float, seed: int):
        from medexp.images.embedders import OpenClipEmbedder

        self.resolution = OpenClipEmbedder.resolution  # the float16 tie distance of a SigLIP store
        self.n, self.duplicate_rate, self.seed = n, duplicate_rate, seed
        rng = np.random.default_rng([seed, n])
        is_duplicate = rng.random(n) < duplicate_rate
        is_duplicate[:BLOCK] = False  # sources live in block 0
        self.source_of = np.where(is_duplicate, rng.integers(0, min(BLOCK, n), n), -1)
        self._first_block = self.block(0)

    def block(self, index: int) -> np.ndarray:
        return unit_rows(np.random.default_rng([self.seed, index]), BLOCK)

    def cache_key(self) -> dict:
        return {"kind": "synthetic", "n": self.n, "duplicate_rate": self.duplicate_rate, "seed": self.seed}

    def embed(self, paths) -> np.ndarray:
        indices = np.array([int(Path(path).stem) for path in paths], dtype=np.int64)
        rows = np.empty((len(indices), DIM), dtype=np.float32)
        for block in np.unique(indices // BLOCK):
            mine = indices // BLOCK == block
            rows[mine] = self.block(int(block))[indices[mine] % BLOCK]
        copies = self.source_of[indices] >= 0
        rows[copies] = self._first_block[self.source_of[indices[copies]]]
        return rows


def corpus_side(n: int, embedder: SyntheticEmbedder, cache_dir: Path):
    """The corpus as image_nn_audit holds it: one row, file and digest per image, and the vectors
    from the embedding cache (written on a first call, verified and memory-mapped after)."""
    from medexp.benchmarks.base import Example
    from medexp.config.schemas.images import EmbedderBase
    from medexp.images.audit import EmbeddedSide
    from medexp.images.store import DistinctImages, embed_images

    rows = [Example(f"pmc_oa::{i}", i, Path(f"/pmc_oa/{i}.jpg"), "", "") for i in range(n)]
    images = DistinctImages([f"{i:064x}" for i in range(n)], [row.image for row in rows], np.arange(n))
    vectors = embed_images(embedder, images, cache_dir, BLOCK, EmbedderBase.shard_size, desc="synthetic corpus")
    return EmbeddedSide(rows, images, vectors)


def plant_queries(directory: Path, embedder: SyntheticEmbedder, n_queries: int, planted: int, seed: int) -> None:
    """Benchmark queries: ``planted`` copy a corpus row (the first half its stored float16 vector,
    the second half a noisy copy), the rest are fresh random vectors."""
    rng = np.random.default_rng([seed, n_queries, planted])
    queries = unit_rows(rng, n_queries)
    targets = np.sort(rng.choice(np.flatnonzero(embedder.source_of < 0), size=planted, replace=False))
    target_rows = embedder.embed([f"{t}.jpg" for t in targets]).astype(np.float16).astype(np.float32)
    positions = rng.choice(n_queries, size=planted, replace=False)
    exact = planted // 2
    noisy = target_rows[exact:] + rng.standard_normal(target_rows[exact:].shape, dtype=np.float32) * NEAR_COPY_NOISE
    queries[positions[:exact]] = target_rows[:exact]
    queries[positions[exact:]] = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    np.save(directory / "queries.npy", queries.astype(np.float16))
    np.savez(directory / "truth.npz", positions=positions, targets=targets, n_exact=exact)


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


def measure(directory: Path, n: int, duplicate_rate: float, seed: int) -> dict:
    """Run medexp's image_nn steps on the warm cache (in this process) and check the planted truth."""
    from omegaconf import OmegaConf

    import faiss  # loaded before the baseline: a library is not search memory
    from medexp.benchmarks.base import Example
    from medexp.config.schemas.images import ImageNNConfig
    from medexp.detectors.image_nn import image_nn_detector
    from medexp.images.audit import DeduplicatedCorpus, EmbeddedSide, match_images
    from medexp.images.store import DistinctImages, EmbeddingSet

    detector_cfg = OmegaConf.structured(ImageNNConfig)
    embedder = SyntheticEmbedder(n, duplicate_rate, seed)
    truth = np.load(directory / "truth.npz")
    queries = np.load(directory / "queries.npy")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # VmHWM restarts from the current resident size: imports are not counted
    baseline = read_status("VmRSS", "RssAnon", "RssFile")
    seconds: dict[str, float] = {}
    with MemorySampler() as sampler:
        started = time.perf_counter()
        corpus = corpus_side(n, embedder, directory / "cache")
        seconds["corpus_rows_and_cache"] = time.perf_counter() - started
        # the benchmark's vectors are held in memory, as benchmark_vectors gives them
        bench_digests = [f"bench{i:059x}" for i in range(len(queries))]
        bench_rows = [Example(f"bench::{i}", i, Path(f"/bench/{i}.png"), "q", "a") for i in range(len(queries))]
        bench = EmbeddedSide(bench_rows, DistinctImages(bench_digests, [row.image for row in bench_rows],
                                                         np.arange(len(queries))), EmbeddingSet(bench_digests, [queries]))
        started = time.perf_counter()
        reference = DeduplicatedCorpus.build(corpus)
        seconds["deduplicate"] = time.perf_counter() - started
        started = time.perf_counter()
        calibration, table, metrics = match_images(bench, reference, detector_cfg.calibration_size, detector_cfg.index,
                                                   seed, "pmc_oa_synthetic")
        seconds["search"] = time.perf_counter() - started
        started = time.perf_counter()
        result = image_nn_detector(table, calibration, detector_cfg.tau_alpha, detector_cfg.sweep_alphas,
                                   detector_cfg.alpha, embedder.resolution)
        seconds["detector"] = time.perf_counter() - started
    peak = read_status("VmHWM")["VmHWM"]

    positions, targets, n_exact = truth["positions"], truth["targets"], int(truth["n_exact"])
    found = result.table.set_index("image_index").loc[positions]
    expected_neighbour = np.array([f"pmc_oa::{t}" for t in targets])
    planted_ok = (found["flagged"].to_numpy() & (found["neighbour_id"].to_numpy() == expected_neighbour))
    return {
        "corpus_vectors": n,
        "corpus_distinct": int(metrics["corpus_n_distinct"]),
        "corpus_duplicates_planted": int((embedder.source_of >= 0).sum()),
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
        "threads": faiss.omp_get_max_threads(),
    }


class FlatIPSearch:
    """faiss-cpu's exact index, what a user would pick instead: the whole corpus in one float32
    ``IndexFlatIP`` (8.5 GB at full size), searched in one call."""

    def __init__(self, corpus):
        import faiss

        self.corpus = corpus
        self.index = faiss.IndexFlatIP(corpus.dim)
        for _, block in corpus.blocks(65536):
            self.index.add(block)

    def search(self, queries: np.ndarray, k: int):
        return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)


def compare_searches(directory: Path, n: int, duplicate_rate: float, seed: int, calibration: int) -> dict:
    """Every search path on the same corpus and queries (the calibration sample excluding itself,
    then the benchmark queries), in this process: faiss-cpu's IndexFlatIP, medexp's blocked float32
    search (``exact``) and the bfloat16 search (``bf16``); seconds for each and whether every
    neighbour and distance equals IndexFlatIP's. Each search's time goes to stderr as it ends, so a
    run stopped early still tells what it measured."""
    import torch

    from medexp.images.audit import DeduplicatedCorpus
    from medexp.images.search import ExactSearch, Bfloat16Search, bfloat16_units, nearest

    embedder = SyntheticEmbedder(n, duplicate_rate, seed)
    reference = DeduplicatedCorpus.build(corpus_side(n, embedder, directory / "cache"))
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(len(reference.vectors), size=min(calibration, len(reference.vectors)), replace=False))
    bench = np.load(directory / "queries.npy").astype(np.float32)
    queries = np.concatenate([reference.vectors.rows(sample), bench / np.linalg.norm(bench, axis=1, keepdims=True)])
    exclude = np.concatenate([sample, np.full(len(bench), -1, dtype=np.int64)])
    results, answers = {}, {}
    for name, build in (("faiss_flat_ip", lambda: FlatIPSearch(reference.vectors)),
                        ("exact", lambda: ExactSearch(reference.vectors, use_gpu=False)),
                        ("bf16", lambda: Bfloat16Search(reference.vectors))):
        print(f"{name}: searching {len(queries):,} queries", file=sys.stderr, flush=True)
        started = time.perf_counter()
        searcher = build()
        built = time.perf_counter() - started
        distance, neighbour = nearest(searcher, queries, exclude)
        seconds = time.perf_counter() - started
        answers[name] = (distance, neighbour)
        results[name] = {"seconds": round(seconds, 2), "index_build_seconds": round(built, 2),
                         "queries_per_s": round(len(queries) / seconds, 1)}
        if isinstance(searcher, Bfloat16Search):
            results[name]["fallback_queries"] = searcher.fallbacks
        print(f"{name}: {seconds:.1f} s", file=sys.stderr, flush=True)
    reference_distance, reference_neighbour = answers["faiss_flat_ip"]
    for name, (distance, neighbour) in answers.items():
        results[name]["same_neighbours_as_faiss"] = int((neighbour == reference_neighbour).sum())
        results[name]["same_distances_as_faiss"] = int((distance == reference_distance).sum())
    return {"corpus_distinct": len(reference.vectors), "queries": len(queries), "searches": results,
            "bf16_speedup_over_faiss": round(results["faiss_flat_ip"]["seconds"] / results["bf16"]["seconds"], 2),
            "bf16_speedup_over_exact": round(results["exact"]["seconds"] / results["bf16"]["seconds"], 2),
            "torch_threads": torch.get_num_threads(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            # what index.kind=bf16 runs here: the bfloat16 search, or float32 exact search without bfloat16 units
            "bf16_units": bfloat16_units(), "loadavg_after": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="where the synthetic cache is written (4.3 GB at full size)")
    parser.add_argument("--corpus", type=int, default=1_850_000)
    parser.add_argument("--queries", type=int, default=11_700)
    parser.add_argument("--duplicate-rate", type=float, default=0.01, help="share of corpus rows that copy another")
    parser.add_argument("--planted", type=int, default=100, help="benchmark queries that copy a corpus row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare", action="store_true",
                        help="time faiss-cpu's IndexFlatIP, medexp's float32 exact search and its bfloat16 search side "
                             "by side on the same corpus and queries, and check that their answers are identical")
    parser.add_argument("--calibration", type=int, default=5000, help="self-excluded corpus queries (--compare)")
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    if args.measure_only and args.compare:
        print(json.dumps(compare_searches(args.dir, args.corpus, args.duplicate_rate, args.seed, args.calibration)))
        return 0
    if args.measure_only:
        print(json.dumps(measure(args.dir, args.corpus, args.duplicate_rate, args.seed)))
        return 0
    started = time.perf_counter()
    args.dir.mkdir(parents=True, exist_ok=True)
    embedder = SyntheticEmbedder(args.corpus, args.duplicate_rate, args.seed)
    corpus_side(args.corpus, embedder, args.dir / "cache")  # writes the cache once; a later run reuses it
    plant_queries(args.dir, embedder, args.queries, args.planted, args.seed)
    print(f"cache of {args.corpus:,} x {DIM} float16 ready in {time.perf_counter() - started:.0f} s under {args.dir}",
          file=sys.stderr)
    del embedder
    loadavg_before = os.getloadavg()
    # a fresh process, so that its peak memory is the measured run's alone; its progress goes
    # straight to stderr, and it is stopped with this one (a `timeout` stops this process only)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with subprocess.Popen([sys.executable, __file__, "--dir", str(args.dir), "--corpus", str(args.corpus),
                           "--duplicate-rate", str(args.duplicate_rate), "--seed", str(args.seed), "--measure-only",
                           "--calibration", str(args.calibration)] + (["--compare"] if args.compare else []),
                          stdout=subprocess.PIPE, text=True) as child:
        try:
            stdout, _ = child.communicate()
        finally:
            if child.poll() is None:
                child.kill()
    if child.returncode:
        return child.returncode
    result = json.loads(stdout.strip().splitlines()[-1])
    result["loadavg_before"] = loadavg_before
    print(json.dumps(result, indent=1))
    if args.compare:
        identical = all(search["same_neighbours_as_faiss"] == search["same_distances_as_faiss"] == result["queries"]
                        for search in result["searches"].values())
        if not identical:
            print("FAILED: a search path answered differently from faiss-cpu's IndexFlatIP", file=sys.stderr)
        return 0 if identical else 1
    if result["planted_found_and_flagged"] != result["planted_queries"]:
        print(f"FAILED: {result['planted_found_and_flagged']} of {result['planted_queries']} planted copies found",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
