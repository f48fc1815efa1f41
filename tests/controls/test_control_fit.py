"""A control applied to a detector it does not fit fails the cell with a message naming both."""

from __future__ import annotations

import pytest

from medexp.config import compose
from medexp.controls import check_control_fits
from medexp.runner.evaluate import evaluate

MISFITS = [
    ("exch", "negative_demo_ood", "applies to image_nn only"),
    ("exch_rank", "negative_wikiart", "applies to image_nn only"),
    ("mink_tail", "negative_tinyimagenet", "applies to image_nn only"),
    ("image_nn", "blind_image", "without images there is nothing to test"),
    ("exch", "blind_image", "would repeat control=none"),
    ("image_nn", "external_baseline", "nothing to run on a baseline model"),
    ("image_nn", "external_baseline_demo", "nothing to run on a baseline model"),
    ("image_nn", "order_answer_len", "image_nn uses no model"),
    ("image_nn", "order_mink", "image_nn uses no model"),
    ("exch_rank", "synthetic", "applies to the cohort detectors"),
    ("memorization", "synthetic", "applies to the cohort detectors"),
    ("membership", "external_baseline_demo", "no independent counterpart"),
    ("memorization", "negative_demo_ood", "applies to image_nn only"),
    ("dataset_inference", "synthetic", "applies to the cohort detectors"),
]
FITS = [
    ("image_nn", "negative_demo_ood"), ("image_nn", "order_hash"), ("image_nn", "none"),
    ("exch", "order_answer_len"), ("exch", "order_mink"), ("exch", "external_baseline"),
    ("exch_rank", "blind_image"), ("exch_rank", "order_mink"), ("exch_rank", "external_baseline_demo"),
    ("mink_tail", "blind_image"), ("topk_jaccard", "external_baseline"), ("loss", "order_answer_len"),
    ("memorization", "order_hash"), ("membership", "blind_image"),
    ("dataset_inference", "order_hash"), ("codec", "external_baseline_demo"),
    ("dataset_inference", "blind_image"), ("codec", "blind_image"),
]


@pytest.mark.parametrize(("detector", "control", "reason"), MISFITS)
def test_misfit_names_the_control_the_detector_and_why(detector, control, reason):
    cfg = compose([f"detector={detector}", f"control={control}"])
    with pytest.raises(ValueError, match=f"control={control} does not apply to detector={cfg.detector.name}: ") as error:
        check_control_fits(cfg.control, cfg.detector)
    assert reason in str(error.value)


@pytest.mark.parametrize(("detector", "control"), FITS)
def test_fitting_pairs_pass(detector, control):
    cfg = compose([f"detector={detector}", f"control={control}"])
    check_control_fits(cfg.control, cfg.detector)


def test_a_misfit_fails_before_anything_is_loaded_or_built(tmp_path):
    """The cache stays empty: no benchmark generated, no model built, nothing scored."""
    cache = tmp_path / "cache"
    cfg = compose([f"paths.cache_dir={cache}", "detector=exch", "control=negative_demo_ood"])
    with pytest.raises(ValueError, match="control=negative_demo_ood does not apply to detector=exch"):
        evaluate(cfg, seed=0)
    assert not cache.exists() or not any(cache.iterdir())
