"""Detector slot_guess: exact match and ROUGE-L on both arms by hand, skips counted, the null
(filling the slot does not depend on the wording) and memorised masked words."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from medexp.answers.table import Status, response_row
from medexp.benchmarks.base import Example
from medexp.config.schemas import ExactJudgeConfig
from medexp.detectors.answer_arms import joined, pairs, paired_statistics, probe_facts
from medexp.detectors.slot_guess import slot_guess_detector
from medexp.probes.keywords import KeywordSource
from medexp.probes.slots import SlotSettings, slot_probes
from medexp.stats.sample_size import paired_accuracy_mde
from tests.answers.judging import judged_table
from tests.detectors.mmdetect_tables import ORGANS, answer_free_text, slot_guess_config

STRATA = ["content_type"]
SOURCE = KeywordSource(frozenset(ORGANS))

EXACT = ExactJudgeConfig(name="exact", kind="exact")

def slot_examples(n: int, seed: int) -> tuple[list[Example], list[str], list[str]]:
    """Questions naming an organ and their rewordings; one in ten rewordings drops the organ."""
    rng = np.random.default_rng(seed)
    examples, texts, backs = [], [], []
    for index in range(n):
        organ = ORGANS[int(rng.integers(len(ORGANS)))]
        text = f"Is there a lesion in the {organ} on this scan number {index}?"
        back = f"Does scan {index} show a lesion of the {organ}?" if index % 10 else f"Does scan {index} show a lesion?"
        examples.append(Example(f"sim::{index:05d}", index, Path("x.png"), text, "yes", None,
                                {"content_type": "Abnormality" if index % 2 else "Organ"}))
        texts.append(text)
        backs.append(back)
    return examples, texts, backs


def make_probes(n: int, seed: int):
    examples, texts, backs = slot_examples(n, seed)
    return slot_probes(examples, texts, backs, SOURCE, SlotSettings(seed))


def test_statistics_by_hand():
    probes = make_probes(6, 0)  # example 0's rewording drops the organ: skipped
    assert probes.skip_counts() == {"no shared keyword": 1}
    # (original reply, back-translated reply) for examples 1..5
    gold = {p.example_id: p.gold for p in probes.probes}
    plan = {"sim::00001": ("{g}", "kidney stone"), "sim::00002": ("The {G}.", "{g}"), "sim::00003": ("{g}", "error"),
            "sim::00004": ("nothing", "nothing"), "sim::00005": ("{g} and lung", "")}
    rows = []
    for probe in probes.probes:
        text = plan[probe.example_id][0 if probe.kind == "slot_mask" else 1]
        word = gold[probe.example_id]
        if text == "error":
            rows.append(response_row(probe, "", None, Status.error, error="timeout", cause="timeout"))
            continue
        rows.append(response_row(probe, text.format(g=word, G=word.capitalize())))
    table = judged_table(rows, probes.probes, EXACT)  # the hand counts below are normalised exact match
    result = slot_guess_detector(table, probe_facts(probes.probes, STRATA), slot_guess_config(strata=STRATA), 0,
                                 probes.skipped)
    m = result.metrics
    # example 3's back-translation is an error, no answer: its pair leaves
    # exact over the other four: original 1 1 0 0, back 0 1 0 0 (no answer: an empty reply)
    assert (m["cr"], m["pcr"], m["b"], m["c"]) == (pytest.approx(0.5), pytest.approx(0.25), 1, 0)
    assert (m["n_pairs"], m["n_excluded_pairs"]) == (4, 1)
    assert m["p_value"] == pytest.approx(0.5) and m["phi"] == pytest.approx(0.25)
    assert m["inflation"] == pytest.approx(0.25) and m["mde"] == pytest.approx(paired_accuracy_mde(4, 0.01))
    assert (m["em_original"], m["em_back"]) == (pytest.approx(0.5), pytest.approx(0.25))
    # ROUGE-L F1: "<g> and lung" against "<g>" is 2 x 1 x 1/3 / (1 + 1/3) = 0.5; "kidney stone" against a
    # gold other than kidney is 0
    rouge = result.extra_tables["per_probe"].set_index("probe_id")["rouge_l"]
    back = rouge[rouge.index.str.endswith("back_translation") & ~rouge.index.str.startswith("sim::00003")]
    assert m["rouge_original"] == pytest.approx((1 + 1 + 0 + 0.5) / 4)
    assert m["rouge_back"] == pytest.approx(back.mean())
    assert (m["n_error_back"], m["n_no_answer_back"], m["n_skipped"], m["n_skipped.no_shared_keyword"]) == (1, 1, 1, 1)
    words = result.extra_tables["masked_words"]
    assert words["n"].sum() == 4 and set(words["masked_word"]) <= set(ORGANS)
    assert set(result.figures) == {"slot_guess"}


def test_rouge_judgment_follows_the_cells_judge():
    probes = make_probes(4, 1)
    cfg = ExactJudgeConfig(name="exact", kind="exact", free_text_metric="rouge_l", rouge_threshold=0.5)
    table = answer_free_text(probes.probes, lambda probe: 1.0, 0, cfg)
    assert table["correct"].all() and set(table["judge"]) == {"exact"}
    result = slot_guess_detector(table, probe_facts(probes.probes, STRATA), slot_guess_config(strata=STRATA), 0,
                                 probes.skipped)
    assert result.metrics["cr"] == 1.0 and result.metrics["rouge_original"] == 1.0


def _core_p(probes, seed, right):
    table = joined(answer_free_text(probes.probes, right, seed, error=0.02), probe_facts(probes.probes),
                   ("slot_mask", "back_translation"))
    return paired_statistics(pairs(table, "slot_mask", "back_translation"), 1, seed, 0.95)["p_value"]


def test_null_filling_the_slot_does_not_depend_on_the_wording():
    runs, p_values = 200, []
    for seed in range(runs):
        probes = make_probes(60, seed)
        ability = dict(zip((p.example_id for p in probes.probes), np.random.default_rng(seed).uniform(0, 0.8, 120)))
        p_values.append(_core_p(probes, seed, lambda probe: ability[probe.example_id]))
    p_values = np.array(p_values)
    for alpha in (0.05, 0.1, 0.25):
        rejections = int(np.sum(p_values <= alpha))
        assert sps.binomtest(rejections, runs, alpha, alternative="greater").pvalue > 0.001, (alpha, rejections)


def test_power_memorised_wording_is_detected():
    """A quarter of the examples filled right only in their released wording, the others right
    30% of the time in either wording (power at alpha 0.01 over 100 seeds: 81% with 200 examples,
    97% with 300)."""
    detected = 0
    for seed in range(10):
        probes = make_probes(300, seed)
        rng = np.random.default_rng(seed + 40_000)
        memorised = {p.example_id for p in probes.probes if p.kind == "slot_mask" and rng.random() < 0.25}

        def right(probe):
            return 1.0 if probe.kind == "slot_mask" and probe.example_id in memorised else 0.3

        table = answer_free_text(probes.probes, right, seed)
        result = slot_guess_detector(table, probe_facts(probes.probes, STRATA), slot_guess_config(strata=STRATA),
                                     seed, probes.skipped)
        detected += result.metrics["flag"] == 1.0
        assert result.metrics["n_skipped"] == 30
    assert detected >= 9
