"""Which model configs form the pairs of a differential audit, and their seed replicates."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from medexp.config import model_config
from medexp.config.schemas import ModelPair
from medexp.train.pairs import resolve_pairs


def _pairs(*entries):
    return [OmegaConf.structured(ModelPair(**entry)) for entry in entries]


def test_a_demo_candidate_is_paired_with_its_declared_counterpart():
    (pair,) = resolve_pairs(model_config("demo_leaky"), _pairs({}), None)
    assert (pair.candidate.name, pair.independent.name) == ("demo_leaky", "demo_clean")
    assert pair.candidate.demo.leak_epochs > 0 and pair.independent.demo.leak_epochs == 0


def test_seeds_retrain_both_models_of_a_demo_pair():
    pairs = resolve_pairs(model_config("demo_leaky"), _pairs({}), [0, 1])
    assert [(p.candidate.demo.seed, p.independent.demo.seed) for p in pairs] == [(0, 0), (1, 1)]
    assert [p.label for p in pairs] == ["demo_leaky vs demo_clean (seed 0)", "demo_leaky vs demo_clean (seed 1)"]
    named = resolve_pairs(model_config("demo_clean_b"), _pairs({"independent": "demo_clean"}), [2])
    assert (named[0].candidate.demo.seed, named[0].independent.demo.seed) == (2, 2)


def test_a_trained_candidate_pairs_with_its_independent_arm_over_its_replicate_seeds():
    pairs = resolve_pairs(model_config("demo_vit_lora"), _pairs({}), None)
    assert [p.candidate.name for p in pairs] == [f"demo_vit_lora-candidate-s{s}" for s in (123, 456, 789, 1024)]
    assert [p.independent.name for p in pairs] == [f"demo_vit_lora-independent-s{s}" for s in (123, 456, 789, 1024)]
    for pair in pairs:
        candidate, independent = OmegaConf.to_container(pair.candidate.train), OmegaConf.to_container(pair.independent.train)
        assert {key for key in candidate if candidate[key] != independent[key]} == {"arm"}
    assert len(resolve_pairs(model_config("demo_vit"), _pairs({}), [7])) == 1


def test_named_candidates_and_explicit_pairs():
    pairs = resolve_pairs(model_config("demo_clean"), _pairs({"candidate": "demo_leaky"}, {"candidate": "demo_leaky_b"}), None)
    assert [(p.candidate.name, p.independent.name) for p in pairs] == [("demo_leaky", "demo_clean"),
                                                                        ("demo_leaky_b", "demo_clean_b")]


@pytest.mark.parametrize("model,entry,seeds,message", [
    ("demo_clean", {}, None, "names no independent counterpart"),
    ("qwen2_5_vl", {"independent": "demo_clean"}, [1, 2], "has no training seed to vary"),
])
def test_pairs_that_cannot_be_formed_are_named(model, entry, seeds, message):
    with pytest.raises(ValueError, match=message):
        resolve_pairs(model_config(model), _pairs(entry), seeds)


def test_an_independent_arm_cannot_be_the_candidate():
    independent = model_config("demo_vit")
    OmegaConf.update(independent, "train.arm", "independent")
    with pytest.raises(ValueError, match="independent arm"):
        resolve_pairs(independent, _pairs({}), None)
    with pytest.raises(ValueError, match="empty"):
        resolve_pairs(model_config("demo_leaky"), [], None)


def test_the_train_app_lists_each_model_of_each_replicate_once():
    from medexp.train.app import models_to_train

    demo = models_to_train(["demo_leaky", "demo_clean"], [0, 1])
    assert [(m.name, m.demo.seed) for m in demo] == [("demo_leaky", 0), ("demo_clean", 0), ("demo_leaky", 1),
                                                      ("demo_clean", 1)]
    trained = models_to_train(["demo_vit_dp_lora"], None)
    assert [m.name for m in trained][:2] == ["demo_vit_dp_lora-candidate-s123", "demo_vit_dp_lora-independent-s123"]
    assert len(trained) == 8
