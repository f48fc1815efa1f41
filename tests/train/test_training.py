"""Differential training on a tiny ViT: identical initialisation, data order, the saved pair,
LoRA and DP-LoRA, and the null (both arms on the same data give the same weights)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from medexp.benchmarks import load_benchmark_from_config
from medexp.models import load_scorer, model_location
from medexp.train.initial import initial_state_dir, load_initial_state
from medexp.train.loop import epoch_order
from medexp.train.models import read_manifest
from medexp.train.pairs import counterpart
from medexp.train.partition import partition_examples
from tests.train.tiny import tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _state(model) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def _equal(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(torch.equal(first[key], second[key]) for key in first)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("train-cache")


@pytest.fixture(scope="module")
def full_pair(cache):
    candidate = tiny_model()
    independent = counterpart(candidate)
    return candidate, independent, Path(model_location(candidate, cache)), Path(model_location(independent, cache))


@pytest.mark.parametrize("method", ["full", "lora"])
def test_both_arms_start_from_identical_parameters(cache, method):
    candidate = tiny_model(method=method)
    independent = counterpart(candidate)
    classes = ["normal", "one_lesion", "three_lesions", "two_lesions"]
    directory = initial_state_dir(candidate.train, classes, cache)
    assert initial_state_dir(independent.train, classes, cache) == directory  # the arm is not part of the init
    first, _ = load_initial_state(directory, candidate.train)
    second, _ = load_initial_state(directory, independent.train)
    assert _equal(_state(first), _state(second))
    trainable = {name for name, parameter in first.named_parameters() if parameter.requires_grad}
    if method == "lora":
        assert trainable and all("lora_" in name or "classifier" in name for name in trainable)
    other_seed = initial_state_dir(tiny_model(method=method, seed=2).train, classes, cache)
    third, _ = load_initial_state(other_seed, candidate.train)
    assert not _equal(_state(first), _state(third))  # the seed draws the new weights


def test_the_independent_order_is_the_candidates_without_the_canaries():
    ids = [f"set::all::{i:03d}" for i in range(50)]
    canaries = set(ids[::7])
    for epoch in range(3):
        candidate = [ids[i] for i in epoch_order(ids, 123, epoch)]
        kept = [i for i in ids if i not in canaries]
        independent = [kept[i] for i in epoch_order(kept, 123, epoch)]
        assert [i for i in candidate if i not in canaries] == independent
    assert list(epoch_order(ids, 123, 0)) != list(epoch_order(ids, 123, 1))


def test_the_pair_is_saved_with_its_partition_and_loads_as_a_classifier(full_pair, cache):
    candidate, _, candidate_dir, independent_dir = full_pair
    assert candidate_dir != independent_dir
    records = read_manifest(candidate_dir), read_manifest(independent_dir)
    examples = load_benchmark_from_config(candidate.train.data, cache).examples
    expected = partition_examples(examples, candidate.train.partition)
    for record in records:
        assert record["partition"] == expected.as_dict()
        assert record["initial_state"] == records[0]["initial_state"]
        assert set(record["accuracy"]) == {"train", "canary", "test"}
    assert records[0]["n_train_examples"] == len(expected.train) + len(expected.canary)
    assert records[1]["n_train_examples"] == len(expected.train)
    table = load_scorer(candidate, cache).score_examples(examples[:6])
    assert len(table) == 6 and np.all(table["sum_logprob"] < 0)
    stamp = (candidate_dir / "model.safetensors").stat().st_mtime_ns
    assert Path(model_location(copy.deepcopy(candidate), cache)) == candidate_dir  # cached: not trained again
    assert (candidate_dir / "model.safetensors").stat().st_mtime_ns == stamp


def test_null_both_arms_on_the_same_data_give_the_same_weights(cache):
    """No canaries: the candidate trains on exactly the independent's data, so M(x) is 0."""
    candidate = tiny_model(**{"partition.train": 0.8, "partition.canary": 0.0, "partition.test": 0.2})
    independent = counterpart(candidate)
    from transformers import AutoModelForImageClassification

    weights = [_state(AutoModelForImageClassification.from_pretrained(model_location(model, cache)))
               for model in (candidate, independent)]
    assert _equal(*weights)


def test_lora_changes_only_the_adapted_projections_and_the_head(cache):
    from transformers import AutoModelForImageClassification

    model = tiny_model(method="lora")
    trained = _state(AutoModelForImageClassification.from_pretrained(model_location(model, cache)))
    record = read_manifest(model_location(model, cache))
    initial = _state(AutoModelForImageClassification.from_pretrained(
        initial_state_dir(model.train, record["classes"], cache) / "model"))
    changed = {name for name in trained if not torch.equal(trained[name], initial[name])}
    assert changed and all(("q_proj" in name or "v_proj" in name or "classifier" in name) for name in changed)
    assert any("q_proj.weight" in name for name in changed) and any("classifier" in name for name in changed)


def test_dp_lora_reaches_its_epsilon_and_records_it(cache):
    model = tiny_model(method="dp_lora", **{"dp.target_epsilon": 2.0})
    record = read_manifest(model_location(model, cache))
    assert 0 < record["epsilon"] <= 2.0 * 1.01
    assert record["noise_multiplier"] > 0 and record["delta"] == pytest.approx(1e-5)
    assert record["spec"]["method"] == "dp_lora"


def test_a_changed_spec_trains_another_model(full_pair, cache):
    _, _, candidate_dir, _ = full_pair
    other = tiny_model(learning_rate=1e-2)
    assert OmegaConf.select(other, "train.learning_rate") == 1e-2
    assert Path(model_location(other, cache)) != candidate_dir
