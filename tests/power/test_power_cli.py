"""``python -m medexp.power`` on the offline demo benchmark: no model is built or loaded."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from medexp.config import compose
from medexp.detectors.power_simulation import SIMULATED_TESTS
from medexp.power import answer, split_arguments
from medexp.stats import sample_size as pw
from tests.conftest import REPO
from tests.readme_figures import power_figures


def run_power(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "medexp.power", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_cli_prints_the_mde_and_the_items_an_effect_needs():
    result = run_power("bench=demo", "detector=option_order", "effect=0.05")
    assert result.returncode == 0, result.stderr
    # 400 demo items with options, one-sided alpha 0.01, var(D) 0.25: (2.326348 + 0.841621) * sqrt(0.25 / 400) = 0.07920
    assert "n: 400 items with options" in result.stdout
    assert "MDE: 0.0792 accuracy difference" in result.stdout
    # 0.25 * (3.167969 / 0.05)^2 = 1003.6 -> 1004 items
    assert "effect 0.05 needs n = 1004 items with options; this benchmark has 400: not enough (short by 604)" in result.stdout
    # what the README shows of this command (its "How strong, how sure")
    shown = power_figures()
    mde = float(re.search(r"MDE: ([\d.]+) accuracy difference", result.stdout).group(1))
    assert shown["mde_points"] == f"{100 * mde:.1f}"
    assert shown["items"] == re.search(r"n: (\d+) items with options", result.stdout).group(1)
    needed = int(re.search(r"needs n = (\d+) items", result.stdout).group(1))
    assert shown["items_for_5_points"] == f"{needed:,}"


def test_the_cli_counts_the_shards_of_exch():
    result = run_power("bench=demo", "detector=exch", "detector.shards=20", "power=0.9")
    assert result.returncode == 0, result.stderr
    assert "n: 20 shards" in result.stdout and "power=0.9" in result.stdout
    mde = float(re.search(r"MDE: (\S+) Cohen's d", result.stdout).group(1))
    assert abs(mde - pw.one_sample_t_mde(20, 0.01, 0.9)) < 1e-3


def test_a_detector_without_a_test_is_a_clear_error():
    result = run_power("bench=demo", "detector=composition_sweep")
    assert result.returncode == 1 and not result.stdout
    assert "detector kind 'composition_sweep'" in result.stderr and "no minimum detectable effect" in result.stderr
    unknown = run_power("bench=demo", "detector=no_such_detector")
    assert unknown.returncode == 1 and "no_such_detector" in unknown.stderr
    missing = run_power("bench=demo")
    assert missing.returncode == 2 and "detector=<name>" in missing.stderr
    bad = run_power("bench=demo", "detector=exch", "effect=big")
    assert bad.returncode == 2 and "effect needs a number" in bad.stderr


def test_membership_counts_members_and_non_members():
    overrides, options = split_arguments(["bench=demo", "detector=membership", "effect=0.1"])
    lines = answer(compose(overrides), options)
    assert "n: 800 members and non-members" in lines  # demo: 400 test members, 400 heldout non-members
    assert f"MDE: {pw.auc_mde(400, 400, 0.01):.4g} AUC above 0.5" in lines


def test_dataset_inference_counts_the_tested_half_and_codec_both_splits():
    overrides, options = split_arguments(["bench=demo", "detector=dataset_inference"])
    lines = answer(compose(overrides), options)
    # the Welch test reads half B: 200 of the 400 test members and 200 of the 400 heldout non-members
    assert "n: 400 members and non-members of half B (the tested half; half A fits the model)" in lines
    assert f"MDE: {pw.two_sample_t_mde(200, 200, 0.01):.4g} Cohen's d of the aggregated membership score" in lines
    overrides, options = split_arguments(["bench=demo", "detector=codec"])
    lines = answer(compose(overrides), options)
    assert "n: 800 members and non-members" in lines and any(line.startswith(f"MDE: {pw.auc_mde(400, 400, 0.01):.4g} AUC")
                                                              for line in lines)


def test_overlap_gap_counts_flagged_and_unflagged_images_of_a_record():
    """SLAKE's test.json alone (no pixels for a record) and the audit's flags: 247 flagged questions
    fall on 19 of the 96 English-test images (counted by hand from the copied files)."""
    import json

    from tests.conftest import REPO as root

    audit = json.loads((root / "medexp/data/realdata/medvlm-contamination-audit/slake_en_overlap_inflation.json").read_text())
    slake = json.loads((root / "medexp/data/realdata/slake/test.json").read_text())
    image_of = {f"slake_en::test::{row['qid']}": row["img_id"] for row in slake}
    flagged_images = {image_of[record["example_id"]] for record in audit["records"] if record["flagged"]}
    all_images = {image_of[record["example_id"]] for record in audit["records"]}
    assert (len(flagged_images), len(all_images)) == (19, 96)
    overrides, options = split_arguments(["bench=slake", f"bench.root={root}/medexp/data/realdata/slake",
                                          "detector=overlap_gap", "model=qwen2_5_vl_record", "effect=1.0"])
    lines = answer(compose(overrides), options)
    assert "n: 96 images (flagged and unflagged)" in lines
    assert (f"MDE: {pw.two_sample_t_mde(19, 77, 0.01):.4g} Cohen's d of the images' mean scores (accuracies, on "
            "answers), flagged against unflagged") in lines
    needed = pw.two_sample_t_n(1.0, 0.01, 0.8, "one", first_share=19 / 96)
    assert any(line.startswith(f"effect 1 needs n = {needed} images") for line in lines)


def test_overlap_gap_counts_the_images_slakes_own_split_overlap_flags():
    """SLAKE's test images whose img_name is also a train image (the copied annotations, counted by hand)."""
    import json

    from tests.conftest import REPO as root

    slake = root / "medexp/data/realdata/slake"
    train = {row["img_name"] for row in json.loads((slake / "train.json").read_text())}
    test = {row["img_name"] for row in json.loads((slake / "test.json").read_text()) if row["q_lang"] == "en"}
    flagged = len(test & train)
    overrides, options = split_arguments(["bench=slake", f"bench.root={slake}", "detector=overlap_gap",
                                          "flags@detector.flags=split_overlap", "model=qwen2_5_vl_record"])
    lines = answer(compose(overrides), options)
    assert (flagged, len(test)) == (72, 96)
    assert f"images: {flagged} flagged, {len(test) - flagged} unflagged (flag source split_train, kind split_overlap; " \
           "an image's questions carry its flag)" in lines
    assert any(line.startswith(f"MDE: {pw.two_sample_t_mde(flagged, len(test) - flagged, 0.01):.4g} ") for line in lines)


def test_text_only_tests_against_the_options_chance_rate():
    overrides, options = split_arguments(["bench=demo", "detector=text_only", "chance=0.25"])
    lines = answer(compose(overrides), options)
    assert "assumed: chance rate 0.25" in lines
    assert f"MDE: {pw.above_chance_mde(400, 0.25, 0.01):.4g} accuracy above chance (fraction; 0.05 = 5 accuracy points)" in lines


@pytest.mark.extended
def test_a_cohort_detector_answers_by_simulation(tmp_path, monkeypatch):
    from medexp.detectors.power_simulation import simulated_mde

    monkeypatch.setenv("MEDEXP_POWER_SIMULATIONS", "40")
    overrides, options = split_arguments(["bench=demo", "detector=loss", "effect=0.5", f"paths.cache_dir={tmp_path}"])
    lines = answer(compose(overrides), options)
    # the demo cohort: demo_leaky (the default model) and the four other models of detector.cohort
    assert any(line.startswith("n: 400 examples; cohort: the target demo_leaky and 4 references") for line in lines)
    expected = simulated_mde("loss", {"examples": 400, "models": 5}, 0.01, 0.8, n_sim=40)
    mde_line = next(line for line in lines if line.startswith("MDE: "))
    assert mde_line.startswith(f"MDE: {expected.mde:.4g} NLL the target saves")
    assert "by simulation (40 draws, 499 permutations per test" in mde_line
    assert any(line.startswith("effect 0.5 needs n = ") and line.endswith(": enough") for line in lines)
    assert list((tmp_path / "power").glob("*.json"))  # cached for the next answer


@pytest.mark.extended
def test_topk_says_why_n_is_not_its_lever(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDEXP_POWER_SIMULATIONS", "20")
    overrides, options = split_arguments(["bench=demo", "detector=topk_jaccard", "effect=3", "tail_rate=0.02",
                                          f"paths.cache_dir={tmp_path}"])
    with pytest.raises(ValueError, match="no simulation assumption"):
        answer(compose(overrides), options)  # tail_rate is mink_tail's
    overrides, options = split_arguments(["bench=demo", "detector=topk_jaccard", "effect=3", f"paths.cache_dir={tmp_path}"])
    lines = answer(compose(overrides), options)
    assert any("examples in both the target's and the leaky reference's top-K" in line for line in lines)
    assert lines[-1] == f"effect 3: {SIMULATED_TESTS['topk_jaccard'].not_the_lever}"


@pytest.mark.parametrize(("null", "kind", "test"), [
    ("relabel", "topk_jaccard", "cohort-relabel permutation test"),
    ("hypergeometric", "topk_jaccard_hypergeometric", "hypergeometric tests"),
])
@pytest.mark.extended
def test_topk_simulates_the_null_its_detector_runs(tmp_path, monkeypatch, null, kind, test):
    monkeypatch.setenv("MEDEXP_POWER_SIMULATIONS", "20")
    overrides, options = split_arguments(["bench=demo", "detector=topk_jaccard", f"detector.null={null}",
                                          f"paths.cache_dir={tmp_path}"])
    lines = answer(compose(overrides), options)
    assert lines[0].endswith(f"(kind {kind})")
    assert lines[1].startswith(f"test: one-sided {test}" if null == "relabel" else f"test: {test}")

