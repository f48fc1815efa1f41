"""The image_nn pipeline of one cell: corpus and benchmark -> embeddings -> search -> detector.

1. Load the reference corpus (a benchmark source, or another split of the cell's benchmark) and
   keep the rows with an image on both sides.
2. Images are items, questions are not: each side's files are grouped by the SHA-256 of their
   bytes, and each distinct image is embedded once (float16 shards, cached and resumable).
3. The corpus is collapsed further to distinct *vectors*: files with different bytes but an
   identical stored embedding (the same perceptual hash, a re-encode with the same pixels) are
   one image, found by hashing each float16 vector's bytes. The corpus duplicate rate is logged.
4. One search pass against the distinct corpus vectors answers every query: a seeded
   calibration sample of distinct corpus images (each excluding itself, hence its whole
   duplicate group) and every distinct benchmark image. A benchmark image with the bytes or the
   vector of a corpus image is an exact duplicate, found by lookup whatever the search returns,
   and gets distance exactly 0.
5. The detector turns the distances into tau, flags, the alpha sweep and the p-value, per image;
   flags are mapped back to every question that uses the image (``questions`` table and rates).
   Adjudication panels show exact duplicates first, then the closest near-neighbours.
Approximate indexes are checked against exact search on a seeded sample (recall@1, logged).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from medexp.benchmarks.base import Benchmark, Example
from medexp.benchmarks.skips import skip_metrics
from medexp.detectors.base import DetectorResult
from medexp.images.store import DistinctImages, EmbeddingSet

log = logging.getLogger("medexp")

SAME_BYTES, SAME_VECTOR, NEAR = "same_bytes", "same_vector", "near"  # how an image met its neighbour


def corpus_seed(global_seed: int, detector_cfg) -> int:
    """The seed of an image_nn config's calibration sample: from its corpus and backbone, not from the
    cell, so all benchmarks share one calibrated tau (and a flag source gets the flags its cell gets)."""
    from medexp.kernel.hashing import derive_seed

    return derive_seed(global_seed, "image_nn", detector_cfg.corpus.name, detector_cfg.embedder.name)


def load_corpus(corpus_cfg, cache_dir: Path) -> Benchmark:
    """The corpus's source benchmark, with a corpus-specific message when its location is unset."""
    from medexp.benchmarks import load_benchmark_from_config
    from medexp.config.schemas import BenchFormat

    source = corpus_cfg.source
    fmt = BenchFormat(source.format)
    generated = fmt in (BenchFormat.demo, BenchFormat.demo_corpus)
    if not (source.root or source.get("hub_id") or generated):
        raise ValueError(
            f"corpus={corpus_cfg.name}: set detector.corpus.source.root=/path/to/{corpus_cfg.name} (format {fmt.value})"
        )
    source = source.copy()
    # A reference corpus is a set of images: its rows need no question or answer, and question
    # filters (bench.languages ...) do not apply to it: an image is the same image whatever the
    # language of the questions about it.
    source.image_only = True
    return load_benchmark_from_config(source, cache_dir)


@dataclass
class EmbeddedSide:
    """The rows of one side (benchmark or corpus) with an image, their distinct images and vectors."""

    rows: list[Example]
    images: DistinctImages  # rows grouped by image bytes
    vectors: EmbeddingSet  # one vector per distinct image (ids: the digests)


@dataclass
class DeduplicatedCorpus:
    """The corpus collapsed to distinct vectors: one group per distinct stored embedding."""

    side: EmbeddedSide
    group_of_image: np.ndarray  # distinct image (digest) -> its vector group
    vectors: EmbeddingSet  # one vector per group, in group order: the searched corpus
    group_of_key: dict[bytes, int]  # float16 vector hash -> group
    first_row_of_image: np.ndarray  # distinct image -> the first corpus row holding it
    first_row_of_group: np.ndarray  # group -> the first corpus row in it
    rows_in_group: np.ndarray  # group -> corpus rows (files, questions) in it

    @classmethod
    def build(cls, side: EmbeddedSide) -> "DeduplicatedCorpus":
        from medexp.images.store import vector_keys

        group_of_key: dict[bytes, int] = {}
        representatives = []
        group_of_image = np.empty(len(side.images), dtype=np.int64)
        for image, key in enumerate(vector_keys(side.vectors)):
            if key not in group_of_key:
                group_of_key[key] = len(representatives)
                representatives.append(image)
            group_of_image[image] = group_of_key[key]
        vectors = side.vectors if len(representatives) == len(side.images) else side.vectors.subset(representatives)
        group_of_row = group_of_image[side.images.inverse]
        return cls(
            side,
            group_of_image,
            vectors,
            group_of_key,
            first_row_of_image=np.unique(side.images.inverse, return_index=True)[1],
            first_row_of_group=np.unique(group_of_row, return_index=True)[1],
            rows_in_group=np.bincount(group_of_row, minlength=len(representatives)),
        )

    def metrics(self) -> dict[str, float]:
        n_rows, n_distinct = len(self.side.rows), len(self.vectors)
        return {
            "corpus_n_images": float(n_rows),  # rows with an image (one per question in a VQA split)
            "corpus_n_distinct_files": float(len(self.side.images)),  # distinct bytes
            "corpus_n_distinct": float(n_distinct),  # distinct vectors: the calibration population
            "corpus_duplicate_rate": 1.0 - n_distinct / n_rows,  # share of rows repeating an earlier image
        }


def image_nn_audit(
    examples: Sequence[Example], detector_cfg, cache_dir: str | Path, seed: int, corpus: Benchmark | None = None
) -> DetectorResult:
    """Run Detector 1 for ``examples`` against ``detector_cfg.corpus`` (see the module docstring).

    ``seed`` drives the calibration sample, IVF training and the recall sample; the evaluator
    derives it from the corpus and backbone, so every benchmark is judged at the same tau.
    ``corpus``: the loaded reference corpus (loaded here from ``detector_cfg.corpus`` when None).
    """
    from medexp.detectors.image_nn import image_nn_detector
    from medexp.images.embedders import load_embedder
    from medexp.images.store import distinct_images

    cache_dir = Path(cache_dir)
    corpus_name = detector_cfg.corpus.name
    with_image = [example for example in examples if example.image is not None]
    if not with_image:
        raise ValueError(f"image_nn: none of the {len(examples)} benchmark examples has an image")
    corpus = corpus if corpus is not None else load_corpus(detector_cfg.corpus, cache_dir)
    corpus_rows = [example for example in corpus.examples if example.image is not None]
    if len(corpus_rows) < 2:
        raise ValueError(f"corpus={corpus_name}: needs at least two images, has {len(corpus_rows)}")
    if corpus.skipped:
        log.warning("corpus %s: skipped %d rows (%s)", corpus_name, len(corpus.skipped),
                    ", ".join(f"{name.split('.', 1)[1]} {int(count)}" for name, count in skip_metrics(corpus.skipped).items()))

    embedder_cfg = detector_cfg.embedder
    embedder = load_embedder(embedder_cfg)

    def embed(images: DistinctImages, rows: int, what: str) -> EmbeddingSet:
        from medexp.images.store import embed_images

        desc = f"embedding {what}: {len(images)} distinct images of {rows} rows ({embedder_cfg.name})"
        return embed_images(embedder, images, cache_dir, embedder_cfg.batch_size, embedder_cfg.shard_size, desc)

    corpus_images = distinct_images([row.image for row in corpus_rows], cache_dir)
    outside_only = images_outside_selection(corpus_rows, corpus_images, corpus.outside_selection)
    if corpus.outside_selection:
        log.info("corpus %s: %d of its %d distinct images come only from rows outside the benchmark's question "
                 "selection (bench.languages ...), read because images are compared whatever their questions",
                 corpus_name, outside_only, len(corpus_images))
    corpus_side = EmbeddedSide(corpus_rows, corpus_images, embed(corpus_images, len(corpus_rows), f"corpus {corpus_name}"))
    reference = DeduplicatedCorpus.build(corpus_side)
    bench_images = distinct_images([row.image for row in with_image], cache_dir)
    bench = EmbeddedSide(with_image, bench_images, benchmark_vectors(bench_images, corpus_side, embed))
    calibration, table, metrics = match_images(bench, reference, detector_cfg.calibration_size, detector_cfg.index,
                                               seed, corpus_name)
    result = image_nn_detector(table, calibration, detector_cfg.tau_alpha, detector_cfg.sweep_alphas,
                               detector_cfg.alpha, embedder.resolution)
    result.metrics.update(metrics)
    result.metrics.update(
        {
            "n_corpus_skipped": float(len(corpus.skipped)),
            **skip_metrics(corpus.skipped, "n_corpus_skipped"),
            "corpus_n_distinct_files_outside_selection": float(outside_only),
            "n_without_image": float(len(examples) - len(with_image)),
        }
    )
    result.metrics.update(planted_truth_metrics(result.table))
    result.extra_tables["questions"] = question_table(bench, result.table)
    result.figures.update(panels(result.extra_tables["flagged_pairs"], detector_cfg.max_panels))
    return result


def images_outside_selection(rows: Sequence[Example], images: DistinctImages, outside: frozenset[str]) -> int:
    """How many distinct images (by bytes) only rows outside the question selection hold."""
    if not outside:
        return 0
    inside = np.zeros(len(images), dtype=bool)
    for row, image in zip(rows, images.inverse):
        if row.example_id not in outside:
            inside[image] = True
    return int((~inside).sum())


def benchmark_vectors(images: DistinctImages, corpus: EmbeddedSide, embed) -> EmbeddingSet:
    """The benchmark's vectors: a benchmark image whose bytes are in the corpus takes the corpus's
    stored vector; only the others are embedded (``embed(images, n_rows, what)``), so an image is
    embedded once per cell. Benchmarks are small next to corpora: their vectors are held in memory."""
    in_corpus = {digest: image for image, digest in enumerate(corpus.images.digests)}
    shared = [image for image, digest in enumerate(images.digests) if digest in in_corpus]
    fresh = [image for image, digest in enumerate(images.digests) if digest not in in_corpus]
    stored = np.empty((len(images), corpus.vectors.dim), dtype=np.float16)
    if shared:
        stored[shared] = corpus.vectors.stored([in_corpus[images.digests[image]] for image in shared])
    if fresh:
        new = DistinctImages([images.digests[i] for i in fresh], [images.paths[i] for i in fresh], np.arange(len(fresh)))
        stored[fresh] = embed(new, len(images.inverse), f"benchmark ({len(shared)} more are corpus images)").stored(
            range(len(fresh)))
    return EmbeddingSet(list(images.digests), [stored])


def match_images(
    bench: EmbeddedSide, reference: DeduplicatedCorpus, calibration_size: int, index_cfg, seed: int, corpus_name: str
):
    """Search once: the calibration distances of a seeded sample of distinct corpus images (each
    excluding itself) and the neighbour table of the distinct benchmark images.

    Returns ``(calibration, neighbour table, metrics)``; the metrics describe the corpus and, for
    an approximate index, its measured recall@1.
    """
    from medexp.config.schemas import IndexKind
    from medexp.images.search import ApproximateSearch, ExactSearch, Bfloat16Search, build_searcher, nearest, recall_at_1

    metrics = reference.metrics()
    log.info("image_nn: corpus %s holds %d images, %d distinct files, %d distinct vectors (duplicate rate %.3f)",
             corpus_name, len(reference.side.rows), len(reference.side.images), len(reference.vectors),
             metrics["corpus_duplicate_rate"])
    n_distinct = len(reference.vectors)
    if n_distinct < 2:
        raise ValueError(f"corpus={corpus_name}: needs at least two distinct images, its {len(reference.side.rows)} "
                         f"images are copies of {n_distinct}")
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n_distinct, size=min(calibration_size, n_distinct), replace=False))
    n_bench = len(bench.images)
    queries = np.concatenate([reference.vectors.rows(sample), bench.vectors.rows(np.arange(n_bench))])
    exclude = np.concatenate([sample, np.full(n_bench, -1, dtype=np.int64)])
    searcher = build_searcher(reference.vectors, index_cfg, seed)
    log.info("image_nn: %d calibration + %d benchmark queries against %d distinct corpus images",
             len(sample), n_bench, n_distinct)
    distances, neighbours = nearest(searcher, queries, exclude)
    metrics["embedding_dim"] = float(reference.vectors.dim)
    if isinstance(searcher, Bfloat16Search):
        metrics["bf16_fallback_queries"] = float(searcher.fallbacks)
    if isinstance(searcher, ApproximateSearch):
        checked = np.sort(rng.choice(len(queries), size=min(index_cfg.recall_sample, len(queries)), replace=False))
        exact = ExactSearch(reference.vectors, index_cfg.block_size, index_cfg.gpu)
        recall = recall_at_1(searcher, exact, queries[checked], exclude[checked])
        log.info("image_nn: %s index recall@1 = %.4f on %d queries", IndexKind(index_cfg.kind).value, recall, len(checked))
        metrics.update({"approx_recall_at_1": recall, "approx_recall_queries": float(len(checked))})
    table = neighbour_table(bench, reference, distances[len(sample) :], neighbours[len(sample) :])
    return distances[: len(sample)], table, metrics


def neighbour_table(bench: EmbeddedSide, reference: DeduplicatedCorpus, distances: np.ndarray, neighbours: np.ndarray):
    """One row per distinct benchmark image: its questions, its nearest corpus image, how they met.

    ``distances``/``neighbours``: the search result of each distinct benchmark image against the
    distinct corpus vectors. An image with the bytes (``same_bytes``) or the stored vector
    (``same_vector``) of a corpus image is an exact duplicate at distance 0, whatever the search
    returned. ``neighbour_id`` is the first corpus row holding the neighbour (for same bytes:
    those bytes); ``neighbour_rows`` counts the corpus rows (questions of a train split) that
    hold the neighbour's image. ``planted`` / ``neighbour_is_planted_copy`` are filled when the
    corpus records ground truth (meta ``duplicate_of`` = the ``<split>::<id>`` suffix of a
    benchmark example id, as the demo corpus does); otherwise they are missing (None).
    """
    import pandas as pd

    from medexp.images.store import vector_keys

    corpus_images = {digest: image for image, digest in enumerate(reference.side.images.digests)}
    corpus_rows = reference.side.rows
    has_truth = any("duplicate_of" in row.meta for row in corpus_rows)
    copies_in_group: dict[int, set] = {}  # group -> the benchmark ids its rows copy (ground truth)
    if has_truth:
        group_of_row = reference.group_of_image[reference.side.images.inverse]
        for row, group in zip(corpus_rows, group_of_row):
            if row.meta.get("duplicate_of"):
                copies_in_group.setdefault(int(group), set()).add(row.meta["duplicate_of"])
    copied = set().union(*copies_in_group.values())

    questions_of_image: list[list[Example]] = [[] for _ in range(len(bench.images))]
    for example, image in zip(bench.rows, bench.images.inverse):
        questions_of_image[image].append(example)
    rows = []
    keys = vector_keys(bench.vectors)
    for image, (digest, key) in enumerate(zip(bench.images.digests, keys)):
        if digest in corpus_images:
            match, distance = SAME_BYTES, 0.0
            group = int(reference.group_of_image[corpus_images[digest]])
            neighbour = corpus_rows[reference.first_row_of_image[corpus_images[digest]]]
        else:
            group = reference.group_of_key.get(key, int(neighbours[image]))
            match, distance = (SAME_VECTOR, 0.0) if key in reference.group_of_key else (NEAR, float(distances[image]))
            neighbour = corpus_rows[reference.first_row_of_group[group]]
        questions = questions_of_image[image]
        suffixes = {example.example_id.split("::", 1)[-1] for example in questions}
        rows.append(
            {
                "image_index": image,
                "image_sha256": digest,
                "example_id": questions[0].example_id,  # the first question using the image
                "position": questions[0].position,
                "n_questions": len(questions),
                "neighbour_id": neighbour.example_id,
                "neighbour_rows": int(reference.rows_in_group[group]),
                "distance": distance,
                "match": match,
                "image": str(questions[0].image),
                "neighbour_image": str(neighbour.image),
                "planted": bool(suffixes & copied) if has_truth else None,
                "neighbour_is_planted_copy": bool(suffixes & copies_in_group.get(group, set())) if has_truth else None,
            }
        )
    return pd.DataFrame(rows)


def question_table(bench: EmbeddedSide, images):
    """One row per benchmark question with an image: its image and that image's verdict."""
    import pandas as pd

    verdict = images.set_index("image_index")
    picked = verdict.loc[bench.images.inverse]
    return pd.DataFrame(
        {
            "example_id": [example.example_id for example in bench.rows],
            "position": [example.position for example in bench.rows],
            "image_index": bench.images.inverse,
            "image_sha256": picked["image_sha256"].to_numpy(),
            "neighbour_id": picked["neighbour_id"].to_numpy(),
            "distance": picked["distance"].to_numpy(),
            "match": picked["match"].to_numpy(),
            "exact_duplicate": picked["exact_duplicate"].to_numpy(),
            "flagged": picked["flagged"].to_numpy(),
        }
    )


def planted_truth_metrics(table) -> dict[str, float]:
    """Recall of planted copies and the flag rate of the other images, when ground truth exists."""
    if table["planted"].isna().any():
        return {}
    planted = table["planted"].astype(bool)
    flagged = table["flagged"].astype(bool)
    metrics = {"truth_n_planted": float(planted.sum())}
    if planted.any():
        metrics["truth_recall"] = float(flagged[planted].mean())
        metrics["truth_neighbour_is_copy"] = float(table["neighbour_is_planted_copy"][planted].astype(bool).mean())
    if (~planted).any():
        metrics["truth_flag_rate_unplanted"] = float(flagged[~planted].mean())
    return metrics


def panels(flagged_pairs, max_panels: int) -> dict[str, object]:
    """Adjudication figures of the first ``max_panels`` flagged pairs: exact duplicates, then the
    closest near-neighbours (the order of ``flagged_pairs``)."""
    from medexp.images.panels import adjudication_panel, panel_name

    figures = {}
    for rank, pair in enumerate(flagged_pairs.head(max(0, max_panels)).itertuples(index=False)):
        figure = adjudication_panel(Path(pair.image), Path(pair.neighbour_image), pair.example_id, pair.neighbour_id,
                                    pair.distance, pair.match)
        figures[panel_name(rank, pair.example_id)] = figure
    return figures
