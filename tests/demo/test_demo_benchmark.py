"""The demo benchmark generator: determinism, contents, answer correctness and atomic writes."""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from pathlib import Path

import numpy as np
import pytest

import medexp.demo.benchmark as benchmark
from medexp.demo.benchmark import (
    CONTENT_TYPES,
    FILE_KEYS,
    GENERATOR_VERSION,
    generate_records,
    split_seeds,
    write_benchmark,
)
from medexp.demo.scans import MODALITIES, NUMBER_WORDS, ORGANS, SIDES, ScanSpec, png_bytes, render_scan

SEED = 20261121
SMALL = {"n_test": 40, "n_train": 60, "n_heldout": 30, "seed": SEED}
# Pinned outputs: a change here means the released benchmark changed, so GENERATOR_VERSION must move.
GOLDEN_SMALL_TEST_SHA256 = "3bceae3ff982b6a06dc34a091723f48bdbb66c6d8bd58c29ffaed09841bd2d9f"
GOLDEN_SMALL_TRAIN_SHA256 = "509d839c60f362dc989bfb72f07453dfcc331bfd8ff6f2a65d457250ab340738"
GOLDEN_SMALL_TWIN_SHA256 = "817f39d176ecb66ebd562c4c1d35601ddc535bf0d91285a5b5908a96feb0d9e0"
# Generator v1's files (pinned before the heldout split existed): v2 added forms to every row and
# must leave v1's fields byte-identical, so the open-form demo models and their figures hold.
V1_KEYS = ("id", "image", "question", "answer", "answer_type", "content_type", "modality", "organ")
GOLDEN_V1_TEST_SHA256 = "c4f39da0be4ed5cbd6b8b3732eda71213b73788a9a3cee6e206f0dc11717b156"
GOLDEN_V1_TRAIN_SHA256 = "b9479d6e8e69cc7f2cc6024d6ea704812c25cdc7dc79d19ffc65651f590aa8c8"
GOLDEN_SCAN_SHA256 = "0af927623df10f8aa61d1540b0a368efb4bec403ee200abaa7b32c563dc0b49c"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def default_root(tmp_path_factory) -> Path:
    return write_benchmark(tmp_path_factory.mktemp("default") / "demo")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    seeds = split_seeds(SEED)
    return (generate_records(400, seeds["test"], "test") + generate_records(1200, seeds["train"], "train")
            + generate_records(400, seeds["heldout"], "heldout"))


# --- determinism ------------------------------------------------------------------------------


def test_two_writes_are_byte_identical(tmp_path):
    first = write_benchmark(tmp_path / "a" / "demo", **SMALL)
    second = write_benchmark(tmp_path / "b" / "demo", **SMALL)
    for name in ("test.jsonl", "train.jsonl", "manifest.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    images = sorted(p.name for p in (first / "images").iterdir())
    assert images == sorted(p.name for p in (second / "images").iterdir())
    for name in images[:: max(1, len(images) // 7)]:
        assert sha256(first / "images" / name) == sha256(second / "images" / name)


def test_output_matches_pinned_hashes(tmp_path):
    root = write_benchmark(tmp_path / "demo", **SMALL)
    assert sha256(root / "test.jsonl") == GOLDEN_SMALL_TEST_SHA256
    assert sha256(root / "train.jsonl") == GOLDEN_SMALL_TRAIN_SHA256
    assert sha256(root / "test_twin.jsonl") == GOLDEN_SMALL_TWIN_SHA256
    for split, golden in (("test", GOLDEN_V1_TEST_SHA256), ("train", GOLDEN_V1_TRAIN_SHA256)):
        v1_lines = "".join(json.dumps({key: row[key] for key in V1_KEYS}, ensure_ascii=False) + "\n"
                           for row in read_rows(root / f"{split}.jsonl"))
        assert hashlib.sha256(v1_lines.encode("utf-8")).hexdigest() == golden
    spec = ScanSpec("Ultrasound", "kidney", True, "lower", 3, seed=7)
    assert hashlib.sha256(png_bytes(render_scan(spec))).hexdigest() == GOLDEN_SCAN_SHA256


def test_png_decodes_to_the_rendered_pixels(tmp_path):
    from PIL import Image

    image = render_scan(ScanSpec("CT", "liver", True, "left", 2, seed=3))
    path = tmp_path / "scan.png"
    path.write_bytes(png_bytes(image))
    with Image.open(path) as decoded:
        assert decoded.mode == "L" and decoded.size == (96, 96)
        assert np.array_equal(np.asarray(decoded), np.asarray(image))


# --- contents of the released files -----------------------------------------------------------


def test_counts_ids_and_released_order(default_root):
    manifest = json.loads((default_root / "manifest.json").read_text())
    assert manifest["generator"] == GENERATOR_VERSION
    assert manifest["seed"] == SEED
    assert manifest["counts"] == {"test": 400, "train": 1200, "heldout": 400}
    seeds = split_seeds(SEED)
    for split, n in (("test", 400), ("train", 1200), ("heldout", 400)):
        rows = read_rows(default_root / f"{split}.jsonl")
        assert len(rows) == n
        assert manifest["sha256"][f"{split}.jsonl"] == sha256(default_root / f"{split}.jsonl")
        assert [row["id"] for row in rows] == [f"{k:05d}" for k in range(n)]
        assert all(list(row) == list(FILE_KEYS) for row in rows)
        drawn = generate_records(n, seeds[split], split)
        assert [{key: row[key] for key in V1_KEYS} for row in rows] == [
            {key: record[key] for key in V1_KEYS} for record in drawn]
        for row in rows[:: n // 10]:
            assert (default_root / row["image"]).is_file()
    twins = read_rows(default_root / "test_twin.jsonl")
    assert len(list((default_root / "images").iterdir())) == 2000 + len(twins) == manifest["images"]


def test_the_heldout_split_left_the_test_and_train_seeds_as_they_were():
    """The held-out split is the third child of the seed sequence: spawn(3) gives the same first
    two children as spawn(2), which seeded the test and train splits before it existed."""
    old_test, old_train = np.random.SeedSequence(SEED).spawn(2)
    seeds = split_seeds(SEED)
    assert seeds["test"] == int(old_test.generate_state(1)[0])
    assert seeds["train"] == int(old_train.generate_state(1)[0])
    assert len(set(seeds.values())) == 3


def test_heldout_shares_no_image_or_question_with_the_splits_models_train_on(default_root):
    heldout = read_rows(default_root / "heldout.jsonl")
    seen = read_rows(default_root / "test.jsonl") + read_rows(default_root / "train.jsonl")
    assert not {row["image"] for row in heldout} & {row["image"] for row in seen}
    seen_pairs = {(row["question"], row["answer"]) for row in seen}
    assert sum((row["question"], row["answer"]) in seen_pairs for row in heldout) < 0.05 * len(heldout)


def test_test_split_mix_and_diversity(default_root):
    rows = read_rows(default_root / "test.jsonl")
    open_share = sum(row["answer_type"] == "OPEN" for row in rows) / len(rows)
    assert 0.55 <= open_share <= 0.65
    assert {row["content_type"] for row in rows} == set(CONTENT_TYPES)
    assert len({row["modality"] for row in rows}) >= 3
    assert len({row["organ"] for row in rows}) >= 4
    assert len({(row["question"], row["answer"]) for row in rows}) >= 0.9 * len(rows)
    for row in rows:
        assert 8 <= len(row["question"].split()) <= 25, row["question"]
        assert 1 <= len(row["answer"].split()) <= 3, row["answer"]
        if row["answer_type"] == "CLOSED":
            assert row["answer"] in ("yes", "no")
        else:
            assert row["answer"] not in ("yes", "no")


def test_content_types_are_not_grouped_in_release_order(default_root):
    """Neighbours in the file share a content type about as often as random draws would."""
    kinds = [row["content_type"] for row in read_rows(default_root / "test.jsonl")]
    same_neighbour = np.mean([a == b for a, b in zip(kinds, kinds[1:])])
    shares = np.array([kinds.count(kind) for kind in set(kinds)]) / len(kinds)
    assert same_neighbour < float(np.sum(shares**2)) + 0.1


def test_train_and_test_do_not_share_records(default_root):
    test = read_rows(default_root / "test.jsonl")
    train = read_rows(default_root / "train.jsonl")
    assert not {row["image"] for row in test} & {row["image"] for row in train}
    train_questions = {row["question"] for row in train}
    assert sum(row["question"] in train_questions for row in test) < 0.05 * len(test)


# --- answers agree with the scans -------------------------------------------------------------


def _mentioned(question: str, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if re.search(rf"\b{re.escape(name.lower())}\b", question)]


def expected_answer(record: dict) -> str:
    """The answer derived independently from the question wording and the scan spec."""
    q = record["question"].lower()
    scan = record["scan"]
    yes_no = {True: "yes", False: "no"}
    content = record["content_type"]
    if record["answer_type"] == "OPEN":
        if content == "Modality":
            return scan["modality"]
        if content == "Organ":
            return scan["organ"]
        if content == "Abnormality":
            if "normal or abnormal" in q:
                return "abnormal" if scan["lesion"] else "normal"
            if "which organ" in q:
                assert scan["lesion"]
                return scan["organ"]
            return "focal lesion" if scan["lesion"] else "no abnormality"
        if content == "Position":
            assert scan["lesion"]
            return scan["lesion_side"]
        return NUMBER_WORDS[scan["lesion_count"]]
    if content == "Modality":
        (named,) = _mentioned(q, MODALITIES)
        return yes_no[named == scan["modality"]]
    if content == "Organ":
        (named,) = _mentioned(q, ORGANS)
        return yes_no[named == scan["organ"]]
    if content == "Abnormality":
        if re.search(r"\b(healthy|normal)\b", q):
            return yes_no[not scan["lesion"]]
        return yes_no[scan["lesion"]]
    if content == "Position":
        (named,) = _mentioned(q, SIDES)
        return yes_no[named == scan["lesion_side"]]
    if "more than one" in q or "multiple" in q:
        return yes_no[scan["lesion_count"] > 1]
    number = re.search(r"exactly (one|two|three)\b", q).group(1)
    return yes_no[NUMBER_WORDS.index(number) == scan["lesion_count"]]


def test_every_answer_follows_from_the_scan(records):
    for record in records:
        assert record["answer"] == expected_answer(record), record
        spec = ScanSpec(**record["scan"])
        assert (record["modality"], record["organ"]) == (spec.modality, spec.organ)


def test_closed_questions_are_balanced(records):
    closed = [record["answer"] for record in records if record["answer_type"] == "CLOSED"]
    assert 0.35 <= closed.count("yes") / len(closed) <= 0.65


def _components(mask: np.ndarray) -> list[list[tuple[int, int]]]:
    """4-connected components of a boolean image."""
    seen = np.zeros_like(mask)
    found = []
    for start in zip(*np.nonzero(mask)):
        if seen[start]:
            continue
        seen[start] = True
        queue, pixels = deque([start]), []
        while queue:
            r, c = queue.popleft()
            pixels.append((r, c))
            for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                if 0 <= nr < mask.shape[0] and 0 <= nc < mask.shape[1] and mask[nr, nc] and not seen[nr, nc]:
                    seen[nr, nc] = True
                    queue.append((nr, nc))
        found.append(pixels)
    return found


@pytest.mark.parametrize("modality", MODALITIES)
def test_lesions_are_visible_countable_and_on_their_side(modality):
    rng = np.random.default_rng(5)
    for organ in ORGANS:
        for side in SIDES:
            count = int(rng.integers(1, 4))
            seed = int(rng.integers(1_000_000))
            sick = np.asarray(render_scan(ScanSpec(modality, organ, True, side, count, seed)), dtype=float)
            healthy = np.asarray(render_scan(ScanSpec(modality, organ, seed=seed)), dtype=float)
            changed = sick != healthy
            blobs = _components(changed)
            assert len(blobs) == count, (modality, organ, side, count, seed)
            # lesions stand out clearly against what they cover
            assert np.mean(np.abs(sick - healthy)[changed]) > 60
            centre = (sick.shape[0] - 1) / 2.0
            for pixels in blobs:
                row, col = np.mean(pixels, axis=0) - centre
                offset = {"left": -col, "right": col, "upper": -row, "lower": row}[side]
                across = abs(row) if side in ("left", "right") else abs(col)
                assert offset > across, (modality, organ, side, seed)


def test_scan_spec_rejects_inconsistent_lesions():
    with pytest.raises(ValueError):
        ScanSpec("CT", "liver", lesion=True, lesion_side=None, lesion_count=1)
    with pytest.raises(ValueError):
        ScanSpec("CT", "liver", lesion=False, lesion_side="left", lesion_count=0)
    with pytest.raises(ValueError):
        ScanSpec("PET", "liver")


# --- atomic, idempotent writes ----------------------------------------------------------------


def test_existing_complete_benchmark_is_not_rewritten(tmp_path):
    root = write_benchmark(tmp_path / "demo", **SMALL)
    watched = [root / "manifest.json", root / "test.jsonl", root / "images" / "test_00000.png"]
    before = [path.stat().st_mtime_ns for path in watched]
    assert write_benchmark(root, **SMALL) == root
    assert [path.stat().st_mtime_ns for path in watched] == before


def test_leftover_temp_dir_is_not_taken_for_a_benchmark(tmp_path):
    finished = write_benchmark(tmp_path / "other", **SMALL)
    root = tmp_path / "demo"
    leftover = tmp_path / "demo.tmp-999999"
    leftover.mkdir()
    (leftover / "manifest.json").write_bytes((finished / "manifest.json").read_bytes())
    assert write_benchmark(root, **SMALL) == root
    assert (root / "test.jsonl").read_bytes() == (finished / "test.jsonl").read_bytes()


def test_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    calls = {"n": 0}
    real_render = benchmark.render_scan

    def flaky_render(spec, size=96):
        calls["n"] += 1
        if calls["n"] > 10:
            raise RuntimeError("disk full")
        return real_render(spec, size)

    monkeypatch.setattr(benchmark, "render_scan", flaky_render)
    with pytest.raises(RuntimeError, match="disk full"):
        write_benchmark(tmp_path / "demo", **SMALL)
    assert [path.name for path in tmp_path.iterdir()] == ["demo.lock"]  # the lock file only: no data, no staging


def test_damaged_or_different_benchmark_is_regenerated(tmp_path):
    root = write_benchmark(tmp_path / "demo", **SMALL)
    good = (root / "test.jsonl").read_bytes()
    (root / "test.jsonl").write_bytes(good[: len(good) // 2])
    write_benchmark(root, **SMALL)
    assert (root / "test.jsonl").read_bytes() == good
    write_benchmark(root, n_test=10, n_train=5, n_heldout=3, seed=SEED)
    assert json.loads((root / "manifest.json").read_text())["counts"] == {"test": 10, "train": 5, "heldout": 3}
    twins = len(read_rows(root / "test_twin.jsonl"))
    assert len(list((root / "images").iterdir())) == 18 + twins


def test_foreign_directory_is_never_overwritten(tmp_path):
    root = tmp_path / "demo"
    root.mkdir()
    (root / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        write_benchmark(root, **SMALL)
    assert (root / "notes.txt").read_text() == "keep me"
