"""The demo generator's other forms of each record (medexp.demo.variants): options, paraphrases,
MedVIGIL text variants, regions of interest, and the perturbed twin of the test split, each checked
against the scan it was drawn from, independently of the generator's own bookkeeping."""

from __future__ import annotations

import re

import numpy as np
import pytest

from medexp.demo.benchmark import generate_records, split_seeds, write_benchmark
from medexp.demo.scans import SIDES, ScanSpec, render_scan
from medexp.demo.variants import FAMILIES, N_OPTIONS, YES_NO
from tests.demo.test_demo_benchmark import SEED, expected_answer, read_rows

N_TEST = 120


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = write_benchmark(tmp_path_factory.mktemp("forms") / "demo", n_test=N_TEST, n_train=20, n_heldout=10, seed=SEED)
    records = {record["id"]: record for record in generate_records(N_TEST, split_seeds(SEED)["test"], "test")}
    return root, read_rows(root / "test.jsonl"), read_rows(root / "test_twin.jsonl"), records


def test_options_hold_the_gold_and_answers_of_its_family(demo):
    _, rows, _, _ = demo
    for row in rows:
        options = row["options"]
        assert row["answer"] in options and len(options) == len(set(options)) <= N_OPTIONS
        assert set(options) <= set(FAMILIES.get(row["rule"], YES_NO))
    # the canonical order is a draw, not "gold first": every position holds the gold somewhere
    positions = {row["options"].index(row["answer"]) for row in rows if len(row["options"]) == N_OPTIONS}
    assert positions == set(range(N_OPTIONS))


def test_a_paraphrase_is_another_wording_of_the_same_question(demo):
    _, rows, _, records = demo
    for row in rows:
        assert row["paraphrase"] != row["question"]
        reworded = {**records[row["id"]], "question": row["paraphrase"]}
        assert expected_answer(reworded) == row["answer"]


def test_negations_flip_the_gold_and_false_premises_have_none(demo):
    _, rows, _, _ = demo
    flipped = {"yes": "no", "no": "yes", "normal": "abnormal", "abnormal": "normal",
               "focal lesion": "no abnormality", "no abnormality": "focal lesion"}
    negated = [row for row in rows if "negation" in row["variants"]]
    assert negated
    for row in rows:
        variants = row["variants"]
        if "negation" in variants:
            assert variants["negation"]["answer"] == flipped[row["answer"]]
        assert variants["specificity_drop"]["answer"] == row["answer"]
        assert variants["false_premise"]["answer"] is None
        assert variants["knowledge_only"]["answer"] in variants["knowledge_only"]["options"]


def test_regions_lie_inside_the_frame_and_mark_lesions_where_asked_about(demo):
    _, rows, _, records = demo
    for row in rows:
        for box in row["roi_boxes"]:
            x0, y0, x1, y1 = box["box_norm"]
            assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
        scan = records[row["id"]]["scan"]
        if row["rule"] in ("side", "count") and scan["lesion"]:
            assert [box["label"] for box in row["roi_boxes"]] == ["lesion"] * scan["lesion_count"]


def _twin_scan(original: dict, perturbation: str) -> list[dict]:
    """The scans a perturbation text allows (a lesion added may lie on any side)."""
    scan = dict(original)
    if match := re.fullmatch(r"(modality|organ) (\S+) -> (\S+)", perturbation):
        return [{**scan, match.group(1): match.group(3)}]
    if match := re.fullmatch(r"lesion (\w+) -> (\w+)", perturbation):
        return [{**scan, "lesion_side": match.group(2)}]
    if match := re.fullmatch(r"lesion count (\d) -> (\d)", perturbation):
        count = int(match.group(2))
        if count == 0:
            return [{**scan, "lesion": False, "lesion_side": None, "lesion_count": 0}]
        sides = [scan["lesion_side"]] if scan["lesion_side"] else list(SIDES)
        return [{**scan, "lesion": True, "lesion_side": side, "lesion_count": count} for side in sides]
    if perturbation == "lesion removed":
        return [{**scan, "lesion": False, "lesion_side": None, "lesion_count": 0}]
    assert perturbation == "lesion added", perturbation
    return [{**scan, "lesion": True, "lesion_side": side, "lesion_count": 1} for side in SIDES]


def test_every_twin_changes_one_attribute_of_the_scan_and_so_the_answer(demo):
    root, rows, twins, records = demo
    originals = {row["id"]: row for row in rows}
    assert len(twins) >= 0.9 * N_TEST  # a few rules have no single change inside the options
    kinds = set()
    for twin in twins:
        original, record = originals[twin["id"]], records[twin["id"]]
        assert (twin["question"], twin["options"]) == (original["question"], original["options"])
        assert twin["original_answer"] == original["answer"] != twin["answer"]
        assert twin["answer"] in twin["options"]
        drawn = np.asarray(render_scan(ScanSpec(**record["scan"])))
        pixels = np.asarray(read_image(root / twin["image"]))
        assert not np.array_equal(pixels, drawn)
        matches = [scan for scan in _twin_scan(record["scan"], twin["perturbation"])
                   if np.array_equal(np.asarray(render_scan(ScanSpec(**scan))), pixels)]
        assert matches, twin  # the twin's image is the scan the perturbation describes ...
        assert expected_answer({**record, "scan": matches[0]}) == twin["answer"]  # ... and its answer follows
        kinds.add(twin["perturbation"].split(" ")[0] if "count" not in twin["perturbation"] else "count")
    assert kinds >= {"lesion", "organ", "modality", "count"}


def read_image(path):
    from PIL import Image

    with Image.open(path) as image:
        return image.convert("L").copy()
