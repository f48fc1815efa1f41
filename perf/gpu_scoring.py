"""Teacher-forced scoring throughput of a full-size VLM on a GPU, with and without shared prefixes.

A plain script (not a test): builds Qwen2.5-VL-7B-Instruct's architecture from its published
config values with random weights in bfloat16 on CUDA (no hub access, no checkpoint on disk),
a byte-level BPE tokenizer and the real Qwen2.5-VL processor built offline, and scores a
SLAKE-shaped set (``--images`` synthetic 512 x 512 scans x ``--questions`` questions each, as
SLAKE's test split asks about eleven per image) through medexp's Qwen2.5-VL scorer, once with
``shared_prefix`` off and once on. It prints one JSON object: examples/s, tokens/s, achieved
TFLOP/s (2 x matmul parameters x tokens / time) and its fraction of a bf16 8192^3 matmul timed
in the same run, peak GPU memory, the token counts and the largest score difference between the
two paths. Random weights give the real compute of the shapes, not meaningful scores.

Needs torch, transformers 5.x, numpy, pandas, Pillow, tokenizers (transformers' own), and, because
importing medexp's scorer imports ``medexp.config.schemas``: omegaconf and hydra-core (with
antlr4-python3-runtime, attrs and PyYAML). The lent GPU machine (checked 2026-11-26: Python
3.12.3, torch 2.11.0+cu130, transformers 5.17.0, torchvision 0.26.0) has no omegaconf or hydra
and no network: copy the pure-Python packages from this machine's venv into an ignored folder,
carry it, and put it on the path::

    SP=$(.venv/bin/python -c "import omegaconf, os; print(os.path.dirname(os.path.dirname(omegaconf.__file__)))")
    mkdir -p outputs/gpu_deps && for p in omegaconf hydra antlr4 attr; do cp -r $SP/$p outputs/gpu_deps/; done
    # on the GPU machine (carry outputs/gpu_deps):
    PYTHONPATH=.:outputs/gpu_deps python perf/gpu_scoring.py

Also torchvision (the build matching torch): transformers' Qwen2.5-VL processor requires a video
processor, and that needs it; the script stops with that message when it is missing. Checked on
a CPU with transformers 5.23.0 and 5.17.0 (``--tiny``).

    python perf/gpu_scoring.py                 # 7B shape, bf16, CUDA
    python perf/gpu_scoring.py --tiny          # a tiny config: checks the script on a CPU
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

# Qwen2.5-VL-7B-Instruct's config.json, as published.
QWEN25_VL_7B_TEXT = {
    "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
    "num_key_value_heads": 4, "max_position_embeddings": 128000, "rms_norm_eps": 1e-6, "vocab_size": 152064,
    "tie_word_embeddings": False, "hidden_act": "silu",
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]},
}
QWEN25_VL_7B_VISION = {
    "depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "in_chans": 3,
    "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
    "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2, "hidden_act": "silu",
}
# The same structure at toy sizes, to check the script on a CPU.
TINY_TEXT = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    "hidden_act": "silu",
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
}
TINY_VISION = {**QWEN25_VL_7B_VISION, "depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4,
               "out_hidden_size": 64, "fullatt_block_indexes": [1]}

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]
# Qwen2.5-VL's chat template, reduced to what scoring uses (system turn, image, text, generation prompt).
QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# SLAKE-style questions and answers (eleven per image, as in SLAKE's English test split).
QUESTIONS = [
    ("What modality is used to take this image?", "MRI"),
    ("Which part of the body does this image belong to?", "Brain"),
    ("Does the picture contain liver?", "No"),
    ("What is the largest organ in the picture?", "Brain"),
    ("Is this a T1 weighted image?", "Yes"),
    ("Where is the abnormality located?", "Left temporal lobe"),
    ("How many kidneys are shown in this image?", "0"),
    ("Which organ appears abnormal in this image?", "Brain"),
    ("Is the lung healthy?", "Yes"),
    ("What diseases are included in the picture?", "Brain tumor, brain edema"),
    ("In what plane is this image scanned?", "Transverse plane"),
    ("What is the shape of the abnormality on the left?", "Irregular"),
]


def build_processor():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor
    from transformers.utils import is_torchvision_available

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    corpus = [text for pair in QUESTIONS for text in pair] + ["system user assistant You are a helpful assistant."]
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=1000, special_tokens=QWEN_SPECIALS,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                        extra_special_tokens={"image_token": "<|image_pad|>",
                                                              "video_token": "<|video_pad|>"})
    if not is_torchvision_available():
        raise SystemExit("torchvision is missing: transformers' Qwen2.5-VL processor requires its video processor, "
                         "which needs torchvision (the build matching this torch)")
    # The published preprocessor: 14 px patches merged 2 x 2, CLIP normalisation, default pixel bounds.
    image_processor = Qwen2VLImageProcessor(patch_size=14, merge_size=2, temporal_patch_size=2,
                                            image_mean=[0.48145466, 0.4578275, 0.40821073],
                                            image_std=[0.26862954, 0.26130258, 0.27577711])
    return Qwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                               video_processor=Qwen2VLVideoProcessor(), chat_template=QWEN_CHAT_TEMPLATE)


def build_config(processor, tiny: bool):
    from transformers import Qwen2_5_VLConfig

    tokenizer = processor.tokenizer
    text = dict(TINY_TEXT if tiny else QWEN25_VL_7B_TEXT)
    text["vocab_size"] = len(tokenizer) if tiny else text["vocab_size"]
    # The offline tokenizer's special tokens, in place of Qwen's ids (which it does not have).
    text.update(pad_token_id=tokenizer.pad_token_id, bos_token_id=None, eos_token_id=tokenizer.eos_token_id)
    return Qwen2_5_VLConfig(
        text_config=text, vision_config=TINY_VISION if tiny else QWEN25_VL_7B_VISION,
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
    )


def random_weight_scorer(processor, location: Path, settings: dict):
    """medexp's Qwen2.5-VL scorer over a model built in memory from the config in ``location``
    (random weights, already on the device): nothing but the config is written or read."""
    from transformers import AutoConfig, Qwen2_5_VLForConditionalGeneration

    from medexp.models.families import Qwen25VLScorer

    class RandomWeightsScorer(Qwen25VLScorer):
        def load(self, location, dtype, common):
            with torch.device(settings["device"]):
                model = Qwen2_5_VLForConditionalGeneration._from_config(AutoConfig.from_pretrained(location),
                                                                        dtype=dtype)
            return processor, model

    # The model settings HFScorer reads (a structured medexp config is not needed for them).
    cfg = SimpleNamespace(name="qwen2_5_vl_7b_random", family="qwen2_5_vl", revision=None, trust_remote_code=False,
                          device_map=None, prompt_template="{question}", use_chat_template=True, **settings)
    return RandomWeightsScorer(cfg, str(location))


def slake_shaped(directory: Path, images: int, questions: int, side: int):
    """``images`` synthetic greyscale scans (smoothed noise, as PNG files) x ``questions`` each."""
    from PIL import Image

    from medexp.benchmarks.base import Example

    rng = np.random.default_rng(0)
    examples = []
    for index in range(images):
        pixels = rng.normal(128, 40, size=(side // 8, side // 8)).clip(0, 255).astype(np.uint8)
        path = directory / f"scan{index}.png"
        Image.fromarray(pixels).resize((side, side), Image.BILINEAR).convert("RGB").save(path)
        for number in range(questions):
            question, answer = QUESTIONS[number % len(QUESTIONS)]
            examples.append(Example(f"slake_shaped::{index}.{number}", len(examples), path, question, answer))
    return examples


def image_token_count(processor, path: Path) -> int:
    from PIL import Image

    with Image.open(path) as image:
        encoded = processor(text=[processor.image_token], images=[[image.convert("RGB")]], return_tensors="pt")
    return int((encoded["input_ids"] == processor.image_token_id).sum())


def preprocessing_seconds(scorer, examples, batch_size: int) -> float:
    """CPU time of the processor over every example with its image: what both paths ran before a
    scoring call kept each image's processor output (the plain path twice per example with a token
    budget, the shared path once per example and once per prefix); on a GPU it could bound both
    paths' throughput."""
    from PIL import Image

    started = time.perf_counter()
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        images = []
        for example in batch:
            with Image.open(example.image) as image:
                images.append(image.convert("RGB"))
        scorer.processor_inputs([scorer.prompt(example) for example in batch], images)
    return time.perf_counter() - started


def matmul_peak(device: str, size: int, dtype) -> float:
    """FLOP/s of a size^3 matmul, best of several timed after a warm-up."""
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    best = float("inf")
    for repeat in range(6):
        synchronize(device)
        started = time.perf_counter()
        for _ in range(5):
            torch.matmul(a, b)
        synchronize(device)
        if repeat:  # the first round warms the kernels up
            best = min(best, (time.perf_counter() - started) / 5)
    return 2 * size**3 / best


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_parameters(model) -> int:
    """Parameters the language model multiplies each token by: its decoder layers and the output
    head (the embedding is a lookup; the vision tower runs on patches, not tokens)."""
    language = model.model.language_model
    decoder = sum(p.numel() for p in language.parameters()) - language.embed_tokens.weight.numel()
    return decoder + model.lm_head.weight.numel()


def timed_scoring(scorer, examples, shared: bool, device: str) -> tuple[float, object]:
    """(seconds, score table) of one scoring call on the given path, its token counts and the
    GPU's peak memory counted from zero."""
    from medexp.models.hf import TokenCounts

    scorer.shared_prefix, scorer.token_counts = shared, TokenCounts()
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    synchronize(device)
    started = time.perf_counter()
    table = scorer.score_examples(examples)
    synchronize(device)
    return time.perf_counter() - started, table


def run(scorer, examples, shared: bool, device: str, params: int, peak: float) -> tuple[dict, object]:
    seconds, table = timed_scoring(scorer, examples, shared, device)
    computed, naive = scorer.token_counts.computed, scorer.token_counts.naive
    flops = 2 * params * computed / seconds
    return {
        "seconds": seconds,
        "examples_per_s": len(examples) / seconds,
        "tokens_computed": computed,
        "tokens_naive": naive,
        "tokens_computed_per_s": computed / seconds,
        "tokens_naive_per_s": naive / seconds,
        # images through the image processor: each distinct one once on both paths, its questions being together
        "images_processed": scorer.token_counts.images_processed,
        "achieved_tflops": flops / 1e12,
        "fraction_of_matmul_peak": flops / peak,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None,
    }, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="toy sizes, float32, small images: check on a CPU")
    parser.add_argument("--images", type=int, default=None, help="distinct images (default 64; --tiny 4)")
    parser.add_argument("--questions", type=int, default=11, help="questions per image")
    parser.add_argument("--batch-size", type=int, default=16, help="model.batch_size")
    parser.add_argument("--token-budget", type=int, default=16384, help="model.token_budget (0: batch_size rows)")
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    args = parser.parse_args()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = "float32" if args.tiny else "bfloat16"
    images = args.images or (4 if args.tiny else 64)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        processor = build_processor()
        build_config(processor, args.tiny).save_pretrained(scratch / "model")
        settings = {"device": device, "dtype": dtype, "batch_size": args.batch_size,
                    "token_budget": args.token_budget or None, "shared_prefix": True}
        started = time.perf_counter()
        scorer = random_weight_scorer(processor, scratch / "model", settings)
        build_s = time.perf_counter() - started
        examples = slake_shaped(scratch, images, args.questions, 224 if args.tiny else 512)
        image_tokens = image_token_count(processor, examples[0].image)
        peak = matmul_peak(device, 1024 if args.tiny else 8192, getattr(torch, dtype))
        params = matmul_parameters(scorer.model)
        warm = examples[: 2 * args.questions]
        for shared in (False, True):  # kernels, allocator and autotuning warmed up in both paths
            run(scorer, warm, shared, device, params, peak)
        processor_s = preprocessing_seconds(scorer, examples, args.batch_size)
        plain, plain_table = run(scorer, examples, False, device, params, peak)
        shared, shared_table = run(scorer, examples, True, device, params, peak)
    difference = np.abs(plain_table["sum_logprob"].to_numpy() - shared_table["sum_logprob"].to_numpy())
    print(json.dumps({
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "model": f"{'tiny Qwen2.5-VL' if args.tiny else 'Qwen2.5-VL-7B-Instruct'} shape, random weights, {dtype}",
        "parameters": sum(p.numel() for p in scorer.model.parameters()),
        "matmul_parameters": params,
        "build_s": build_s,
        "examples": len(examples),
        "images": images,
        "image_tokens_per_image": image_tokens,
        "batch_size": args.batch_size,
        "token_budget": args.token_budget or None,
        "matmul_peak_tflops": peak / 1e12,
        "processor_s_all_examples": processor_s,
        "plain": plain,
        "shared_prefix": shared,
        "time_ratio": plain["seconds"] / shared["seconds"],
        "tokens_ratio": shared["tokens_naive"] / shared["tokens_computed"],
        "max_abs_sum_logprob_difference": float(difference.max()),
        "flops_note": "2 x (decoder + output-head parameters) x tokens computed; attention scores and the vision "
                      "tower are not counted",
    }, indent=2))


if __name__ == "__main__":
    main()
