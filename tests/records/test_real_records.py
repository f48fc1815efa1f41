"""The repository's copies of real records (medexp/data/realdata/): cells of
experiment=slake_real_scores against values computed here by hand from the raw files."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from medexp.config import compose, conf_dir

DATA = conf_dir().parent / "medexp" / "data" / "realdata"


def _raw() -> pd.DataFrame:
    """One row per SLAKE-En test question in released order: audit scores, flag, image."""
    audit = json.loads((DATA / "medvlm-contamination-audit" / "slake_en_overlap_inflation.json").read_text())
    release = json.loads((DATA / "slake" / "test.json").read_text())
    image = {str(row["qid"]): row["img_name"] for row in release if row["q_lang"] == "en"}
    rows = [{"qid": r["example_id"].split("::")[-1], "flagged": r["flagged"], "answer_type": r["answer_type"],
             **r["mean_logprob"]} for r in audit["records"]]
    frame = pd.DataFrame(rows)
    frame["image"] = frame["qid"].map(image)
    return frame


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One tracking store and cache for the module (creating a store costs seconds); each test's cells
    have keys or settings of their own, so every one is computed."""
    return tmp_path_factory.mktemp("real-records")


def _cell(store, *overrides):
    from medexp.runner.cell_run import run_cell

    cfg = compose([f"tracking.uri=sqlite:///{store / 'mlflow.db'}", f"paths.cache_dir={store / 'cache'}",
                   "bench=slake", "bench.root=${paths.root}/medexp/data/realdata/slake", *overrides])
    outcome = run_cell(cfg)
    assert outcome.status == "FINISHED", outcome.error
    return outcome.metrics


def test_the_copies_are_the_published_files():
    raw = _raw()
    assert len(raw) == 1061 and raw["image"].notna().all()
    assert raw["image"].nunique() == 96 and raw.loc[raw["flagged"], "image"].nunique() == 19
    assert int(raw["flagged"].sum()) == 247
    for name in ("LICENSE", "exchangeability_refined.json"):
        assert (DATA / "medvlm-contamination-audit" / name).is_file()
    assert (DATA / "slake" / "LICENSE-PMC-VQA").is_file()
    train = json.loads((DATA / "slake" / "train.json").read_text())  # the published rows, three fields kept
    assert len(train) == 9835 and {frozenset(row) for row in train} == {frozenset({"qid", "img_name", "q_lang"})}


def test_the_split_overlap_gap_of_qwen_flags_the_test_images_train_names(store):
    raw = _raw()
    train = {row["img_name"] for row in json.loads((DATA / "slake" / "train.json").read_text())}
    flagged = raw["image"].isin(train)
    metrics = _cell(store, "model=qwen2_5_vl_record", "detector=overlap_gap", "flags@detector.flags=split_overlap",
                    "detector.baseline=blip2_record", "detector.n_permutations=2000", "detector.n_resamples=500")
    assert (metrics["flags_n_questions_flagged"], metrics["flags_n_images_flagged"]) == (flagged.sum(), 72) == (781, 72)
    gap = raw.loc[flagged, "Qwen2.5-VL-7B"].mean() - raw.loc[~flagged, "Qwen2.5-VL-7B"].mean()
    baseline = raw.loc[flagged, "BLIP-2"].mean() - raw.loc[~flagged, "BLIP-2"].mean()
    assert metrics["gap"] == pytest.approx(gap, abs=1e-9)
    assert metrics["gap_minus_baseline"] == pytest.approx(gap - baseline, abs=1e-9)
    assert metrics["bench_annotations_only"] == 1.0 and metrics["underpowered"] == 0.0


def test_qwens_overlap_gap_and_baseline_difference_are_the_raw_files_means(store):
    raw = _raw()
    metrics = _cell(store, "model=qwen2_5_vl_record", "detector=overlap_gap", "detector.baseline=blip2_record",
                    "detector.n_permutations=2000", "detector.n_resamples=500")

    def gap(frame, model):
        return frame.loc[frame["flagged"], model].mean() - frame.loc[~frame["flagged"], model].mean()

    assert metrics["gap"] == pytest.approx(gap(raw, "Qwen2.5-VL-7B"), abs=1e-9)
    assert metrics["baseline_gap"] == pytest.approx(gap(raw, "BLIP-2"), abs=1e-9)
    assert metrics["gap_minus_baseline"] == pytest.approx(gap(raw, "Qwen2.5-VL-7B") - gap(raw, "BLIP-2"), abs=1e-9)
    open_questions = raw[raw["answer_type"] == "OPEN"]
    assert metrics["gap.answer_type.OPEN"] == pytest.approx(gap(open_questions, "Qwen2.5-VL-7B"), abs=1e-9)
    assert (metrics["n_images"], metrics["n_flagged_images"], metrics["n_flagged"]) == (96.0, 19.0, 247.0)
    assert metrics["gap_ci_low"] < metrics["gap"] < metrics["gap_ci_high"]
    assert metrics["bench_annotations_only"] == 1.0 and metrics["scores_n_matched.blip2_record"] == 1061.0


def test_exch_rank_on_a_record_is_spearman_of_earliness_and_the_mean_log_prob(store):
    raw = _raw()
    metrics = _cell(store, "model=qwen2_5_vl_record", "detector=exch_rank", "detector.score=mean_logprob",
                    "detector.n_permutations=2000")
    rho = sps.spearmanr(-np.arange(len(raw)), raw["Qwen2.5-VL-7B"]).statistic
    assert metrics["statistic"] == pytest.approx(rho, abs=1e-9)
    assert metrics["n_examples"] == 1061.0 and metrics["p_value"] < 0.05


def test_the_loss_attack_runs_on_a_cohort_of_records(store):
    raw = _raw()
    metrics = _cell(store, "model=qwen2_5_vl_record", "detector=loss",
                    "detector.cohort=[chexagent_record,internvl3_record,llava_onevision_record]",
                    "detector.n_permutations=500")
    assert metrics["n_models"] == 4.0 and metrics["scores_n_matched.internvl3_record"] == 1061.0
    assert metrics["target_mean_nll"] == pytest.approx(-raw["Qwen2.5-VL-7B"].mean(), abs=1e-9)
    cohort = raw[["CheXagent-8b", "InternVL3-8B", "LLaVA-OneVision-7B"]]
    assert metrics["cohort_median_mean_nll"] == pytest.approx(float((-cohort).median(axis=1).mean()), abs=1e-9)
