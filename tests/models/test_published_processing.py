"""Each audited family under its published processing (issue 41): for a 512 x 512 image and a
SLAKE question, the prompt the adapter writes, the image tokens the processor expands it to and
the answer tokens scored after it.

The checkpoints are tiny random-weight models built with the published processor settings and
chat templates (medexp/models/published, sources in its SOURCES.md) and the model YAMLs of
conf/model; only the vocabulary (trained here, with the real special tokens) and the widths are
small. Every expected prompt is written out from the published template, and every image-token
count is computed here from the published settings with the processor's documented rule; none is
read back from the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from medexp.benchmarks.base import Example
from medexp.config import compose
from medexp.models import scorer_class
from medexp.models.hf import _append_answers
from medexp.models.published import internvl_tiles
from tests.manual_scoring import assert_rows_close, rows
from tests.models import tiny
from tests.models import tiny_blip as tb

QUESTION = "What modality is used to take this image?"  # a SLAKE-En test question
ANSWER = "CT"
SIDE = 512


def write_image(path, width: int, height: int):
    pixels = np.random.default_rng(41).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    path = write_image(tmp_path_factory.mktemp("published") / "scan.png", SIDE, SIDE)
    return Example("slake_en::test::0", 0, path, QUESTION, ANSWER)


def yaml_scorer(config_name: str, directory, *overrides: str):
    """The adapter of conf/model/<config_name>.yaml (its prompt template and chat-template switch)
    over a tiny checkpoint, in float32 on the CPU."""
    cfg = compose([f"model={config_name}", "model.device=cpu", "model.dtype=float32", "model.batch_size=1",
                   *overrides]).model
    return scorer_class(cfg.family)(cfg, str(directory))


def model_input(scorer, example: Example):
    """The tokens the model receives for the example (prompt as the processor expands it, then the
    gold answer) and the mask of the scored answer tokens."""
    item = scorer._prepare(example)
    encoded = scorer._encode([item])
    inputs, answer_mask = _append_answers(encoded, [item.answer_ids], scorer.pad_id, scorer.SEQUENCE_KEYS)
    return inputs["input_ids"][0], answer_mask[0], encoded


def check_published(scorer, example: Example, prompt: str, expanded: str, image_token: str, image_tokens: int):
    """The adapter's prompt is ``prompt``; the model receives ``expanded`` (the processor's image
    expansion of it) followed by exactly the gold answer, which is the scored span; the scores
    come out of the model."""
    assert scorer.prompt(example) == prompt
    ids, answer_mask, _ = model_input(scorer, example)
    token_id = scorer.tokenizer.convert_tokens_to_ids(image_token)
    assert int((ids == token_id).sum()) == image_tokens
    assert scorer.tokenizer.decode(ids[~answer_mask]) == expanded
    assert scorer.tokenizer.decode(ids[answer_mask]).strip() == ANSWER
    row = scorer.score_examples([example]).iloc[0]
    assert row["n_answer_tokens"] == int(answer_mask.sum()) and not row["boundary_merged"]
    assert np.isfinite(row["token_logprobs"]).all() and row["sum_logprob"] < 0


# ---------------------------------------------------------------------------- the processors' rules


def qwen_image_tokens(height: int, width: int, config: dict) -> int:
    """Qwen2.5-VL (model card, "Image Resolution"): each side is rounded to a multiple of
    patch x merge (28 px), the pixel count kept within min_pixels..max_pixels, and every 2 x 2
    block of 14 px patches becomes one token."""
    factor = config["patch_size"] * config["merge_size"]
    resized_h, resized_w = round(height / factor) * factor, round(width / factor) * factor
    assert config["min_pixels"] <= resized_h * resized_w <= config["max_pixels"]  # no rescaling for these sizes
    patches = (resized_h // config["patch_size"]) * (resized_w // config["patch_size"])
    return patches // config["merge_size"] ** 2


def anyres_image_tokens(height: int, width: int, settings: dict) -> int:
    """LLaVA-OneVision's any-resolution rule: the base 384 px tile (729 tokens), plus the grid of
    tiles whose pinpoint keeps most of the image's pixels when the image is fitted into it (ties:
    the least wasted area), with the padding rows or columns of the fit removed, one newline token
    per feature row, and the grid pooled down when it exceeds anyres_max_9 tiles by over 10%."""
    tile = settings["preprocessor_config"]["size"]["height"]
    per_side = settings["vision_config"]["image_size"] // settings["vision_config"]["patch_size"]
    base = settings["processor_config"]["num_image_tokens"]
    assert base == per_side**2

    def fit(pinpoint):
        pin_h, pin_w = pinpoint
        scale = min(pin_w / width, pin_h / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        return kept, -(pin_h * pin_w - kept)

    pin_h, pin_w = max(settings["preprocessor_config"]["image_grid_pinpoints"], key=fit)
    rows, cols = per_side * pin_h // tile, per_side * pin_w // tile
    if width / height > cols / rows:
        rows -= 2 * ((rows - int(round(height * cols / width, 7))) // 2)
    else:
        cols -= 2 * ((cols - int(round(width * rows / height, 7))) // 2)
    max_tiles = int(settings["processor_config"]["vision_aspect_ratio"].removeprefix("anyres_max_"))
    ratio = math.sqrt(rows * cols / (max_tiles * per_side**2))
    if ratio > 1.1:
        rows, cols = int(rows // ratio), int(cols // ratio)
    return base + rows * cols + rows


def test_hand_rules_give_the_counts_worked_out_on_paper():
    """The rules above, checked against arithmetic done by hand for a 512 x 512 image."""
    # Qwen2.5-VL: 512 / 28 = 18.3 -> 18 x 28 = 504 px a side; 504 / 14 = 36 patches; 36 x 36 / 4.
    assert qwen_image_tokens(SIDE, SIDE, tiny.published_settings("qwen2_5_vl")["preprocessor_config"]) == 324
    # LLaVA-OneVision: 768 x 768 keeps all 512^2 pixels with the least waste -> 2 x 2 tiles of
    # 27 x 27 features = 54 x 54, same aspect ratio (no unpadding), 4 tiles <= 9: 729 + 54^2 + 54.
    assert anyres_image_tokens(SIDE, SIDE, tiny.published_settings("llava_onevision")) == 3699
    # InternVL: 1:1 ties with 2 x 2 and 3 x 3, but 512^2 < half of 4 x 448^2 -> one tile, no thumbnail.
    config = tiny.published_settings("internvl")["preprocessor_config"]
    assert internvl_tiles(config, SIDE, SIDE) == 1
    # 1024 x 512 (width x height): 2:1 is the 2 x 1 grid exactly; 4 x 2 would be 8 tiles, over
    # twice the image -> 2 tiles plus the thumbnail.
    assert internvl_tiles(config, 512, 1024) == 3


# ---------------------------------------------------------------------------- chat-template families


@pytest.fixture(scope="module")
def published_checkpoint(tiny_checkpoint):
    return lambda family: tiny_checkpoint(f"{family}_published")


def test_qwen2_5_vl(published_checkpoint, example):
    settings = tiny.published_settings("qwen2_5_vl")
    scorer = yaml_scorer("qwen2_5_vl", published_checkpoint("qwen2_5_vl"))
    tokens = qwen_image_tokens(SIDE, SIDE, settings["preprocessor_config"])
    head = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<|vision_start|>"
    tail = f"<|vision_end|>{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    check_published(scorer, example, head + "<|image_pad|>" + tail, head + "<|image_pad|>" * tokens + tail,
                    "<|image_pad|>", tokens)
    # The processor's patch grid is the resized image's: 504 / 14 = 36 patches a side.
    assert model_input(scorer, example)[2]["image_grid_thw"].tolist() == [[1, 36, 36]]


def test_llava_onevision(published_checkpoint, example):
    settings = tiny.published_settings("llava_onevision")
    scorer = yaml_scorer("llava_onevision", published_checkpoint("llava_onevision"))
    tokens = anyres_image_tokens(SIDE, SIDE, settings)
    # No system turn: the llava-hf template writes only the turns it is given.
    prompt = f"<|im_start|>user\n<image>\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    check_published(scorer, example, prompt, prompt.replace("<image>", "<image>" * tokens), "<image>", tokens)


@pytest.mark.parametrize("width", [SIDE, 2 * SIDE])
def test_internvl(published_checkpoint, tmp_path, width):
    settings = tiny.published_settings("internvl")
    scorer = yaml_scorer("internvl3", published_checkpoint("internvl"))
    image = write_image(tmp_path / "scan.png", width, SIDE)
    example = Example("slake_en::test::0", 0, image, QUESTION, ANSWER)
    tokens = internvl_tiles(settings["preprocessor_config"], SIDE, width) * settings["processor_config"]["image_seq_length"]
    prompt = f"<|im_start|>user\n<IMG_CONTEXT>\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    expanded = prompt.replace("<IMG_CONTEXT>", "<img>" + "<IMG_CONTEXT>" * tokens + "</img>")
    check_published(scorer, example, prompt, expanded, "<IMG_CONTEXT>", tokens)


def test_gemma3_medgemma(published_checkpoint, example):
    settings = tiny.published_settings("gemma3")
    assert not settings["preprocessor_config"]["do_pan_and_scan"]  # published off: one crop, one image
    scorer = yaml_scorer("medgemma", published_checkpoint("gemma3"))
    tokens = settings["processor_config"]["image_seq_length"]
    prompt = f"<bos><start_of_turn>user\n<start_of_image>{QUESTION}<end_of_turn>\n<start_of_turn>model\n"
    # Gemma 3's processor writes each image as blank lines around <start_of_image>, its soft
    # tokens and <end_of_image>.
    image = "\n\n<start_of_image>" + "<image_soft_token>" * tokens + "<end_of_image>\n\n"
    check_published(scorer, example, prompt, prompt.replace("<start_of_image>", image), "<image_soft_token>", tokens)


@pytest.mark.parametrize("config_name,family", [("qwen2_5_vl", "qwen2_5_vl"), ("llava_onevision", "llava_onevision"),
                                                ("internvl3", "internvl"), ("medgemma", "gemma3")])
def test_shared_prefix_scores_equal_whole_inputs(published_checkpoint, example, config_name, family):
    """Two SLAKE questions on one image, scored from their shared prefix (the YAMLs' default) and
    each whole: the same scores under the published image layouts (Qwen's multimodal positions
    over 324 image tokens, LLaVA-OneVision's 3699 with row newlines, Gemma's bidirectional image
    block), with fewer tokens computed."""
    second = Example("slake_en::test::1", 1, example.image, "Which organ is shown in this image?", "Brain")
    shared = yaml_scorer(config_name, published_checkpoint(family))
    whole = yaml_scorer(config_name, published_checkpoint(family), "model.shared_prefix=false")
    assert shared.shared_prefix and not whole.shared_prefix
    for a, b in zip(rows(shared.score_examples([example, second])), rows(whole.score_examples([example, second]))):
        assert_rows_close(a, b, atol=1e-4)
    assert shared.token_counts.computed < whole.token_counts.computed == whole.token_counts.naive


# ---------------------------------------------------------------------------- Q-Former families


@pytest.fixture(scope="module")
def qformer_checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("published_qformer")
    return {
        "blip2": tb.build_blip2(root / "blip2", published="blip2"),
        "instructblip": tb.build_instructblip(root / "instructblip", published=True),
        # CheXagent's processor is remote code that was not found: a transformers-format BLIP-2
        # stand-in with its published image size and query count writes the queries into input_ids.
        "chexagent": tb.build_blip2(root / "chexagent", language_model="mistral", published="chexagent"),
    }


@pytest.mark.parametrize("config_name,bos,queries,prompt", [
    ("blip2", "</s>", 32, f"Question: {QUESTION} Answer:"),
    ("instructblip", "<s>", 32, f"Question: {QUESTION} Short answer:"),
    ("chexagent", "<s>", 128, f" USER: <s>{QUESTION} ASSISTANT: <s>"),
])
def test_qformer_families(qformer_checkpoints, example, monkeypatch, config_name, bos, queries, prompt):
    settings = tiny.published_settings(config_name)
    published_queries = settings.get("processor_config", settings.get("config"))["num_query_tokens"]
    assert published_queries == queries
    scorer = yaml_scorer(config_name, qformer_checkpoints[config_name])
    # transformers' BLIP processors put one <image> placeholder per query before the tokenizer's BOS.
    check_published(scorer, example, prompt, "<image>" * queries + bos + prompt, "<image>", queries)
    tb.check_answer_span(scorer, [example], monkeypatch)
