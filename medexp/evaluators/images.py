"""Evaluator of image near-neighbour overlap (image_nn): the cell's images against its reference
corpus (loaded with the cell's inputs)."""

from __future__ import annotations

from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import PowerCount
from medexp.evaluators.context import CellContext


def image_nn(ctx: CellContext) -> DetectorResult:
    """Image near-neighbour overlap: needs no language model, so the cell's model plays no part."""
    from medexp.evaluators.simulated_power_cache import with_simulated_mde
    from medexp.images.audit import corpus_seed, image_nn_audit

    detector = ctx.cfg.detector
    result = image_nn_audit(ctx.examples, detector, ctx.cache_dir, corpus_seed(ctx.cfg.seed, detector),
                            corpus=ctx.corpus)
    sizes = {"images": int(result.metrics["n_images"]), "calibration": int(result.metrics["calibration_size"]),
             "tau_alpha": float(detector.tau_alpha)}
    return with_simulated_mde(result, "image_nn", sizes, float(detector.alpha), ctx.cache_dir)


def image_sizes(cfg, load) -> PowerCount:
    """``python -m medexp.power``'s count for image_nn: the distinct benchmark images and the
    calibration sample the corpus gives."""
    from medexp.images.audit import load_corpus
    from medexp.images.store import distinct_images

    detector, cache_dir = cfg.detector, cfg.paths.cache_dir
    images = len(distinct_images([example.image for example in load().examples if example.image is not None],
                                 cache_dir))
    corpus = load_corpus(detector.corpus, cache_dir)
    corpus_images = len(distinct_images([row.image for row in corpus.examples if row.image is not None], cache_dir))
    calibration = min(int(detector.calibration_size), corpus_images)
    counted = (f"{images} distinct benchmark images; calibration: {calibration} corpus images (calibration_size "
               f"{detector.calibration_size}, corpus {detector.corpus.name} has {corpus_images} distinct images; "
               f"a cell also merges images whose embeddings coincide), tau_alpha={detector.tau_alpha:g}")
    return PowerCount(n=images, lines=(counted,),
                      sizes={"images": images, "calibration": calibration, "tau_alpha": float(detector.tau_alpha)})
