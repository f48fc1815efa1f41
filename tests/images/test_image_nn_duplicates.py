"""image_nn on corpora with internal duplicates: distinct images, exact copies, deduplicated calibration.

A VQA split holds each image once per question. These tests build such corpora (on disk with
the real perceptual hash, and synthetically through the pipeline's own matching code) and check
that images are embedded once, exact copies are always flagged and counted per image and per
question, tau is calibrated on distinct images (a clean benchmark is flagged at about
tau_alpha), and a degenerate tau is reported.
"""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf
from PIL import Image

from medexp.benchmarks.base import Benchmark, Example
from medexp.config import compose
from medexp.config.schemas import IndexConfig
from medexp.demo.scans import MODALITIES, ORGANS, ScanSpec, png_bytes, render_scan
from medexp.detectors.image_nn import alpha_sweep, flag_count_p_value, null_threshold
from medexp.images.audit import DeduplicatedCorpus, EmbeddedSide, image_nn_audit, match_images
from medexp.images.embedders import OpenClipEmbedder, PerceptualHash
from medexp.images.search import ExactSearch, nearest
from medexp.images.store import DistinctImages, EmbeddingSet


def scan(k: int) -> Image.Image:
    return render_scan(ScanSpec(MODALITIES[k % 4], ORGANS[(k // 4) % 5], seed=k), size=64)


def questions(name: str, split: str, images: list, uses: list[int]) -> list[Example]:
    """``uses[i]`` questions about ``images[i]``, each row pointing at the image file (as SLAKE does)."""
    rows = [path for path, count in zip(images, uses) for _ in range(count)]
    return [Example(f"{name}::{split}::{i}", i, path, f"question {i}?", "yes") for i, path in enumerate(rows)]


class CountingHash(PerceptualHash):
    """The real perceptual hash, counting the images it embeds."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def embed(self, paths):
        self.calls += len(paths)
        return super().embed(paths)


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    """160 distinct scan files (20 modality x organ kinds, 8 of each)."""
    root = tmp_path_factory.mktemp("scans")
    paths = []
    for k in range(160):
        path = root / f"scan_{k:03d}.png"
        path.write_bytes(png_bytes(scan(k)))
        paths.append(path)
    return paths


@pytest.fixture()
def counting(monkeypatch):
    embedder = CountingHash()
    monkeypatch.setattr("medexp.images.embedders.load_embedder", lambda cfg: embedder)
    return embedder


def detector_cfg(**overrides):
    values = {"tau_alpha": 0.05, "max_panels": 3, **overrides}
    return compose(["detector=image_nn", *(f"detector.{key}={value}" for key, value in values.items())]).detector


def train_split(scans) -> Benchmark:
    """A train split of 120 distinct images used by 1 to 4 questions each (300 rows)."""
    return Benchmark("vqa", questions("vqa", "train", scans[:120], [1 + k % 4 for k in range(120)]))


# --- on disk, with the real perceptual hash ----------------------------------------------------


def test_every_copy_is_an_exact_duplicate_counted_per_image_and_per_question(tmp_path, scans, counting):
    copies = []
    for k in range(30):  # the test split stores its own files: other names, the train images' bytes
        copy = tmp_path / "test_images" / f"t{k}.png"
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(scans[k].read_bytes())
        copies.append(copy)
    uses = [1 + k % 3 for k in range(30)]
    bench = questions("vqa", "test", copies, uses)
    result = image_nn_audit(bench, detector_cfg(), tmp_path / "cache", seed=3, corpus=train_split(scans))
    metrics = result.metrics
    assert counting.calls == 120  # each distinct image once: no question, no copy embedded twice
    assert (metrics["corpus_n_images"], metrics["corpus_n_distinct"]) == (300, 120)
    assert metrics["corpus_duplicate_rate"] == pytest.approx(1 - 120 / 300)
    assert metrics["calibration_size"] == 120  # distinct images only
    assert metrics["tau"] >= 2 / 1024 and metrics["tau_degenerate"] == 0.0 and not result.warnings
    assert (metrics["n_images"], metrics["n_questions"]) == (30, sum(uses))
    assert metrics["n_images_flagged"] == metrics["n_exact_duplicates_images"] == 30
    assert metrics["n_questions_flagged"] == metrics["n_exact_duplicates_questions"] == sum(uses)
    assert metrics["image_flag_rate"] == metrics["question_flag_rate"] == 1.0
    assert metrics["p_value"] == pytest.approx(flag_count_p_value(30, 30, 120, 6)) and metrics["p_value"] < 1e-20
    table = result.table
    assert (table["match"] == "same_bytes").all() and (table["distance"] == 0.0).all()
    # the neighbour is the train image the copy was made from, and its train questions are counted
    assert table["neighbour_image"].tolist() == [str(path) for path in scans[:30]]
    assert table["neighbour_rows"].tolist() == [1 + k % 4 for k in range(30)]
    per_question = result.extra_tables["questions"]
    assert len(per_question) == sum(uses) and per_question["flagged"].all()
    assert per_question["example_id"].tolist() == [example.example_id for example in bench]
    assert [name for name in result.figures if name.startswith("adjudication/")] == [
        "adjudication/000_vqa_test_0", "adjudication/001_vqa_test_1", "adjudication/002_vqa_test_3"]


def test_a_disjoint_benchmark_is_flagged_at_about_tau_alpha(tmp_path, scans, counting):
    fresh = questions("vqa", "test", scans[120:], [2] * 40)
    result = image_nn_audit(fresh, detector_cfg(), tmp_path / "cache", seed=3, corpus=train_split(scans))
    metrics = result.metrics
    assert metrics["n_exact_duplicates_images"] == 0 and (result.table["match"] == "near").all()
    assert (result.table["distance"] > 0).all()
    assert metrics["image_flag_rate"] <= 0.15  # expected 6/121 = 5%; 40 images
    assert metrics["question_flag_rate"] == metrics["image_flag_rate"]  # two questions per image
    assert metrics["p_value"] > 0.05


def test_identical_vectors_from_different_bytes_are_exact_duplicates_at_distance_zero(tmp_path, scans, counting):
    recoded = tmp_path / "recoded.png"
    Image.open(scans[7]).save(recoded, format="PNG", compress_level=9)  # same pixels, other bytes
    assert recoded.read_bytes() != scans[7].read_bytes()
    corpus = Benchmark("c", questions("c", "train", [*scans[:20], recoded], [1] * 21))
    result = image_nn_audit(questions("b", "test", [scans[7], scans[100]], [1, 1]), detector_cfg(), tmp_path / "cache",
                            seed=1, corpus=corpus)
    metrics = result.metrics
    # the corpus's re-encode is the same vector as its original: one image for calibration
    assert (metrics["corpus_n_distinct_files"], metrics["corpus_n_distinct"]) == (21, 20)
    assert result.table["match"].tolist() == ["same_bytes", "near"]
    assert result.table["neighbour_rows"].tolist()[0] == 2  # the original and its re-encode
    other = image_nn_audit(questions("b", "test", [recoded], [1]), detector_cfg(), tmp_path / "cache", seed=1,
                           corpus=Benchmark("c", questions("c", "train", scans[:20], [1] * 20)))
    assert other.table["match"].tolist() == ["same_vector"] and other.table["distance"].tolist() == [0.0]
    assert other.metrics["n_exact_duplicates_images"] == 1 and other.table["flagged"].all()


def test_images_are_embedded_once_per_distinct_content(tmp_path, scans, counting):
    """A corpus of 10 questions per image costs the embedder one call per image."""
    corpus = Benchmark("c", questions("c", "train", scans[:20], [10] * 20))
    bench = questions("b", "test", [*scans[:5], *scans[150:155]], [3] * 10)
    result = image_nn_audit(bench, detector_cfg(), tmp_path / "cache", seed=1, corpus=corpus)
    assert counting.calls == 20 + 5  # the 5 benchmark copies of corpus images share the corpus's vectors
    assert result.metrics["corpus_n_images"] == 200 and result.metrics["n_questions"] == 30
    image_nn_audit(bench, detector_cfg(), tmp_path / "cache", seed=1, corpus=corpus)
    assert counting.calls == 25  # and the second run reads them all from the cache


# --- synthetic, through the pipeline's matching code ---------------------------------------------


def synthetic_side(name: str, vectors: np.ndarray, digests: list[str], uses: np.ndarray) -> EmbeddedSide:
    inverse = np.repeat(np.arange(len(digests)), uses)
    rows = [Example(f"{name}::x::{i}", i, None, "q", "a") for i in range(len(inverse))]
    images = DistinctImages(list(digests), [None] * len(digests), inverse)
    return EmbeddedSide(rows, images, EmbeddingSet.from_array(digests, vectors))


def clustered(rng: np.random.Generator, count: int, dim: int = 8) -> np.ndarray:
    centres = np.random.default_rng(0).normal(size=(20, dim))  # clustered, like images of a few views
    return centres[rng.integers(len(centres), size=count)] + 0.6 * rng.normal(size=(count, dim))


EXACT_INDEX = OmegaConf.structured(IndexConfig(gpu=False))


@pytest.mark.extended
def test_deduplicated_calibration_keeps_the_level_where_the_raw_one_collapses():
    """A corpus whose 1,800 images each appear 1 to 4 times (as in a VQA train split) and a clean
    benchmark from the same distribution: deduplicated calibration flags about tau_alpha and the
    test keeps its level over seeds; calibrating on the raw rows would put tau at 0."""
    tau_alpha, level, runs = 0.05, 0.05, 200
    flag_rates, p_values = [], []
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        uses = rng.integers(1, 5, size=1800)
        corpus = synthetic_side("c", clustered(rng, 1800), [f"c{i}" for i in range(1800)], uses)
        bench = synthetic_side("b", clustered(rng, 150), [f"b{i}" for i in range(150)], np.full(150, 2))
        calibration, table, metrics = match_images(bench, DeduplicatedCorpus.build(corpus), 600, EXACT_INDEX, seed, "c")
        assert metrics["corpus_n_distinct"] == 1800 and len(calibration) == 600 and (calibration > 0).all()
        row = alpha_sweep(table["distance"].to_numpy(), calibration, [tau_alpha]).iloc[0]
        flag_rates.append(row["flag_rate"])
        p_values.append(row["p_value"])
    assert abs(np.mean(flag_rates) - 30 / 601) < 4 * np.std(flag_rates) / np.sqrt(runs)
    false_positive_rate = np.mean(np.array(p_values) < level)
    assert false_positive_rate <= level + 3 * np.sqrt(level * (1 - level) / runs)
    assert false_positive_rate >= 0.01  # valid but not vacuous

    # the same corpus calibrated row by row, as before deduplication: most rows have a copy at 0
    raw = EmbeddingSet.from_array([str(i) for i in range(len(corpus.rows))], corpus.vectors.rows(corpus.images.inverse))
    sample = np.sort(np.random.default_rng(0).choice(len(corpus.rows), size=600, replace=False))
    raw_calibration, _ = nearest(ExactSearch(raw, use_gpu=False), raw.rows(sample), exclude=sample)
    assert null_threshold(raw_calibration, tau_alpha) == 0.0


def test_copies_of_corpus_vectors_are_all_flagged_with_a_tiny_p_value():
    rng = np.random.default_rng(5)
    vectors, uses = clustered(rng, 1800), rng.integers(1, 5, size=1800)
    corpus = synthetic_side("c", vectors, [f"c{i}" for i in range(1800)], uses)
    # 40 benchmark files with other bytes (digests) but the vectors of corpus images
    bench = synthetic_side("b", vectors[:40], [f"b{i}" for i in range(40)], np.arange(40) % 3 + 1)
    calibration, table, _ = match_images(bench, DeduplicatedCorpus.build(corpus), 600, EXACT_INDEX, 5, "c")
    assert (table["match"] == "same_vector").all() and (table["distance"] == 0.0).all()
    assert table["neighbour_id"].tolist() == [f"c::x::{first}" for first in np.cumsum([0, *uses[:39]])]
    assert table["neighbour_rows"].tolist() == uses[:40].tolist()
    row = alpha_sweep(table["distance"].to_numpy(), calibration, [0.01]).iloc[0]
    assert row["n_flagged"] == 40 and row["p_value"] < 1e-40


def test_a_corpus_of_float16_ties_gives_a_degenerate_tau_with_a_warning(tmp_path, scans, monkeypatch):
    """Copies that are not identical but closer than float16 can resolve (a re-encode embedded
    again on another batch) survive deduplication; tau then falls below the embedder's
    resolution, and the run says so."""

    class PixelEmbedder:
        """A float embedder: the 64 x 64 pixels, centred (stands in for SigLIP)."""

        dim = 64 * 64
        resolution = OpenClipEmbedder.resolution

        def cache_key(self):
            return {"kind": "test-pixels"}

        def embed(self, paths):
            vectors = np.stack([np.asarray(Image.open(path), dtype=np.float64).ravel() for path in paths]) - 127.5
            return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)

    monkeypatch.setattr("medexp.images.embedders.load_embedder", lambda cfg: PixelEmbedder())
    ties = []
    for k in range(20):  # each scan again with one pixel one grey level brighter: another file, another vector
        pixels = np.asarray(Image.open(scans[k]), dtype=np.uint8).copy()
        pixels.flat[np.argmin(np.abs(pixels.astype(int) - 100))] += 1
        tie = tmp_path / f"tie_{k}.png"
        tie.write_bytes(png_bytes(Image.fromarray(pixels)))
        ties.append(tie)
    corpus = Benchmark("c", questions("c", "train", [*scans[:20], *ties], [3] * 40))
    result = image_nn_audit(questions("b", "test", scans[100:110], [1] * 10), detector_cfg(), tmp_path / "cache",
                            seed=2, corpus=corpus)
    metrics = result.metrics
    assert metrics["corpus_n_distinct"] == 40  # the ties are different vectors
    assert 0 < metrics["tau"] < OpenClipEmbedder.resolution and metrics["tau_degenerate"] == 1.0
    # one warning, which the runner logs and tags on the run (tests/runner/test_run_cell.py)
    assert len(result.warnings) == 1 and "degenerate" in result.warnings[0]
