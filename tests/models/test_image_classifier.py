"""The image_classifier family on tiny random-weight ViT and ResNet classifiers built from
config, saved with save_pretrained and loaded back by the adapter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from medexp.benchmarks.base import Example
from medexp.demo.scans import ScanSpec, png_bytes, render_scan
from medexp.models import scorer_class
from tests.models.conftest import model_config

LABELS = ("effusion", "normal", "nodule")


def _examples(root: Path) -> list[Example]:
    root.mkdir(parents=True, exist_ok=True)
    examples = []
    for index in range(7):
        spec = ScanSpec(("CT", "MRI", "X-Ray")[index % 3], ("lung", "liver", "heart")[index % 3],
                        lesion=index % 2 == 1, lesion_side="left" if index % 2 else None, lesion_count=index % 2,
                        seed=index)
        path = root / f"scan{index}.png"
        path.write_bytes(png_bytes(render_scan(spec, size=40 + 8 * index)))  # sizes differ: the processor resizes
        examples.append(Example(f"cls::test::{index}", index, path, "", LABELS[index % 3]))
    return examples


def _labels() -> dict:
    return {"num_labels": len(LABELS), "id2label": dict(enumerate(LABELS)),
            "label2id": {label: index for index, label in enumerate(LABELS)}}


def _save(model, processor, directory: Path, modules) -> Path:
    with torch.no_grad():
        # Default init gives near-uniform predictions; larger weights make mistakes visible (not
        # so large that the softmax saturates and the classes' spread vanishes).
        for module in modules:
            for parameter in module.parameters():
                if parameter.dim() >= 2:
                    parameter.normal_(0.0, 0.3)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from transformers import (
        ConvNextImageProcessor,
        ResNetConfig,
        ResNetForImageClassification,
        ViTConfig,
        ViTForImageClassification,
        ViTImageProcessor,
    )

    root = tmp_path_factory.mktemp("classifiers")
    torch.manual_seed(0)
    vit = ViTForImageClassification(ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                                              num_attention_heads=4, intermediate_size=64, **_labels()))
    resnet = ResNetForImageClassification(ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                                       layer_type="basic", **_labels()))
    return {
        "vit": _save(vit, ViTImageProcessor(size={"height": 32, "width": 32}), root / "vit", [vit]),
        "resnet": _save(resnet, ConvNextImageProcessor(size={"shortest_edge": 32}, crop_pct=1.0), root / "resnet",
                        [resnet.classifier]),
        "examples": _examples(root / "images"),
    }


def _manual(directory: Path, examples: list[Example]):
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    processor = AutoImageProcessor.from_pretrained(directory)
    model = AutoModelForImageClassification.from_pretrained(directory).eval()
    values, zs = [], []
    for example in examples:
        with Image.open(example.image) as image:
            pixels = processor(images=[image.convert("RGB")], return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            log_probs = torch.log_softmax(model(pixel_values=pixels).logits[0].double(), -1)
        target = LABELS.index(example.answer)
        p = log_probs.exp()
        mu = float((p * log_probs).sum())
        sigma = float(np.sqrt((p * log_probs**2).sum() - mu**2))
        values.append(float(log_probs[target]))
        zs.append((float(log_probs[target]) - mu) / sigma)
    return np.array(values), np.array(zs)


@pytest.mark.parametrize("architecture", ["vit", "resnet"])
def test_label_logprob_and_z_match_a_manual_forward_pass(checkpoints, architecture):
    examples = checkpoints["examples"]
    scorer = scorer_class("image_classifier")(model_config("image_classifier", batch_size=3), str(checkpoints[architecture]))
    table = scorer.score_examples(examples)
    expected, expected_z = _manual(checkpoints[architecture], examples)
    assert table["example_id"].tolist() == [ex.example_id for ex in examples]
    assert table["n_answer_tokens"].tolist() == [1] * len(examples)
    assert np.allclose(table["sum_logprob"], expected, atol=1e-5)
    assert np.allclose(table["mean_logprob"], expected, atol=1e-5)
    assert np.allclose([row[0] for row in table["token_logprobs"]], expected, atol=1e-5)
    assert np.allclose([row[0] for row in table["token_minkpp_z"]], expected_z, atol=1e-4)
    assert expected.std() > 0.05  # the guard: predictions depend on the image
    assert not table["boundary_merged"].any()


def test_batches_do_not_change_scores(checkpoints):
    examples = checkpoints["examples"]
    one = scorer_class("image_classifier")(model_config("image_classifier", batch_size=1), str(checkpoints["vit"]))
    many = scorer_class("image_classifier")(model_config("image_classifier", batch_size=5), str(checkpoints["vit"]))
    assert np.allclose(one.score_examples(examples)["sum_logprob"], many.score_examples(examples)["sum_logprob"],
                       atol=1e-6)


def test_unknown_labels_and_text_scoring_fail_clearly(checkpoints):
    scorer = scorer_class("image_classifier")(model_config("image_classifier"), str(checkpoints["vit"]))
    stranger = Example("cls::test::x", 0, checkpoints["examples"][0].image, "", "pneumothorax")
    with pytest.raises(ValueError, match="'pneumothorax' is not a label .*effusion"):
        scorer.score_examples([stranger])
    with pytest.raises(ValueError, match="needs an image"):
        scorer.score_examples([Example("cls::test::y", 0, None, "", "normal")])
    with pytest.raises(ValueError, match="image classifier.*exch"):
        scorer.score_texts(["some text"], 64, 32, 1)
