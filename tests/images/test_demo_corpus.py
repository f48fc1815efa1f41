"""The demo reference corpus: deterministic, with recorded ground truth that image_nn recovers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medexp.config import compose
from medexp.demo.benchmark import write_benchmark
from medexp.demo.corpus import QUALITY_RANGE, SCALE_RANGE, SHIFT_RANGE, write_corpus
from medexp.images.audit import image_nn_audit

SMALL = {"n_distractors": 30, "n_planted": 8, "n_ood": 5, "seed": 3}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def small_bench(tmp_path_factory) -> Path:
    return write_benchmark(tmp_path_factory.mktemp("bench") / "demo", n_test=20, n_train=5, seed=1)


def test_two_writes_are_identical_and_record_the_truth(tmp_path, small_bench):
    first = write_corpus(tmp_path / "a", small_bench, **SMALL)
    second = write_corpus(tmp_path / "b", small_bench, **SMALL)
    for name in ("corpus.jsonl", "ood.jsonl", "manifest.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    corpus = rows(first / "corpus.jsonl")
    assert len(corpus) == 38 and len(rows(first / "ood.jsonl")) == 5
    planted = [row for row in corpus if row["kind"] == "planted"]
    test_ids = {row["id"] for row in rows(small_bench / "test.jsonl")}
    assert len(planted) == 8 and all(row["duplicate_of"].removeprefix("test::") in test_ids for row in planted)
    assert len({row["duplicate_of"] for row in planted}) == 8
    assert all(row["duplicate_of"] is None for row in corpus if row["kind"] == "distractor")
    for row in corpus:  # every corpus image went through the same perturbation
        assert round(96 * SCALE_RANGE[0]) <= row["size"] <= round(96 * SCALE_RANGE[1])
        assert SHIFT_RANGE[0] <= abs(row["brightness_shift"]) <= SHIFT_RANGE[1]
        assert QUALITY_RANGE[0] <= row["jpeg_quality"] <= QUALITY_RANGE[1]
        with Image.open(first / row["image"]) as image:
            assert image.format == "JPEG" and image.size == (row["size"], row["size"])
    with Image.open(first / "images" / "ood_00000.png") as picture:
        assert picture.mode == "RGB"


def test_a_planted_copy_is_a_perturbed_version_of_its_test_image(tmp_path, small_bench):
    root = write_corpus(tmp_path / "c", small_bench, **SMALL)
    row = next(row for row in rows(root / "corpus.jsonl") if row["kind"] == "planted")
    with Image.open(root / row["image"]) as copy:
        undone = np.asarray(copy.convert("L").resize((96, 96), Image.Resampling.BICUBIC), dtype=np.float64)

    def residual(test_id: str) -> tuple[float, float]:
        """Median and mean absolute size of (copy - test image - shift) where the shift did not clip."""
        with Image.open(small_bench / "images" / f"test_{test_id}.png") as original:
            pixels = np.asarray(original, dtype=np.float64)
        unclipped = (pixels > 40) & (pixels < 215)
        difference = (undone - pixels)[unclipped] - row["brightness_shift"]
        return float(np.median(difference)), float(np.mean(np.abs(difference)))

    source = row["duplicate_of"].removeprefix("test::")
    median, error = residual(source)
    others = [residual(test["id"])[1] for test in rows(small_bench / "test.jsonl") if test["id"] != source]
    assert abs(median) <= 4  # the recorded shift, up to JPEG and resampling noise
    assert error < 0.5 * min(others)  # much closer to its source than to any other test image


def test_wrong_settings_fail_clearly(tmp_path, small_bench):
    with pytest.raises(ValueError, match="n_planted must be between 0 and the 20 test images"):
        write_corpus(tmp_path / "d", small_bench, n_distractors=5, n_planted=21, n_ood=0)
    with pytest.raises(FileNotFoundError, match="not a complete demo benchmark"):
        write_corpus(tmp_path / "e", tmp_path, **SMALL)


@pytest.fixture(scope="module")
def demo_results(tmp_path_factory):
    """image_nn (phash, exact) on the full demo: the test split, the ood split and the train split."""
    from medexp.benchmarks import load_benchmark_from_config

    cache = tmp_path_factory.mktemp("image-nn-cache")
    detector = compose(["detector=image_nn"]).detector
    results = {}
    for bench_option, split in (("demo", "test"), ("demo_ood", "ood"), ("demo", "train")):
        bench_cfg = compose([f"bench={bench_option}", f"bench.split={split}"]).bench
        examples = load_benchmark_from_config(bench_cfg, cache).examples
        results[split] = image_nn_audit(examples, detector, cache, seed=17)
    results["cache"] = cache
    return results


def test_planted_duplicates_are_recovered_on_the_demo(demo_results):
    metrics = demo_results["test"].metrics
    assert metrics["truth_n_planted"] == 100
    assert metrics["truth_recall"] >= 0.95
    assert metrics["truth_neighbour_is_copy"] == 1.0  # the nearest image is the planted copy itself
    assert metrics["truth_flag_rate_unplanted"] < 0.03  # other test images: about alpha
    assert metrics["p_value"] < 1e-10 and metrics["flag"] == 1.0
    flagged = demo_results["test"].extra_tables["flagged_pairs"]
    assert flagged["planted"].astype(bool).mean() > 0.9
    assert len([name for name in demo_results["test"].figures if name.startswith("adjudication/")]) == 20


def test_out_of_domain_and_clean_in_domain_controls(demo_results):
    ood = demo_results["ood"].metrics
    assert ood["n_examples"] == 300 and ood["n_images_flagged"] == 0 and ood["flag"] == 0.0
    assert ood["min_distance"] > 3 * ood["tau"]  # far outside the flag region, as for paintings vs PMC
    train = demo_results["train"].metrics  # same renderer, never copied into the corpus
    assert train["n_examples"] == 1200 and train["image_flag_rate"] < 0.03 and train["p_value"] > 0.01


def test_tau_is_shared_and_the_run_reproducible(demo_results):
    from medexp.benchmarks import load_benchmark_from_config

    taus = {demo_results[split].metrics["tau"] for split in ("test", "ood", "train")}
    assert len(taus) == 1  # one corpus, one backbone, one seed: one threshold
    assert demo_results["test"].metrics["calibration_size"] == 1700  # 5,000 capped at the corpus size
    cache = demo_results["cache"]
    examples = load_benchmark_from_config(compose(["bench=demo"]).bench, cache).examples
    again = image_nn_audit(examples, compose(["detector=image_nn"]).detector, cache, seed=17)
    assert again.metrics == demo_results["test"].metrics
    assert again.table.equals(demo_results["test"].table)
