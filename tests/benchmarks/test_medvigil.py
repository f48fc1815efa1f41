"""The MedVIGIL release: cases through the loader registry, probes from probes_mcq.csv."""

from __future__ import annotations

import csv
import re

import pytest

from medexp.benchmarks import load_benchmark
from medexp.benchmarks.medvigil import load_medvigil
from medexp.probes.medvigil_release import read_release_probes, release_probe_index
from tests.benchmarks.medvigil_upstream import (
    CASES,
    PROBE_COLUMNS,
    release_probe_rows,
    write_medvigil_release,
)


@pytest.fixture()
def release(tmp_path):
    return write_medvigil_release(tmp_path / "medvigil")


def test_cases_load_through_the_registry_and_credentialed_images_are_skipped(release, tmp_path):
    # one credentialed case of four: above the 20% the real release's 60 of 300 need
    bench = load_benchmark("medvigil", cache_dir=tmp_path / "cache", root=str(release), max_skipped_share=0.25)
    assert [ex.example_id for ex in bench.examples] == [
        "medvigil::test::MVB-0001", "medvigil::test::MVB-0002", "medvigil::test::MVB-0004"]
    assert [ex.position for ex in bench.examples] == [0, 1, 2]
    assert len(bench.skipped) == 1
    skip = bench.skipped[0]
    assert skip.example_id == "medvigil::test::MVB-0003" and skip.kind == "credentialed image absent"
    first, second, fourth = bench.examples
    assert first.image == release / "images" / "mvb0001.png" and first.answer == "Yes, right apical pneumothorax"
    assert second.question == 'Which organ, "left" or "right", shows the lesion?'  # quoted CSV cell
    assert second.meta["annotator_notes"] == "two readers agreed,\nafter discussion"
    assert first.meta["risk_tier"] == "L5" and second.meta["risk_tier"] == "L2"
    assert (first.meta["text_only_answerable"], second.meta["text_only_answerable"],
            fourth.meta["text_only_answerable"]) == (False, True, False)
    assert first.meta["roi"] == [0.55, 0.05, 0.95, 0.45]
    assert first.meta["roi_boxes"] == [{"label": "right apex", "box_norm": [0.55, 0.05, 0.95, 0.45], "box_px": None}]
    assert first.meta["laterality_dependent"] is True and second.meta["gold_after_lr_flip"] == "right kidney"
    assert fourth.meta["roi"] is None and fourth.meta["roi_boxes"] == []
    assert (first.meta["source_dataset"], first.meta["modality"]) == ("vqa_rad", "X-Ray")


def test_a_blank_answerability_flag_is_unrecorded(release):
    rows = list(csv.DictReader((release / "manifest.csv").open(encoding="utf-8", newline="")))
    rows[0]["source_dataset"] = "roco"  # keep the case: a present image, blank flag
    rows[0]["text_only_answerable"] = ""
    _rewrite(release / "manifest.csv", rows)
    bench = load_medvigil("medvigil", release)
    assert bench.examples[0].meta["text_only_answerable"] is None


def test_release_probes(release):
    bench = load_medvigil("medvigil", release)
    probe_set = read_release_probes(bench, release)
    rows = release_probe_rows()
    cxr = [row for row in rows if row["case_id"] == "MVB-0003"]
    assert len(probe_set.probes) == len(rows) - len(cxr)
    assert len(probe_set.skipped) == len(cxr)
    assert probe_set.skip_counts() == {"credentialed image absent": len(cxr)}
    by_id = release_probe_index(probe_set.probes)
    trap = by_id["MVB-0001__trap1"]
    assert trap.probe_id == "medvigil::test::MVB-0001::false_premise::trap1"
    assert (trap.kind, trap.gold, trap.refusal) == ("false_premise", "E", "E")
    assert trap.meta["release_kind"] == "halluc_trap" and trap.meta["expects_refusal"] is True
    assert trap.options[-1] == "The premise of this question is incorrect."
    assert trap.meta["risk_tier"] == "L5" and trap.meta["case_id"] == "MVB-0001"
    tcf = by_id["MVB-0001__tcf"]
    assert tcf.kind == "paraphrase" and (tcf.gold, tcf.refusal) == ("A", "E") and not tcf.meta["expects_refusal"]
    masked = by_id["MVB-0001__roi_masked"]
    assert masked.image == release / "images_perturbed" / "mvb0001_roi_masked.png"
    assert (masked.gold, masked.refusal, masked.meta["expects_refusal"]) == ("E", "E", True)
    flip = by_id["MVB-0002__lr_flip"]
    assert flip.gold == "B" and flip.meta["expected_behavior"] == "match_flipped_gold"
    assert by_id["MVB-0001__orig"].image == release / "images" / "mvb0001.png"
    assert by_id["MVB-0001__know"].image is None  # empty image_file: no image
    short = by_id["MVB-0004__orig_short"]
    assert short.options == ("T1", "T2", "FLAIR", "DWI") and short.refusal is None and short.gold == "B"


def test_probe_of_an_unlisted_case_is_an_error(release):
    rows = release_probe_rows()
    rows.append({**rows[0], "probe_id": "MVB-9999__orig", "case_id": "MVB-9999"})
    write_medvigil_release(release, rows)
    with pytest.raises(ValueError, match=r"probes_mcq.csv:\d+: probe 'MVB-9999__orig' names case_id 'MVB-9999'"):
        read_release_probes(load_medvigil("medvigil", release), release)


@pytest.mark.parametrize("change, message", [
    ({"probe_kind": "blur"}, "unknown probe_kind 'blur'"),
    ({"correct_letter": "F"}, "correct_letter 'F' is not a letter"),
    ({"choice_B": ""}, r"empty choice\(s\) \['B'\] before a filled one"),
    ({"probe_id": "MVB-0002__orig"}, "is not '<case_id>__<suffix>'"),
])
def test_bad_probe_rows_name_the_line(release, change, message):
    rows = release_probe_rows()
    rows[0] = {**rows[0], **change}
    write_medvigil_release(release, rows)
    with pytest.raises(ValueError, match=r"probes_mcq.csv:2: .*" + message):
        read_release_probes(load_medvigil("medvigil", release), release)


def test_missing_manifest_column_names_the_file(release):
    rows = list(csv.DictReader((release / "manifest.csv").open(encoding="utf-8", newline="")))
    for row in rows:
        del row["risk_tier"]
    _rewrite(release / "manifest.csv", rows)
    with pytest.raises(ValueError, match=r"manifest.csv: missing column\(s\) \['risk_tier'\]"):
        load_medvigil("medvigil", release)


def test_bad_tier_and_flag_values_skip_the_case_naming_the_line(release):
    rows = list(csv.DictReader((release / "manifest.csv").open(encoding="utf-8", newline="")))
    rows[1]["risk_tier"] = "L7"
    _rewrite(release / "manifest.csv", rows)
    bench = load_medvigil("medvigil", release)
    bad = [skip for skip in bench.skipped if skip.kind == "malformed row"]
    assert [skip.example_id for skip in bad] == ["medvigil::test::MVB-0002"]
    assert re.search(r"manifest.csv:\d+ \(MVB-0002\): risk tier 'L7' is not one of", bad[0].reason)
    rows[1]["risk_tier"] = "L2"
    rows[1]["text_only_answerable"] = "sometimes"
    _rewrite(release / "manifest.csv", rows)
    bad = [skip for skip in load_medvigil("medvigil", release).skipped if skip.kind == "malformed row"]
    assert len(bad) == 1 and "'sometimes' is not a yes/no value" in bad[0].reason


def test_absent_perturbed_image_skips_only_that_probe(release):
    (release / "images_perturbed" / "mvb0001_roi_only.png").unlink()
    probe_set = read_release_probes(load_medvigil("medvigil", release), release)
    assert probe_set.skip_counts() == {"credentialed image absent": 10, "missing image": 1}
    assert ("MVB-0001__roi_only", f"missing image: {release / 'images_perturbed' / 'mvb0001_roi_only.png'}") \
        in probe_set.skipped


def test_max_examples_skips_probes_of_unread_cases(release):
    bench = load_medvigil("medvigil", release, max_examples=1)
    probe_set = read_release_probes(bench, release)
    assert {probe.example_id for probe in probe_set.probes} == {"medvigil::test::MVB-0001"}
    assert probe_set.skip_counts()["case not loaded"] == len(release_probe_rows()) - 10


def test_fixture_columns_are_the_documented_ones(release):
    with (release / "probes_mcq.csv").open(encoding="utf-8", newline="") as handle:
        assert next(csv.reader(handle)) == PROBE_COLUMNS
    with (release / "manifest.csv").open(encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle))
    assert header == ["case_id", "source_dataset", "modality", "image_file", "question", "gold_answer", "risk_tier",
                      "text_only_answerable", "annotator_notes"]
    assert len(CASES) == 4


def _rewrite(path, rows):
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.parametrize("escape", ["../../outside.png", "{outside}", "images_perturbed/../../outside.png"])
def test_release_image_files_stay_inside_the_root(release, escape):
    """A manifest or probe file naming a file outside the release (``../``, an absolute path) is
    refused with its line: such a file would be read and sent to the model."""
    outside = release.parent / "outside.png"
    outside.write_bytes((release / "images" / next(p.name for p in (release / "images").iterdir())).read_bytes())
    value = escape.format(outside=outside)
    probes = release_probe_rows()
    probes[0] = {**probes[0], "image_file": value}
    write_medvigil_release(release, probes)
    with pytest.raises(ValueError, match=r"probes_mcq.csv:2: image path .* outside the benchmark root"):
        read_release_probes(load_medvigil("medvigil", release), release)
    assert read_release_probes(load_medvigil("medvigil", release), release, allow_outside_root=True).probes
    write_medvigil_release(release)
    rows = list(csv.DictReader((release / "manifest.csv").open(encoding="utf-8", newline="")))
    rows[0]["image_file"] = value
    _rewrite(release / "manifest.csv", rows)
    with pytest.raises(ValueError, match=r"manifest.csv:2: image path .* outside the benchmark root"):
        load_medvigil("medvigil", release)
    assert load_medvigil("medvigil", release, allow_outside_root=True).examples
