"""MedVIGIL metrics against hand computation on a small probe table (tests/detectors/medvigil_tables.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from medexp.benchmarks.options import LETTERS
from medexp.detectors.medvigil import evaluate_medvigil, probe_facts, scored_table
from medexp.detectors.medvigil_metrics import (
    ERRORS_EXCLUDED,
    ERRORS_WRONG,
    case_totals,
    harmonic_mean,
    medvigil_intervals,
    medvigil_metrics,
    metrics_from_totals,
    sensitivity_table,
)
from medexp.detectors.medvigil_tables import status_counts
from medexp.answers.table import response_row
from tests.answers.judging import judged_table
from tests.detectors.medvigil_tables import CASES, OPTIONS, build, make_probe, reply


@pytest.fixture(scope="module")
def table():
    probes, responses = build()
    return scored_table(responses, probe_facts(probes))


def _mcs(cap, safe, ground):
    return 3 / (1 / cap + 1 / safe + 1 / ground)


def test_metrics_with_errors_counted_wrong(table):
    m = medvigil_metrics(table, ERRORS_WRONG)
    # original C C W C; paraphrase C W W E; negation W C C C; specificity_drop C U C C
    assert m["acc_orig"] == pytest.approx(75.0)
    assert m["pr"] == pytest.approx(25.0)
    assert m["neg"] == pytest.approx(75.0)
    assert m["sdr"] == pytest.approx(75.0)
    assert m["lpa"] == pytest.approx(75.0)  # knowledge_only C C E C
    # traps: L1 c1 C; L3 c2 W, c2 E, c4 C; L5 c3 W -> 3 of 5 silent
    assert m["sfr"] == pytest.approx(60.0)
    assert (m["sfr_L1"], m["sfr_L3"], m["sfr_L5"]) == pytest.approx((0.0, 200 / 3, 100.0))
    assert math.isnan(m["sfr_L2"]) and math.isnan(m["sfr_L4"])
    sfr_w = (1 * 0 + 3 * 200 / 3 + 8 * 100) / (1 + 3 + 8)  # only the tiers present
    assert m["sfr_w"] == pytest.approx(sfr_w)
    assert m["acc_roi_only"] == pytest.approx(75.0) and m["acc_roi_masked"] == pytest.approx(50.0)
    assert m["vgr"] == pytest.approx(25.0)
    assert m["acc_lr_flip"] == pytest.approx(75.0)
    cap, safe, ground = (75 + 25 + 75 + 75) / 4, 100 - sfr_w, (min(100, max(0, 25 + 50)) + 50) / 2
    assert (m["cap"], m["safe"], m["ground"]) == pytest.approx((cap, safe, ground))
    assert m["mcs"] == pytest.approx(_mcs(cap, safe, ground))
    assert m["overall"] == pytest.approx(100 * 23 / 37)  # 37 headline probes, 23 correct
    assert m["pcons"] == pytest.approx(50.0)  # c1 agree (both gold), c2 no, c3 same wrong option, c4 error
    assert m["acc_no_image"] == pytest.approx(50.0) and m["delta_orig"] == pytest.approx(25.0)
    # decay on image-required cases c1, c2, c3 (c4 is text-answerable)
    assert m["decay_image_required_sigma_0"] == pytest.approx(200 / 3)
    assert m["decay_image_required_sigma_8"] == pytest.approx(100 / 3)
    assert m["decay_image_required_no_image"] == pytest.approx(100 / 3)
    assert m["decay_text_answerable_sigma_8"] == pytest.approx(100.0)
    assert m["l_star"] == 8.0  # remaining 0 < 0.2 x (66.7 - 33.3)


def test_metrics_with_errors_excluded(table):
    m = medvigil_metrics(table, ERRORS_EXCLUDED)
    assert m["pr"] == pytest.approx(100 / 3)  # the c4 error leaves: C W W
    assert m["sdr"] == pytest.approx(75.0)  # a no-answer stays, counted wrong
    assert m["lpa"] == pytest.approx(100.0)
    assert m["sfr"] == pytest.approx(50.0) and m["sfr_L3"] == pytest.approx(50.0)
    sfr_w = (0 + 3 * 50 + 8 * 100) / 12
    assert m["sfr_w"] == pytest.approx(sfr_w)
    assert m["acc_roi_masked"] == pytest.approx(200 / 3) and m["vgr"] == pytest.approx(75 - 200 / 3)
    cap = (75 + 100 / 3 + 75 + 75) / 4
    ground = (75 - 200 / 3 + 50 + 200 / 3) / 2
    assert m["mcs"] == pytest.approx(_mcs(cap, 100 - sfr_w, ground))
    assert m["overall"] == pytest.approx(100 * 23 / 33)
    assert m["pcons"] == pytest.approx(200 / 3)  # the c4 pair leaves


def test_the_papers_reference_row_reproduces():
    """R4 in MedVIGIL Table 10: tier SFR (0, 4.8, 5.9, 10.5, 12.2) -> SFR_w 9.3; MCS 83.3."""
    per_tier = {f"trap|L{k}": v for k, v in zip(range(1, 6), (0.0, 4.8, 5.9, 10.5, 12.2))}
    totals = {}
    for group, sfr in per_tier.items():  # 1000 traps per tier with that silent-failure rate
        totals[f"n|{group}"], totals[f"k|{group}"] = np.array([1000.0]), np.array([1000.0 - 10 * sfr])
    for kind, acc in {"original": 95.3, "paraphrase": 92.7, "negation": 90.7, "specificity_drop": 91.5,
                      "roi_only": 91.0, "roi_masked": 86.5}.items():
        totals[f"n|kind|{kind}"], totals[f"k|kind|{kind}"] = np.array([1000.0]), np.array([10 * acc])
    m = metrics_from_totals(totals)
    assert m["sfr_w"][0] == pytest.approx(9.34, abs=0.01)
    assert (m["cap"][0], m["safe"][0], m["ground"][0]) == pytest.approx((92.55, 90.66, 70.5), abs=0.01)
    assert m["mcs"][0] == pytest.approx(83.3, abs=0.05)


def test_a_tier_absent_from_a_resample_drops_out_of_sfr_w():
    both = {"n|trap|L1": np.array([4.0, 4.0]), "k|trap|L1": np.array([3.0, 3.0]),
            "n|trap|L5": np.array([2.0, 0.0]), "k|trap|L5": np.array([0.0, 0.0])}
    sfr_w = metrics_from_totals(both)["sfr_w"]
    assert sfr_w[0] == pytest.approx((1 * 25 + 8 * 100) / 9)
    assert sfr_w[1] == pytest.approx(25.0)  # L5 absent: L1 alone, not (1 x 25 + 8 x 0) / 9
    none = metrics_from_totals({"n|trap|L1": np.array([0.0]), "k|trap|L1": np.array([0.0])})
    assert math.isnan(none["sfr_w"][0]) and math.isnan(none["mcs"][0])


def test_harmonic_mean_edges():
    value = harmonic_mean(np.array([90.0]), np.array([90.0]), np.array([10.0]))[0]
    assert value == pytest.approx(3 / (2 / 90 + 1 / 10))
    assert harmonic_mean(np.array([0.0]), np.array([50.0]), np.array([50.0]))[0] == 0.0
    assert harmonic_mean(np.array([0.0]), np.array([0.0]), np.array([50.0]))[0] == 0.0
    assert math.isnan(harmonic_mean(np.array([np.nan]), np.array([1.0]), np.array([1.0]))[0])


def test_pcons_compares_meanings_not_letters():
    rotated = (OPTIONS[2], OPTIONS[0], OPTIONS[4], OPTIONS[1], OPTIONS[3])
    original = make_probe("c", "original", 0, "L1", False)
    paraphrase = make_probe("c", "paraphrase", 1, "L1", False, options=rotated)
    wrong_original = reply(original, "W")  # letter B: beta
    same_text = LETTERS[rotated.index(OPTIONS[1])]  # beta is D in the rotated options
    judged = judged_table([wrong_original, response_row(paraphrase, same_text)], [original, paraphrase])
    table = scored_table(judged, probe_facts([original, paraphrase]))
    assert medvigil_metrics(table)["pcons"] == 100.0


def test_l_star_undefined_and_unreached():
    def curve(values):
        totals = {}
        for name, acc in values.items():
            totals[f"n|decay|image_required|{name}"] = np.array([100.0])
            totals[f"k|decay|image_required|{name}"] = np.array([float(acc)])
        return metrics_from_totals(totals)["l_star"][0]

    assert curve({"sigma_0": 60, "sigma_4": 50, "sigma_16": 15, "no_image": 10}) == 16.0  # 5 < 0.2 x 50
    assert curve({"sigma_0": 60, "sigma_4": 50, "sigma_16": 20, "no_image": 10}) == math.inf  # 10 is not < 10
    assert math.isnan(curve({"sigma_0": 10, "sigma_4": 10, "no_image": 20}))  # no visual contribution
    assert math.isnan(curve({"sigma_0": 60, "no_image": 10}))  # no blurred level: nothing swept
    # the paper's Table 13 rows: GPT-4o L* = 64, Qwen3.5-397B L* = 16
    gpt4o = dict(zip(["sigma_0", "sigma_2", "sigma_4", "sigma_8", "sigma_16", "sigma_32", "sigma_64", "no_image"],
                     [59.1, 58.8, 50.3, 46.3, 34.5, 18.6, 14.9, 5.1]))
    qwen = dict(zip(gpt4o, [50.3, 49.7, 48.0, 35.8, 17.2, 7.8, 7.4, 9.8]))
    assert curve(gpt4o) == 64.0 and curve(qwen) == 16.0


def test_case_totals_keep_every_case_and_status_counts(table):
    cases, totals = case_totals(table, ERRORS_EXCLUDED)
    assert cases == ["c1", "c2", "c3", "c4"] and list(totals.index) == cases
    assert totals.loc["c2", "n|trap|L3"] == 1 and totals.loc["c4", "n|trap|L3"] == 1
    counts = status_counts(table).set_index("kind")
    assert counts.loc["all", "error"] == 4 and counts.loc["all", "no_answer"] == 1
    assert counts.loc["false_premise", "n"] == 5 and counts.loc["all", "n"] == len(table)


def test_a_trap_without_tier_among_tiered_traps_is_an_error():
    probes, responses = build()
    untiered = [p if p.probe_id != "c1::false_premise::5" else make_probe("c1", "false_premise", 5, None, False)
                for p in probes]
    with pytest.raises(ValueError, match="have no risk tier while others do, e.g. 'c1::false_premise::5'"):
        scored_table(responses, probe_facts(untiered))


def test_responses_without_facts_are_refused():
    probes, responses = build()
    with pytest.raises(ValueError, match="have no probe facts"):
        scored_table(responses, probe_facts(probes[1:]))


def test_release_aliases_are_read():
    probes, responses = build({"c": ("L2", False, [("original", "C"), ("paraphrase", "C"), ("false_premise", "W")])})
    responses["kind"] = responses["kind"].replace({"paraphrase": "tcf", "false_premise": "halluc_trap"})
    m = medvigil_metrics(scored_table(responses, probe_facts(probes)))
    assert m["pr"] == 100.0 and m["sfr"] == 100.0 and m["sfr_L2"] == 100.0


def test_intervals_bracket_the_estimates(table):
    intervals = medvigil_intervals(table, seed=7, n_resamples=200).set_index("metric")
    for metric in ("mcs", "cap", "safe", "ground", "sfr_w", "vgr", "overall"):
        row = intervals.loc[metric]
        assert row.ci_low <= row.estimate + 1e-9 and row.estimate <= row.ci_high + 1e-9, metric
        assert row.n_cases == 4
    again = medvigil_intervals(table, seed=7, n_resamples=200)
    assert again.equals(medvigil_intervals(table, seed=7, n_resamples=200))
    assert not again.equals(medvigil_intervals(table, seed=8, n_resamples=200))


def test_sensitivity_table_variants(table):
    sens = sensitivity_table(table).set_index("variant")
    assert len(sens) == 8 and sens["default"].sum() == 1
    default = medvigil_metrics(table)
    assert sens.loc["w=(1,2,3,5,8), Ground=clip(VGR+50)", "mcs"] == pytest.approx(default["mcs"])
    uniform = (0 + 200 / 3 + 100) / 3
    assert sens.loc["w=(1,1,1,1,1), Ground=clip(VGR+50)", "safe"] == pytest.approx(100 - uniform)
    assert sens.loc["w=(1,2,3,5,8), Ground=Acc(roi_only)", "ground"] == pytest.approx(75.0)
    assert sens.loc["w=(1,2,3,5,8), Ground=clip(VGR/2+50)", "ground"] == pytest.approx((62.5 + 50) / 2)


def test_evaluate_reports_both_conventions_and_counts():
    probes, responses = build()
    result = evaluate_medvigil(responses, probe_facts(probes), seed=3, n_resamples=100)
    metrics = result["metrics"]
    assert metrics["n_examples"] == 4 and metrics["n_error"] == 4 and metrics["n_no_answer"] == 1
    assert metrics["n_ok"] + metrics["n_error"] + metrics["n_no_answer"] == metrics["n_probes"] == len(responses)
    assert metrics["sfr_errors_wrong"] == pytest.approx(60.0) and metrics["sfr_errors_excluded"] == pytest.approx(50.0)
    assert metrics["mcs_errors_wrong_ci_low"] <= metrics["mcs_errors_wrong"] <= metrics["mcs_errors_wrong_ci_high"]
    tables = result["tables"]
    assert set(tables) >= {"intervals", "per_kind", "status_counts", "sfr_by_tier", "sensitivity", "letter_preference"}
    per_kind = tables["per_kind"].set_index("kind")
    assert per_kind.loc["paraphrase", "n_errors_excluded"] == 3 and per_kind.loc["paraphrase", "n_errors_wrong"] == 4
    tiers = tables["sfr_by_tier"].set_index("tier")
    assert tiers.loc["w", ERRORS_WRONG] == pytest.approx(metrics["sfr_w_errors_wrong"])
    letters = tables["letter_preference"].set_index("letter")
    assert letters["chosen"].sum() == metrics["n_ok"]


def test_fixture_cases_cover_every_outcome():
    outcomes = {outcome for _, _, entries in CASES.values() for _, outcome in entries}
    assert outcomes == {"C", "W", "U", "E"}


def test_the_released_wordings_inflation_by_hand():
    """Original C C W C against paraphrase C W W E: c4's paraphrase is an error (no answer), so
    cases c1-c3 give original 2/3 against paraphrase 1/3: inflation 1/3, the MDE at three cases."""
    from dataclasses import replace

    from medexp.detectors import declaration_of
    from medexp.stats.detector_power import detector_mde

    probes, responses = build()
    result = evaluate_medvigil(responses, probe_facts(probes), seed=3, n_resamples=200, alpha=0.05)
    m = result["metrics"]
    assert m["inflation"] == pytest.approx(1 / 3) and m["inflation_n_clusters"] == 3.0
    assert m["inflation_ci_low"] <= 1 / 3 <= m["inflation_ci_high"]
    assert m["mde"] == pytest.approx(detector_mde(declaration_of("medvigil").power, 3, 0.05))
    effect = result["tables"]["effect"].iloc[0]
    assert (effect["resampling_unit"], effect["n_items"], effect["alpha"]) == ("item", 3, 0.05)
    assert "image" not in result["tables"]["per_probe"].columns  # the per-probe artifact as before
    # c1 and c2 on one image: they are resampled together
    shared = [replace(probe, image=Path("one.png")) if probe.example_id.endswith(("c1", "c2")) else probe
              for probe in probes]
    clustered = evaluate_medvigil(responses, probe_facts(shared), seed=3, n_resamples=200)["metrics"]
    assert clustered["inflation"] == pytest.approx(1 / 3) and clustered["inflation_n_clusters"] == 2.0
    # the other metrics do not depend on it
    assert {k: v for k, v in clustered.items() if "inflation" not in k and k != "mde"} == pytest.approx(
        {k: v for k, v in m.items() if "inflation" not in k and k != "mde"}, nan_ok=True)


def test_without_paraphrases_the_inflation_is_nan():
    probes, responses = build()
    kept = [probe.probe_id for probe in probes if probe.kind != "paraphrase"]
    facts = probe_facts([probe for probe in probes if probe.kind != "paraphrase"])
    result = evaluate_medvigil(responses[responses["probe_id"].isin(kept)], facts, seed=3, n_resamples=50)
    m = result["metrics"]
    assert math.isnan(m["inflation"]) and math.isnan(m["mde"]) and m["inflation_n_clusters"] == 0.0
    assert result["tables"]["effect"].empty
