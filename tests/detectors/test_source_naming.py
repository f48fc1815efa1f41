"""Detector ``source_naming``: hand-computed rates, Mantel-Haenszel difference and exact p on a small
table; error rows out of every denominator and a no-answer as not naming; strata of one arm dropped
and counted; the exact false-positive rate under a null confounded by modality; power; the power
command."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from scipy import stats as sps

from medexp.answers.table import Status, response_row
from medexp.benchmarks.base import Example
from medexp.config import compose
from medexp.config.schemas import SourceNamingConfig
from medexp.config.wording import DEFAULT_SOURCE_QUESTION, DEMO_SOURCES
from medexp.detectors.answer_arms import probe_facts
from medexp.detectors.source_naming import source_naming_detector
from medexp.power import answer, split_arguments
from medexp.probes.source import source_probes
from medexp.stats import sample_size as pw
from medexp.stats.stratified import exact_stratified_greater
from tests.answers.judging import NO_ANSWER_REPLY, judged_table

NAMED, ATLAS, NONE = "A", "B", "C"  # the letters of DEMO_SOURCES: the audited benchmark, the corpus, neither
ERROR, NO_ANSWER = "error", "no answer"


def config(**changes):
    return OmegaConf.structured(SourceNamingConfig(
        name="source_naming", family="source_naming", collections=list(DEMO_SOURCES), audited=DEMO_SOURCES[0],
        **changes))


def images(split: str, modalities: list[str]) -> list[Example]:
    return [Example(f"demo::{split}::{index}", index, Path(f"{split}/{index}.png"), "q", "a", None,
                    {"modality": modality}) for index, modality in enumerate(modalities)]


def probe_set(audited_modalities: list[str], control_modalities: list[str]):
    return source_probes(images("test", audited_modalities), images("heldout", control_modalities),
                         DEFAULT_SOURCE_QUESTION, DEMO_SOURCES, DEMO_SOURCES[0], DEMO_SOURCES[2])


def judged(probes, replies: list[str]):
    """The judged table of one reply per probe: a letter, ERROR (no reply) or NO_ANSWER."""
    rows = []
    for probe, reply in zip(probes, replies):
        if reply == ERROR:
            rows.append(response_row(probe, "", None, Status.error, error="HTTP 503 after 5 retries", cause="http_5xx"))
        else:
            rows.append(response_row(probe, NO_ANSWER_REPLY if reply == NO_ANSWER else reply))
    return judged_table(rows, probes)


def run(audited: dict[str, list[str]], control: dict[str, list[str]], cfg=None, seed: int = 7):
    """The detector on replies given per modality and arm."""
    made = probe_set([m for m, replies in audited.items() for _ in replies],
                     [m for m, replies in control.items() for _ in replies])
    replies = [reply for side in (audited, control) for values in side.values() for reply in values]
    cfg = cfg if cfg is not None else config()
    return source_naming_detector(judged(made.probes, replies), probe_facts(made.probes, ["modality"]), cfg, seed,
                                  made.skipped)


# CT: audited 3 of 4 answered name the benchmark (one error row more), control 1 of 4;
# MRI: audited 2 of 2, control 1 of 3 (one of them a no-answer).
AUDITED = {"CT": [NAMED, NAMED, NAMED, ATLAS, ERROR], "MRI": [NAMED, NAMED]}
CONTROL = {"CT": [NAMED, NONE, NONE, ATLAS], "MRI": [NAMED, NONE, NO_ANSWER]}


def test_rates_mh_difference_and_exact_p_by_hand():
    result = run(AUDITED, CONTROL)
    m = result.metrics
    # the error row leaves the audited denominator; the no-answer stays in the control's as not naming
    assert (m["n_audited"], m["hits_audited"], m["n_control"], m["hits_control"]) == (6, 5, 7, 2)
    assert m["rate_audited"] == pytest.approx(5 / 6) and m["rate_control"] == pytest.approx(2 / 7)
    assert m["difference"] == pytest.approx(5 / 6 - 2 / 7)
    assert m["rate_audited_ci_low"] < 5 / 6 < m["rate_audited_ci_high"]
    # CT: w = 4 * 4 / 8 = 2, difference 3/4 - 1/4; MRI: w = 2 * 3 / 5 = 1.2, difference 1 - 1/3:
    # (2 * 0.5 + 1.2 * 2/3) / 3.2 = 0.5625
    assert m["mh_difference"] == pytest.approx(0.5625) and m["statistic"] == m["mh_difference"]
    assert m["mh_difference_ci_low"] < 0.5625 < m["mh_difference_ci_high"]
    # exact p: audited namers 3 + 2 = 5; CT's A ~ Hypergeom(8 images, 4 namers, 4 audited): P(4) = 1/70,
    # P(3) = 16/70; MRI's ~ Hypergeom(5, 3, 2): P(2) = 3/10, P(>=1) = 9/10;
    # P(sum >= 5) = 1/70 * 9/10 + 16/70 * 3/10 = 57/700
    assert m["p_value"] == pytest.approx(57 / 700) and m["flag"] == 0.0
    assert run(AUDITED, CONTROL, config(alpha=0.1)).metrics["flag"] == 1.0
    # the true collection: the benchmark on audited images, "None of these" on control images (3 of 7)
    assert m["accuracy_audited"] == pytest.approx(5 / 6) and m["accuracy_control"] == pytest.approx(3 / 7)
    assert (m["n_error_audited"], m["n_ok_audited"], m["n_no_answer_control"], m["n_ok_control"]) == (1, 6, 1, 6)
    assert (m["n_strata"], m["n_strata_dropped"], m["n_examples"]) == (2, 0, 13)
    # the MDE of two proportions at 6 and 7 images from a control rate of 1/3 (k = 3 collections)
    assert m["mde_control_rate"] == pytest.approx(1 / 3)
    assert m["mde"] == pytest.approx(pw.two_proportions_mde(6, 7, 1 / 3, 0.01))
    assert result.warnings == []


def test_the_tables_and_the_figure():
    result = run(AUDITED, CONTROL)
    per_probe = result.table
    assert result.table_name == "per_probe" and len(per_probe) == 14  # one row per image, the error row too
    error_row = per_probe[per_probe["status"] == Status.error.value]
    assert len(error_row) == 1 and not error_row["in_test"].iloc[0] and not error_row["named_audited"].iloc[0]
    assert set(per_probe["matched_on"]) == {"modality=CT", "modality=MRI"}
    strata = result.extra_tables["strata"].set_index("value")
    # strata == match_by: the breakdown is the test's own strata, shown once
    assert list(strata["field"]) == ["matched_on", "matched_on"]
    assert strata.loc["modality=CT", ["n_audited", "hits_audited", "n_control", "hits_control"]].tolist() == [4, 3, 4, 1]
    assert strata.loc["modality=MRI", "p_value"] == pytest.approx(sps.fisher_exact([[2, 0], [1, 2]], "greater").pvalue)
    assert result.extra_tables["skipped"].empty
    assert set(result.figures) == {"source_naming"}


def test_a_stratum_of_one_arm_leaves_the_test_and_is_counted():
    with_ultrasound = {**AUDITED, "Ultrasound": [NAMED, NAMED]}
    with_pet = {**CONTROL, "PET": [NONE]}
    result = run(with_ultrasound, with_pet)
    m = result.metrics
    assert (m["n_strata"], m["n_strata_dropped"], m["n_audited_dropped"], m["n_control_dropped"]) == (2, 2, 2, 1)
    # the test and the MH difference are those of CT and MRI alone; the raw rates count every answered image
    assert m["p_value"] == pytest.approx(57 / 700) and m["mh_difference"] == pytest.approx(0.5625)
    assert (m["n_audited"], m["n_audited_tested"], m["n_control"], m["n_control_tested"]) == (8, 6, 8, 7)
    assert m["rate_audited"] == pytest.approx(7 / 8)
    assert len(result.warnings) == 1 and "2 stratum(s)" in result.warnings[0]
    strata = result.extra_tables["strata"].set_index("value")
    assert not strata.loc["modality=Ultrasound", "in_test"] and math.isnan(strata.loc["modality=PET", "p_value"])


def test_a_stratum_whose_images_all_failed_leaves_the_test_too():
    result = run({**AUDITED, "PET": [ERROR]}, {**CONTROL, "PET": [NONE]})
    assert result.metrics["n_strata_dropped"] == 1 and result.metrics["n_control_dropped"] == 1
    assert result.metrics["n_error_audited"] == 2 and result.metrics["p_value"] == pytest.approx(57 / 700)


def test_no_stratum_with_both_arms_is_refused():
    with pytest.raises(ValueError, match=r"no stratum of \['modality'\] holds answered images of both arms"):
        run({"CT": [NAMED, NAMED]}, {"MRI": [NONE]})


def test_without_match_by_every_image_is_one_stratum_and_the_test_is_fishers():
    result = run(AUDITED, CONTROL, config(match_by=[]))
    m = result.metrics
    assert m["n_strata"] == 1 and set(result.table["matched_on"]) == {"all"}
    assert m["mh_difference"] == pytest.approx(m["difference"])
    assert m["p_value"] == pytest.approx(sps.fisher_exact([[5, 1], [2, 5]], "greater").pvalue)
    # modality is then a breakdown of its own
    assert set(result.extra_tables["strata"]["field"]) == {"matched_on", "modality"}


def test_missing_fact_fields_are_named():
    made = probe_set(["CT"], ["CT"])
    with pytest.raises(ValueError, match=r"lack the fields \['modality'\]"):
        source_naming_detector(judged(made.probes, [NAMED, NONE]), probe_facts(made.probes, []), config(), 0)


def test_the_p_value_draws_nothing():
    assert run(AUDITED, CONTROL, seed=1).metrics == run(AUDITED, CONTROL, seed=2).metrics


def simulated(rates: dict[str, tuple[float, float]], counts: dict[str, tuple[int, int]], seed: int,
              error: float = 0.0):
    """Replies naming the benchmark with probability ``rates[modality]`` (audited, control), for
    ``counts[modality]`` (audited, control) images; the others "None of these"; ``error`` rows."""
    rng = np.random.default_rng(seed)
    sides = ({}, {})
    for modality, sizes in counts.items():
        for side, rate, size in zip(sides, rates[modality], sizes):
            draws = rng.random(size)
            side[modality] = [ERROR if draw < error else NAMED if draw < error + (1 - error) * rate else NONE
                              for draw in draws]
    return sides


def test_a_naming_habit_by_modality_is_no_evidence():
    # A clean model names a CT the benchmark with probability 0.6 and an MRI with 0.1, whichever set the
    # image comes from; the audited set is mostly CT (8 CT, 3 MRI), the control mostly MRI (3 CT, 8 MRI).
    # Exact size over every outcome (each arm's namers binomial per modality): the stratified test (the
    # detector's p, as the hand-computed case shows) rejects at most alpha; the same exact test on the
    # pooled images, blind to modality, rejects three times as often.
    alpha = 0.05
    (ct_audited, ct_control), (mri_audited, mri_control) = (8, 3), (3, 8)
    stratified = pooled = 0.0
    for a_ct, c_ct, a_mri, c_mri in itertools.product(range(ct_audited + 1), range(ct_control + 1),
                                                      range(mri_audited + 1), range(mri_control + 1)):
        chance = (sps.binom.pmf(a_ct, ct_audited, 0.6) * sps.binom.pmf(c_ct, ct_control, 0.6)
                  * sps.binom.pmf(a_mri, mri_audited, 0.1) * sps.binom.pmf(c_mri, mri_control, 0.1))
        stratified += chance * (exact_stratified_greater([a_ct, a_mri], [ct_audited, mri_audited], [c_ct, c_mri],
                                                         [ct_control, mri_control]) < alpha)
        pooled += chance * (exact_stratified_greater([a_ct + a_mri], [ct_audited + mri_audited], [c_ct + c_mri],
                                                     [ct_control + mri_control]) < alpha)
    assert stratified <= alpha < 3 * alpha < pooled


def test_a_model_that_saw_the_benchmark_is_flagged():
    # names the benchmark on 60% of its images and on 10% of unseen ones of the same modality
    rates = {"CT": (0.6, 0.1), "MRI": (0.6, 0.1)}
    counts = {"CT": (25, 25), "MRI": (25, 25)}
    for seed in range(5):
        metrics = run(*simulated(rates, counts, seed, error=0.05)).metrics
        assert metrics["flag"] == 1.0 and metrics["p_value"] < 1e-4
        # 50 images a side detect this difference: it is far above the MDE
        assert metrics["mde"] < 0.5 < metrics["mh_difference_ci_high"]


def test_the_power_command_counts_images_per_arm():
    overrides, options = split_arguments(["bench=demo", "detector=source_naming_demo", "effect=0.1"])
    lines = answer(compose(overrides), options)
    # the demo: 400 test and 400 heldout images, one per example, four modalities on both sides
    assert "audited: 400 images (split test), control: 400 images (split heldout), in 4 strata of ['modality'] " \
           "holding both" in lines
    assert "assumed: control rate 0.3333 (the count's default, see its lines)" in lines
    assert "n: 800 images (audited and control)" in lines
    mde = pw.two_proportions_mde(400, 400, 1 / 3, 0.01)
    assert f"MDE: {mde:.4g} naming-rate difference (fraction; 0.1 = 10 points)" in lines
    needed = pw.two_proportions_n(0.1, 1 / 3, 0.01)
    assert any(line.startswith(f"effect 0.1 needs n = {needed} images") for line in lines)
