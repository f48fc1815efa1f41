"""Detector perturbation_gap against hand-computed values, its null (answers that do not depend on
memory of the originals) and its power (planted memorisation), and the difference of gaps against
clean reference models when the twin set is harder for everyone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from medexp.answers.table import response_row
from medexp.benchmarks.base import Example
from medexp.detectors.answer_arms import probe_facts
from medexp.detectors.perturbation_gap import perturbation_gap_detector
from medexp.probes.twins import twin_probes
from medexp.stats.sample_size import paired_accuracy_mde
from tests.answers.judging import judged_table

OPTIONS = ("left", "right", "both", "neither")


def _pairs(n: int):
    """n pairs; the original's gold is option i % 4, its twin's the next option (the answer changes)."""
    pairs = []
    for i in range(n):
        meta = {"category": "side" if i % 2 else "count"}
        original = Example(f"b::test::{i}", i, None, f"Question {i}?", OPTIONS[i % 4], OPTIONS, meta)
        twin = Example(f"b_twin::test::{i}", i, None, f"Question {i}?", OPTIONS[(i + 1) % 4], OPTIONS, meta)
        pairs.append((original, twin))
    return pairs


def _cfg(**fields):
    values = {"strata": ["category"], "ci_level": 0.95, "n_resamples": 200, "n_permutations": 2000, "alpha": 0.05}
    return SimpleNamespace(**{**values, **fields})


def _answered(probes, right):
    """The judged table where probe j is answered right iff ``right[j]`` (else the next letter)."""
    rows = []
    for probe, correct in zip(probes, right):
        rows.append(response_row(probe, probe.gold if correct else "ABCD"[("ABCD".index(probe.gold) + 1) % 4]))
    return judged_table(rows, probes)


def _outcomes(original_right, twin_right) -> list[bool]:
    """Probe order of twin_probes: original, twin, original, twin ..."""
    return [bool(value) for pair in zip(original_right, twin_right) for value in pair]


def _run(original_right, twin_right, references=None, **fields):
    probe_set = twin_probes(_pairs(len(original_right)))
    facts = probe_facts(probe_set.probes, ["category"])
    refs = {name: _answered(probe_set.probes, _outcomes(*arms)) for name, arms in (references or {}).items()}
    return perturbation_gap_detector(_answered(probe_set.probes, _outcomes(original_right, twin_right)), facts,
                                     _cfg(**fields), seed=7, references=refs)


def test_accuracies_discordant_counts_and_mcnemar_by_hand():
    # 10 pairs: 4 right-then-wrong (b), 1 wrong-then-right (c), 3 right on both, 2 wrong on both
    original = [1, 1, 1, 1, 0, 1, 1, 1, 0, 0]
    twin = [0, 0, 0, 0, 1, 1, 1, 1, 0, 0]
    result = _run(original, twin)
    m = result.metrics
    assert (m["acc_original"], m["acc_twin"], m["gap"]) == (pytest.approx(0.7), pytest.approx(0.4), pytest.approx(0.3))
    assert (m["b"], m["c"], m["n_pairs"]) == (4.0, 1.0, 10.0)
    # one-sided exact McNemar: P(B >= 4), B ~ Binomial(5, 1/2) = (5 + 1) / 32
    assert m["p_mcnemar"] == pytest.approx(6 / 32) and m["p_value"] == m["p_mcnemar"] and m["statistic"] == m["gap"]
    assert m["gap_ci_low"] <= 0.3 <= m["gap_ci_high"] and m["flag"] == 0.0
    table = result.table
    assert list(table["original_correct"]) == [bool(v) for v in original]
    assert table["lost"].sum() == 4 and table["gained"].sum() == 1
    strata = result.extra_tables["strata"].set_index("value")
    # odd items are "side": originals 1,3,5,7,9 right: 1,1,1,1,0; twins 0,0,1,1,0
    assert strata.loc["side", "gap"] == pytest.approx(0.8 - 0.4) and strata.loc["side", "b"] == 2
    assert set(result.figures) == {"perturbation_gap"}


@pytest.mark.extended
def test_null_p_values_are_roughly_uniform_and_the_false_positive_rate_holds():
    """A model whose answers do not depend on memory: each pair has an item difficulty shared by
    the original and its twin, and each arm is answered independently at that rate."""
    rng = np.random.default_rng(2026)
    p_values = []
    for _ in range(200):
        ease = rng.beta(4, 2, size=120)
        original, twin = rng.random(120) < ease, rng.random(120) < ease
        result = _run(original, twin, n_resamples=50)
        p_values.append(result.metrics["p_value"])
    p_values = np.array(p_values)
    # exact McNemar is discrete and conservative: P(p <= a) <= a, up to three binomial sd of 200 draws
    for level in (0.05, 0.1, 0.25, 0.5):
        assert np.mean(p_values <= level) <= level + 3 * np.sqrt(level * (1 - level) / 200), level
    assert np.mean(p_values <= 0.05) == pytest.approx(0.05, abs=0.04)
    assert 0.4 < p_values.mean() < 0.65


def test_planted_memorisation_is_detected():
    """The same model, having memorised a third of the originals' answers: on those it answers the
    original's answer on both arms (right, then wrong on the twin)."""
    rng = np.random.default_rng(11)
    ease = rng.beta(4, 2, size=120)
    original, twin = rng.random(120) < ease, rng.random(120) < ease
    memorised = rng.random(120) < 1 / 3
    original, twin = original | memorised, twin & ~memorised
    m = _run(original, twin).metrics
    assert m["gap"] > 0.25 and m["p_value"] < 1e-6 and m["flag"] == 1.0 and m["gap_ci_low"] > 0.1


def test_a_harder_twin_set_flags_every_model_but_not_the_difference_of_gaps():
    """Twins 20 points harder for everyone: McNemar flags a clean model, the reference comparison
    does not; a memorising model on the same twins still stands out against the references."""
    rng = np.random.default_rng(5)
    n = 150
    ease = rng.uniform(0.5, 0.95, size=n)

    def clean():
        return rng.random(n) < ease, rng.random(n) < ease - 0.2

    references = {"clean_a": clean(), "clean_b": clean()}
    original, twin = clean()
    honest = _run(original, twin, references).metrics
    assert honest["p_mcnemar"] < 0.01 and honest["reference_gap"] > 0.1
    assert honest["p_value"] == honest["p_reference"] > 0.05 and honest["flag"] == 0.0
    assert honest["gap_difference"] == pytest.approx(honest["gap"] - honest["reference_gap"])
    memorised = rng.random(n) < 0.4
    leaky = _run(original | memorised, twin & ~memorised, references).metrics
    assert leaky["p_reference"] < 0.001 and leaky["flag"] == 1.0
    assert leaky["gap_difference_ci_low"] > 0 and leaky["n_references"] == 2.0


@pytest.mark.extended
def test_the_difference_of_gaps_holds_its_level_under_the_null():
    """Model and references all clean on a harder twin set: the sign-flip test's false-positive rate."""
    rng = np.random.default_rng(9)
    p_values = []
    for _ in range(100):
        ease = rng.uniform(0.5, 0.95, size=80)

        def clean():
            return rng.random(80) < ease, rng.random(80) < ease - 0.15

        p_values.append(_run(*clean(), {"ref": clean()}, n_resamples=20, n_permutations=400).metrics["p_value"])
    assert np.mean(np.array(p_values) <= 0.05) <= 0.05 + 0.05


def _with_errors(table, probe_ids):
    """``table`` with the rows of ``probe_ids`` turned into error rows (the server failed)."""
    from medexp.answers.table import error_row
    from medexp.probes.base import Probe

    rows, probes = [], []
    for row in table.to_dict("records"):
        probe = Probe(probe_id=row["probe_id"], example_id=row["example_id"], kind=row["kind"], question="q",
                      gold=row["gold"], options=OPTIONS)
        probes.append(probe)
        rows.append(error_row(probe, "http_5xx", "HTTP 503") if row["probe_id"] in probe_ids
                    else response_row(probe, row["response"]))
    return judged_table(rows, probes)


def test_errors_are_no_answers_for_the_model_or_a_reference():
    """An error is never a wrong answer (the model's pair leaves) nor a gap of 0 (the reference's
    pair leaves the comparison); a reference that answered nothing is no reference at all."""
    probe_set = twin_probes(_pairs(4))
    facts = probe_facts(probe_set.probes, ["category"])
    model = _answered(probe_set.probes, [True, False] * 4)  # right on originals, wrong on twins: gap 1
    model = _with_errors(model, {"b::test::0::perturbed_twin"})
    reference = _with_errors(_answered(probe_set.probes, [True] * 8), {"b::test::2::original"})
    m = perturbation_gap_detector(model, facts, _cfg(), 1, references={"ref": reference}).metrics
    assert (m["n_pairs"], m["n_excluded_pairs"], m["b"], m["gap"]) == (3, 1, 3, 1.0)
    assert (m["n_reference_excluded_pairs"], m["reference_gap.ref"], m["gap_difference"]) == (1, 0.0, 1.0)
    unreachable = _with_errors(reference, set(reference["probe_id"]))
    with pytest.raises(ValueError, match="no pair answered by the model was answered by every reference model"):
        perturbation_gap_detector(model, facts, _cfg(), 1, references={"ref": unreachable})


def test_inflation_clustered_by_the_originals_images_and_the_mde():
    """inflation = the gap; without images every pair is its own unit; originals sharing an image
    (three per image) are resampled together, which widens the interval here because the
    memorised pairs sit on the same images."""
    original = [1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1] * 3
    twin = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0] * 3
    plain = _run(original, twin)
    m = plain.metrics
    assert m["inflation"] == pytest.approx(m["gap"]) == pytest.approx(6 / 12)
    assert m["inflation_n_clusters"] == 36 and plain.extra_tables["effect"].iloc[0]["resampling_unit"] == "item"
    assert m["mde"] == pytest.approx(paired_accuracy_mde(36, 0.05, 0.8, 0.25, "one"))
    pairs = [(replace(first, image=Path(f"img{index // 3}.png")), second)
             for index, (first, second) in enumerate(_pairs(36))]
    probe_set = twin_probes(pairs)
    clustered = perturbation_gap_detector(_answered(probe_set.probes, _outcomes(original, twin)),
                                          probe_facts(probe_set.probes, ["category"]), _cfg(), seed=7)
    c = clustered.metrics
    assert c["inflation"] == m["inflation"] and c["inflation_n_clusters"] == 12
    assert clustered.extra_tables["effect"].iloc[0]["resampling"] == "image (12 clusters of 36 items)"
    assert c["inflation_ci_high"] - c["inflation_ci_low"] > m["inflation_ci_high"] - m["inflation_ci_low"]


def _right(n: int, k: int) -> np.ndarray:
    return np.arange(n) < k


def test_constat_with_five_references_on_a_line_by_hand_and_nothing_else_changes(monkeypatch):
    """20 pairs; five references with twin accuracy 0.3 ... 0.7 and original accuracy 0.1 higher
    (the line original = twin + 0.1); the model: 0.4 on the twins, 0.6 on the originals, where the
    line expects 0.5. Every other metric is what the same cell gives without the estimate."""
    import medexp.detectors.perturbation_gap as module

    references = {f"clean_{right}": (_right(20, right + 2), _right(20, right)) for right in (6, 8, 10, 12, 14)}
    result = _run(_right(20, 12), _right(20, 8), references)
    m = result.metrics
    assert (m["constat_expected"], m["constat_n_references"]) == (pytest.approx(0.5), 5.0)
    assert m["constat_inflation"] == pytest.approx(0.1, abs=1e-12)
    assert m["constat_ci_low"] <= 0.1 <= m["constat_ci_high"] and 0 <= m["constat_p_value"] <= 1
    table = result.extra_tables["constat"]
    assert list(table["role"]) == ["reference"] * 5 + ["candidate"]
    assert list(table["acc_twin"]) == pytest.approx([0.3, 0.4, 0.5, 0.6, 0.7, 0.4])
    assert table["slope"].iloc[-1] == pytest.approx(1.0) and table["intercept"].iloc[-1] == pytest.approx(0.1)
    monkeypatch.setattr(module, "MIN_REFERENCES", 6)
    without = _run(_right(20, 12), _right(20, 8), references)
    assert "constat" not in without.extra_tables and not any(name.startswith("constat") for name in without.metrics)
    assert {name: value for name, value in m.items() if not name.startswith("constat_")} == without.metrics
    assert m["p_value"] == m["p_reference"]


def test_fewer_than_five_references_give_no_constat_estimate():
    references = {f"clean_{right}": (_right(20, right + 2), _right(20, right)) for right in (6, 8, 10, 12)}
    result = _run(_right(20, 12), _right(20, 8), references)
    assert result.metrics["n_references"] == 4.0 and "constat_inflation" not in result.metrics
    assert "constat" not in result.extra_tables
