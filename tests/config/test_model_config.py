"""model_config (cohort members by name) and the cohort detectors' schemas."""

import pytest
from omegaconf import OmegaConf

from medexp.config import compose, model_config
from medexp.config.schemas import LossConfig, MinkTailConfig, RankBy, TopKJaccardConfig


def test_model_config_composes_a_model_by_name():
    cfg = model_config("demo_clean_b")
    assert cfg.name == "demo_clean_b" and cfg.demo.seed == 1 and cfg.demo.leak_epochs == 0
    assert model_config("demo_leaky_b").demo.leak_epochs == 30


def test_unknown_model_name_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"(?s)no model config named 'nope'.*demo_clean_b"):
        model_config("nope")


@pytest.mark.parametrize(("option", "schema"), [("mink_tail", MinkTailConfig), ("topk_jaccard", TopKJaccardConfig),
                                                ("loss", LossConfig)])
def test_cohort_detector_yaml_uses_its_schema(option, schema):
    detector = compose([f"detector={option}"]).detector
    assert OmegaConf.get_type(detector) is schema
    assert detector.cohort and all(model_config(name).name == name for name in detector.cohort)


def test_schema_defaults_are_the_audit_parameters():
    mink, topk = MinkTailConfig(name="m", family="f"), TopKJaccardConfig(name="t", family="f")
    assert (mink.k_percent, mink.thresholds, mink.flag_threshold, mink.flag_fraction) == (20.0, [50.0, 100.0], 100.0, 0.05)
    assert (topk.top_k, topk.rank_by, topk.flag_lift) == (25, RankBy.score, 10.0)


def test_bad_rank_by_names_the_allowed_values():
    with pytest.raises(Exception) as error:
        compose(["detector=topk_jaccard", "detector.rank_by=middle"])
    assert "expected one of [score, delta]" in repr(error.value.__cause__)
