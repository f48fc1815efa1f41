"""The image_nn pipeline of one cell: corpus and benchmark -> embeddings -> search -> detector.

1. Load the reference corpus (a benchmark source) and keep the images of both sides.
2. Embed both with the configured embedder (float16 shards, cached and resumable).
3. One search pass answers every query: a seeded calibration sample of corpus images (their own
   row excluded) and every benchmark image.
4. The detector turns the distances into tau, flags, the alpha sweep and the p-value; panels of
   the closest flagged pairs are added for adjudication.
Approximate indexes are checked against exact search on a seeded sample (recall@1, logged).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from medexp.benchmarks.base import Benchmark, Example
from medexp.detectors.base import DetectorResult

log = logging.getLogger("medexp")


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
    source.image_only = True  # a reference corpus is a set of images; its rows need no question
    return load_benchmark_from_config(source, cache_dir)


def image_nn_audit(
    examples: Sequence[Example], detector_cfg, cache_dir: str | Path, seed: int, corpus: Benchmark | None = None
) -> DetectorResult:
    """Run Detector 1 for ``examples`` against ``detector_cfg.corpus`` (see the module docstring).

    ``seed`` drives the calibration sample, IVF training and the recall sample; the evaluator
    derives it from the corpus and backbone, so every benchmark is judged at the same tau.
    ``corpus``: the loaded reference corpus (loaded here from ``detector_cfg.corpus`` when None).
    """
    from medexp.config.schemas import IndexKind
    from medexp.detectors.image_nn import image_nn_detector
    from medexp.images.embedders import load_embedder
    from medexp.images.search import ExactSearch, build_searcher, nearest, recall_at_1
    from medexp.images.store import embed_images

    cache_dir = Path(cache_dir)
    with_image = [example for example in examples if example.image is not None]
    if not with_image:
        raise ValueError(f"image_nn: none of the {len(examples)} benchmark examples has an image")
    corpus = corpus if corpus is not None else load_corpus(detector_cfg.corpus, cache_dir)
    corpus_rows = [example for example in corpus.examples if example.image is not None]
    if len(corpus_rows) < 2:
        raise ValueError(f"corpus={detector_cfg.corpus.name}: needs at least two images, has {len(corpus_rows)}")
    if corpus.skipped:
        log.warning("corpus %s: skipped %d unreadable images", detector_cfg.corpus.name, len(corpus.skipped))

    embedder_cfg = detector_cfg.embedder
    embedder = load_embedder(embedder_cfg)

    def embed(rows: list[Example], what: str):
        ids = [row.example_id for row in rows]
        paths = [row.image for row in rows]
        return embed_images(embedder, ids, paths, cache_dir, embedder_cfg.batch_size, embedder_cfg.shard_size, what)

    corpus_set = embed(corpus_rows, f"embedding corpus {detector_cfg.corpus.name} ({embedder_cfg.name})")
    bench_set = embed(with_image, f"embedding benchmark images ({embedder_cfg.name})")

    rng = np.random.default_rng(seed)
    n_corpus = len(corpus_set)
    sample = np.sort(rng.choice(n_corpus, size=min(detector_cfg.calibration_size, n_corpus), replace=False))
    queries = np.concatenate([corpus_set.rows(sample), bench_set.rows(np.arange(len(bench_set)))])
    exclude = np.concatenate([sample, np.full(len(bench_set), -1, dtype=np.int64)])
    index_cfg = detector_cfg.index
    searcher = build_searcher(corpus_set, index_cfg, seed)
    log.info("image_nn: %d calibration + %d benchmark queries against %d corpus images", len(sample), len(bench_set), n_corpus)
    distances, neighbours = nearest(searcher, queries, exclude)
    calibration, bench_distances, bench_neighbours = distances[: len(sample)], distances[len(sample) :], neighbours[len(sample) :]

    extra_metrics = {
        "corpus_size": float(n_corpus),
        "n_corpus_skipped": float(len(corpus.skipped)),
        "n_without_image": float(len(examples) - len(with_image)),
        "embedding_dim": float(corpus_set.dim),
    }
    if not isinstance(searcher, ExactSearch):
        checked = np.sort(rng.choice(len(queries), size=min(index_cfg.recall_sample, len(queries)), replace=False))
        exact = ExactSearch(corpus_set, index_cfg.block_size, index_cfg.gpu)
        recall = recall_at_1(searcher, exact, queries[checked], exclude[checked])
        log.info("image_nn: %s index recall@1 = %.4f on %d queries", IndexKind(index_cfg.kind).value, recall, len(checked))
        extra_metrics.update({"approx_recall_at_1": recall, "approx_recall_queries": float(len(checked))})

    table = neighbour_table(with_image, corpus_rows, bench_distances, bench_neighbours)
    result = image_nn_detector(table, calibration, detector_cfg.tau_alpha, detector_cfg.sweep_alphas, detector_cfg.alpha)
    result.metrics.update(extra_metrics)
    result.metrics.update(planted_truth_metrics(result.table))
    result.figures.update(panels(result.extra_tables["flagged_pairs"], detector_cfg.max_panels))
    return result


def neighbour_table(examples: list[Example], corpus_rows: list[Example], distances: np.ndarray, neighbours: np.ndarray):
    """One row per benchmark image: its nearest corpus image, the distance, and provenance if known.

    ``planted`` / ``neighbour_is_planted_copy`` are filled when the corpus records ground truth
    (meta ``duplicate_of`` = the ``<split>::<id>`` suffix of a benchmark example id, as the demo
    corpus does); otherwise they are missing (None).
    """
    import pandas as pd

    copies = {row.meta["duplicate_of"] for row in corpus_rows if row.meta.get("duplicate_of")}
    has_truth = any("duplicate_of" in row.meta for row in corpus_rows)

    def copied(example: Example) -> bool | None:
        return example.example_id.split("::", 1)[-1] in copies if has_truth else None

    def is_copy_of(example: Example, neighbour: Example) -> bool | None:
        return neighbour.meta.get("duplicate_of") == example.example_id.split("::", 1)[-1] if has_truth else None

    rows = []
    for example, distance, index in zip(examples, distances, neighbours):
        neighbour = corpus_rows[int(index)]
        rows.append(
            {
                "example_id": example.example_id,
                "position": example.position,
                "neighbour_id": neighbour.example_id,
                "distance": float(distance),
                "image": str(example.image),
                "neighbour_image": str(neighbour.image),
                "planted": copied(example),
                "neighbour_is_planted_copy": is_copy_of(example, neighbour),
            }
        )
    return pd.DataFrame(rows)


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
    """Adjudication figures of the ``max_panels`` closest flagged pairs."""
    from medexp.images.panels import adjudication_panel, panel_name

    figures = {}
    for rank, pair in enumerate(flagged_pairs.head(max(0, max_panels)).itertuples(index=False)):
        figure = adjudication_panel(Path(pair.image), Path(pair.neighbour_image), pair.example_id, pair.neighbour_id, pair.distance)
        figures[panel_name(rank, pair.example_id)] = figure
    return figures
