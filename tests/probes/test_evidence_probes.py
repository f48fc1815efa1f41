"""The five-option wrapper, risk tiers, laterality and the evidence probe makers."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from PIL import Image
from scipy import stats

from medexp.benchmarks.base import Example
from medexp.probes.evidence import (
    EvidenceSettings,
    LateralityUndetermined,
    evidence_probes,
    example_probes,
    flipped_gold,
    swap_sides,
)
from medexp.config.tiers import risk_tier
from medexp.config.wording import TEXT_KINDS
from medexp.probes.images import GREY
from medexp.probes.options import answer_choices, refusal_text, wrap_options

ANSWERS = ("left", "right", "upper", "lower")


def test_fixed_letters_follow_the_release_convention():
    wrapped = wrap_options(("no", "yes", "maybe"), "Not visible.", "yes")
    assert wrapped.options == ("yes", "no", "maybe", "Not visible.")
    assert (wrapped.gold, wrapped.refusal) == ("A", "D")
    refusal_gold = wrap_options(ANSWERS, "The premise is false.", None)
    assert refusal_gold.options[-1] == "The premise is false." and refusal_gold.gold == refusal_gold.refusal == "E"


def test_rotated_gold_letters_are_uniform_over_a_to_e():
    counts = Counter()
    refusals = Counter()
    for seed in range(2000):
        wrapped = wrap_options(ANSWERS, "Cannot tell.", "right", np.random.default_rng(seed))
        assert wrapped.options[ord(wrapped.gold) - 65] == "right"
        assert wrapped.options[ord(wrapped.refusal) - 65] == "Cannot tell."
        assert sorted(wrapped.options) == sorted((*ANSWERS, "Cannot tell."))
        counts[wrapped.gold] += 1
        refusals[wrapped.refusal] += 1
    assert set(counts) == set("ABCDE") and set(refusals) == set("ABCDE")
    assert stats.chisquare([counts[letter] for letter in "ABCDE"]).pvalue > 0.001
    assert stats.chisquare([refusals[letter] for letter in "ABCDE"]).pvalue > 0.001


def test_duplicate_options_and_foreign_gold_are_refused():
    with pytest.raises(ValueError, match="options must be distinct"):
        wrap_options(("Yes", "yes "), "Cannot tell.", "Yes")
    with pytest.raises(ValueError, match="gold 'maybe' is not among the answers"):
        wrap_options(("yes", "no"), "Cannot tell.", "maybe")


def test_answer_choices_are_seeded_and_put_required_distractors_first():
    pool = ["lower", "upper", "right", "left", "left", "centre"]
    first = answer_choices("left", pool, np.random.default_rng(3), 4, required=("right",))
    assert first[:2] == ("left", "right") and len(first) == 4 and len(set(first)) == 4
    assert first == answer_choices("left", list(reversed(pool)), np.random.default_rng(3), 4, required=("right",))
    assert answer_choices("yes", ["yes", "no"], np.random.default_rng(0)) == ("yes", "no")


def test_refusal_wording_is_probe_specific():
    assert refusal_text("roi_masked") != refusal_text("false_premise") != refusal_text("blur_8")
    assert "premise" in refusal_text("false_premise").lower()


def test_risk_tiers_from_a_mapping():
    mapping = {"content_type": {"Modality": "L1", "Abnormality": "L3"}}
    assert risk_tier({"content_type": "Abnormality"}, mapping) == "L3"
    assert risk_tier({"content_type": "Modality", "organ": "brain"},
                     {**mapping, "organ": {"brain": "L4"}}) == "L4"  # the riskiest facet wins
    with pytest.raises(ValueError, match="ex7: content_type='Quantity' has no risk tier in the mapping"):
        risk_tier({"content_type": "Quantity"}, mapping, "ex7")
    with pytest.raises(ValueError, match="meta has no field 'content_type'"):
        risk_tier({"organ": "lung"}, mapping)
    with pytest.raises(ValueError, match="risk tier 'L9' is not one of"):
        risk_tier({"content_type": "Modality"}, {"content_type": {"Modality": "L9"}})


def test_laterality():
    assert swap_sides("Left apical pneumothorax, right effusion") == "Right apical pneumothorax, left effusion"
    assert swap_sides("LEFT") == "RIGHT" and swap_sides("leftover") == "leftover"
    assert flipped_gold("Which side?", "left") == ("right", True)
    assert flipped_gold("Which organ?", "liver") == ("liver", False)
    assert flipped_gold("Is the lesion on the left?", "yes", "no") == ("no", True)
    with pytest.raises(LateralityUndetermined, match="names a side"):
        flipped_gold("Is the lesion on the left?", "yes")


@pytest.fixture()
def scan(tmp_path):
    pixels = (np.arange(20 * 10).reshape(10, 20) % 251).astype(np.uint8)
    path = tmp_path / "scan.png"
    Image.fromarray(pixels).save(path)
    return path, pixels


def _example(image, answer="left", question="On which side is the lesion?", **meta):
    boxes = [{"label": "lesion", "box_norm": [0.0, 0.0, 0.5, 0.5], "box_px": None}]
    return Example(f"demo::test::{answer}-{len(meta)}", 0, image, question, answer,
                   meta={"roi_boxes": boxes, "content_type": "Position", **meta})


def test_example_probes_make_every_kind(scan, tmp_path):
    path, pixels = scan
    settings = EvidenceSettings(seed=1, store=tmp_path / "store", sigmas=(0, 4),
                                tiers={"content_type": {"Position": "L2"}})
    probe_set = example_probes(_example(path), ANSWERS, settings)
    assert not probe_set.skipped
    by_kind = {probe.kind: probe for probe in probe_set.probes}
    assert list(by_kind) == ["original", "roi_masked", "roi_only", "lr_flip", "blur_0", "blur_4", "no_image"]
    for probe in probe_set.probes:
        assert probe.probe_id == f"{probe.example_id}::{probe.kind}"
        assert len(probe.options) == 5 and probe.refusal == "E" and probe.meta["risk_tier"] == "L2"
        assert set(probe.options[:4]) == set(ANSWERS)  # the same answers for every probe
    assert by_kind["original"].gold_text == "left" and by_kind["original"].image == path
    masked = by_kind["roi_masked"]
    assert masked.gold == masked.refusal and masked.meta["expects_refusal"]
    assert masked.gold_text == refusal_text("roi_masked")
    masked_pixels = np.asarray(Image.open(masked.image).convert("L"))
    assert np.all(masked_pixels[:5, :10] == GREY) and np.array_equal(masked_pixels[5:, :], pixels[5:, :])
    kept = np.asarray(Image.open(by_kind["roi_only"].image).convert("L"))
    assert np.array_equal(kept[:5, :10], pixels[:5, :10]) and np.all(kept[5:, :] == GREY)
    assert by_kind["roi_only"].gold_text == "left"
    flip = by_kind["lr_flip"]
    assert flip.gold_text == "right" and flip.meta["laterality_dependent"] is True
    assert np.array_equal(np.asarray(Image.open(flip.image).convert("L")), pixels[:, ::-1])
    assert by_kind["blur_0"].image == path and by_kind["blur_4"].meta["sigma"] == 4
    assert by_kind["no_image"].image is None and by_kind["no_image"].gold_text == "left"
    assert all(probe.image.parent.parent == tmp_path / "store" for probe in probe_set.probes
               if probe.image not in (None, path))


def test_rotation_moves_letters_but_not_answers(scan, tmp_path):
    path, _ = scan
    fixed = example_probes(_example(path), ANSWERS, EvidenceSettings(seed=1, store=tmp_path))
    rotated = example_probes(_example(path), ANSWERS, EvidenceSettings(seed=1, store=tmp_path, rotate=True))
    again = example_probes(_example(path), ANSWERS, EvidenceSettings(seed=1, store=tmp_path, rotate=True))
    assert [p.options for p in rotated.probes] == [p.options for p in again.probes]
    assert [p.gold_text for p in fixed.probes] == [p.gold_text for p in rotated.probes]
    assert all(p.gold == "A" or p.meta["expects_refusal"] for p in fixed.probes)
    assert {p.gold for p in rotated.probes} != {"A"}


def test_unmakeable_probes_are_skipped_with_reasons(scan, tmp_path):
    path, _ = scan
    settings = EvidenceSettings(seed=1, store=tmp_path, sigmas=(0, 2))
    yes_no = Example("demo::test::q1", 0, path, "Is the lesion on the left side?", "yes", meta={})
    probe_set = example_probes(yes_no, ["yes", "no"], settings)
    assert dict(probe_set.skipped).keys() == {"demo::test::q1::roi_masked", "demo::test::q1::roi_only",
                                             "demo::test::q1::lr_flip"}
    assert probe_set.skip_counts() == {"no region": 2, "undetermined laterality": 1}
    text_only = Example("demo::test::q2", 1, None, "Which organ?", "liver", meta={})
    text_set = example_probes(text_only, ["liver", "kidney"], settings)
    assert [p.kind for p in text_set.probes] == ["original", "no_image"]
    assert text_set.skip_counts() == {"no image": 5}
    resolved = example_probes(Example("demo::test::q3", 2, path, "Is the lesion on the left side?", "yes",
                                      meta={"gold_after_lr_flip": "no"}), ["yes", "no"], settings)
    assert [p.gold_text for p in resolved.probes if p.kind == "lr_flip"] == ["no"]


def test_evidence_probes_over_examples_keep_order(scan, tmp_path):
    path, _ = scan
    examples = [_example(path, "left"), _example(path, "right", extra=1)]
    probe_set = evidence_probes(examples, ANSWERS, EvidenceSettings(seed=0, store=tmp_path, kinds=("original",)))
    assert [p.example_id for p in probe_set.probes] == [ex.example_id for ex in examples]
    with pytest.raises(ValueError, match="unknown evidence probe kind"):
        EvidenceSettings(seed=0, store=tmp_path, kinds=("trap",))


def test_release_cases_get_rotated_evidence_probes(tmp_path):
    """MedVIGIL cases (ROI from grounding.csv, post-flip gold) through our own image probes."""
    from medexp.benchmarks.medvigil import load_medvigil
    from tests.benchmarks.medvigil_upstream import write_medvigil_release

    root = write_medvigil_release(tmp_path / "release")
    bench = load_medvigil("medvigil", root)
    pool = [example.answer for example in bench.examples]
    settings = EvidenceSettings(seed=11, store=tmp_path / "derived", rotate=True, sigmas=(0, 2, 64))
    probe_set = evidence_probes(bench.examples, pool, settings)
    by_id = {probe.probe_id: probe for probe in probe_set.probes}
    flip = by_id["medvigil::test::MVB-0001::lr_flip"]
    assert flip.gold_text == "No, the pneumothorax is left apical" and flip.meta["risk_tier"] == "L5"
    assert by_id["medvigil::test::MVB-0002::lr_flip"].gold_text == "right kidney"
    masked = by_id["medvigil::test::MVB-0002::roi_masked"]
    assert masked.gold == masked.refusal and masked.meta["roi_labels"] == ["left kidney"]
    # MVB-0004 has no box: its region probes are skipped, the others made
    assert probe_set.skip_counts() == {"no region": 2}
    assert "medvigil::test::MVB-0004::blur_64" in by_id
    assert {probe.gold for probe in probe_set.probes} != {"A"}


def test_sweep_probes_keep_a_release_probes_options(tmp_path):
    from medexp.benchmarks.medvigil import load_medvigil
    from medexp.probes.evidence import sweep_probes
    from medexp.probes.medvigil_release import read_release_probes, release_probe_index
    from tests.benchmarks.medvigil_upstream import write_medvigil_release

    root = write_medvigil_release(tmp_path / "release")
    probes = read_release_probes(load_medvigil("medvigil", root), root).probes
    original = release_probe_index(probes)["MVB-0001__orig"]
    sweep = sweep_probes(original, tmp_path / "derived", sigmas=(0, 4))
    assert [p.probe_id for p in sweep] == ["medvigil::test::MVB-0001::blur_0::orig",
                                           "medvigil::test::MVB-0001::blur_4::orig",
                                           "medvigil::test::MVB-0001::no_image::orig"]
    assert all((p.options, p.gold, p.refusal) == (original.options, original.gold, original.refusal) for p in sweep)
    assert sweep[0].image == original.image and sweep[2].image is None
    blurred = np.asarray(Image.open(sweep[1].image).convert("RGB")).astype(float)
    source = np.asarray(Image.open(original.image).convert("RGB")).astype(float)
    assert blurred.shape == source.shape and blurred.std() < source.std()  # blurring smooths the noise
    with pytest.raises(ValueError, match="without image has no blur sweep"):
        sweep_probes(release_probe_index(probes)["MVB-0001__know"], tmp_path)


def test_rotated_release_probes_move_letters_not_answers(tmp_path):
    from medexp.benchmarks.medvigil import load_medvigil
    from medexp.probes.medvigil_release import read_release_probes, rotated_release_probes
    from tests.benchmarks.medvigil_upstream import write_medvigil_release

    root = write_medvigil_release(tmp_path / "release")
    fixed = read_release_probes(load_medvigil("medvigil", root), root).probes
    rotated = rotated_release_probes(fixed, seed=3)
    assert rotated_release_probes(fixed, seed=3) == rotated  # seeded per probe
    for before, after in zip(fixed, rotated):
        assert sorted(after.options) == sorted(before.options) and after.gold_text == before.gold_text
        refusal_text = None if before.refusal is None else before.options["ABCDE".index(before.refusal)]
        assert (None if after.refusal is None else after.options["ABCDE".index(after.refusal)]) == refusal_text
        assert after.meta["rotated"] and not before.meta["rotated"]
    # the release's gold sits at A or E; rotated, it spreads over the letters
    assert {probe.gold for probe in fixed} <= {"A", "B", "E"} and len({probe.gold for probe in rotated}) >= 4


def test_text_families_come_from_the_examples_own_variants(scan, tmp_path):
    path, _ = scan
    variants = {
        "negation": {"question": "Is the lesion away from the left?", "answer": "no", "options": ["yes", "no"]},
        "specificity_drop": {"question": "Where is it?", "answer": "left"},
        "knowledge_only": {"question": "Which organ makes bile?", "answer": "liver", "options": ["liver", "heart"]},
        "false_premise": {"question": "On which side of the spleen is the lesion?", "answer": None},
    }
    example = _example(path, paraphrase="Where does the lesion lie?", variants=variants)
    settings = EvidenceSettings(seed=1, store=tmp_path, kinds=("original", *TEXT_KINDS))
    probe_set = example_probes(example, ANSWERS, settings)
    assert not probe_set.skipped
    by_kind = {probe.kind: probe for probe in probe_set.probes}
    assert list(by_kind) == ["original", *TEXT_KINDS]
    assert all(probe.image == path for probe in probe_set.probes)  # the text families keep the image
    assert (by_kind["paraphrase"].question, by_kind["paraphrase"].gold_text) == ("Where does the lesion lie?", "left")
    assert by_kind["paraphrase"].options == by_kind["original"].options
    assert by_kind["negation"].options == ("no", "yes", refusal_text("negation")) and by_kind["negation"].gold == "A"
    assert by_kind["specificity_drop"].options[:4] == by_kind["original"].options[:4]
    assert by_kind["knowledge_only"].gold_text == "liver" and len(by_kind["knowledge_only"].options) == 3
    trap = by_kind["false_premise"]
    assert trap.gold == trap.refusal == "E" and trap.gold_text == refusal_text("false_premise")
    bare = example_probes(_example(path), ANSWERS, settings)
    assert bare.skip_counts() == {"no paraphrase": 1, "no negation variant": 1, "no specificity_drop variant": 1,
                                  "no knowledge_only variant": 1, "no false_premise variant": 1}
    wrong = _example(path, variants={"negation": {"question": "Not left?", "answer": "maybe", "options": ["yes", "no"]}})
    with pytest.raises(ValueError, match="not among its options"):
        example_probes(wrong, ANSWERS, settings)
