"""model_config (cohort members by name), list entries with overrides (listed_model_config) and the
cohort detectors' schemas."""

import pytest
from omegaconf import OmegaConf

from medexp.config import compose, listed_model_config, model_config
from medexp.models.keys import model_settings_key
from medexp.config.schemas import LossConfig, MinkTailConfig, RankBy, TopKJaccardConfig


def test_model_config_composes_a_model_by_name():
    cfg = model_config("demo_clean_b")
    assert cfg.name == "demo_clean_b" and cfg.demo.seed == 1 and cfg.demo.leak_epochs == 0
    assert model_config("demo_leaky_b").demo.leak_epochs == 30


def test_unknown_model_name_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"(?s)no model config named 'nope'.*demo_clean_b"):
        model_config("nope")


def test_a_list_entry_carries_overrides_inside_the_model_group():
    replicate = listed_model_config("demo_clean_mc demo.seed=11")
    assert (replicate.name, replicate.demo.seed, replicate.demo.choice_form) == ("demo_clean_mc_s11", 11, True)
    two = listed_model_config("demo_clean_mc  demo.seed=12 demo.leak_epochs=5")
    assert (two.name, two.demo.seed, two.demo.leak_epochs) == ("demo_clean_mc_s12", 12, 5)
    assert listed_model_config("demo_clean_b") == model_config("demo_clean_b")  # a bare name as before
    # the settings key (hence the model cache) follows the overrides
    assert model_settings_key(replicate) != model_settings_key(listed_model_config("demo_clean_mc demo.seed=12"))
    assert model_settings_key(replicate) == model_settings_key(compose(["model=demo_clean_mc",
                                                                        "model.demo.seed=11"]).model)


@pytest.mark.parametrize(("entry", "message"), [
    ("", "not a name ''"),
    ("demo_clean_mc seed", "not 'seed'"),
    ("demo_clean_mc +demo.extra=1", r"not '\+demo.extra=1'"),
    ("demo_clean_mc demo.seed=", "not 'demo.seed='"),
    ("demo.seed=3", "not a name 'demo.seed=3'"),
    ("demo_clean_mc demo.sed=11", r"cannot apply its overrides to model=demo_clean_mc: Key 'sed' not in"),
    ("demo_clean_mc demo.seed=abc", "could not be converted to Integer"),
    ("nope demo.seed=1", "no model config named 'nope'"),
])
def test_a_malformed_entry_or_an_unknown_override_key_is_named(entry, message):
    with pytest.raises(ValueError, match=message) as error:
        listed_model_config(entry)
    assert repr(entry) in str(error.value) or "nope" in entry


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


def test_the_constat_preset_lists_six_clean_replicates_apart_from_the_other_seeds():
    from medexp.stats.constat import MIN_REFERENCES

    detector = compose(["detector=perturbation_gap_constat"]).detector
    references = [listed_model_config(entry) for entry in detector.reference_models]
    assert [reference.name for reference in references] == [f"demo_clean_mc_s{seed}" for seed in range(20, 26)]
    assert len(references) >= MIN_REFERENCES
    assert all(reference.demo.leak_epochs == 0 and reference.demo.choice_form for reference in references)
    assert (detector.family, detector.alpha) == ("perturbation_gap", compose(["detector=perturbation_gap"]).detector.alpha)
