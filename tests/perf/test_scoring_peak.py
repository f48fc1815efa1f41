"""Teacher-forced scoring of a mid-size model of a real architecture against this machine's matmul
peak, measured in the same run (``python -m pytest -m perf tests/perf/test_scoring_peak.py -s``).

The model is Qwen2.5-VL with the decoder of Qwen2.5-0.5B (24 layers, hidden 896, 151,936-token
vocabulary, 358 M non-embedding parameters) and a small vision tower, random weights built from
its transformers config, a byte-level BPE trained on the fly like the tiny test checkpoints. It
scores SLAKE-shaped examples (a 224-280 px scan, a short question and answer) through the real
scorer path, ``HFScorer.score_examples``.

Useful work, in FLOPs: 2 x (N_decoder x LM tokens + N_vision x image patches + N_head x answer
tokens), with N_decoder the decoder's non-embedding parameters (layers and final norm), N_vision
the vision tower's, N_head the vocabulary projection's, LM tokens the real tokens of every input
(padding excluded) and answer tokens the ones scored. Attention scores (4 x layers x length x
hidden per token, 1.5% more at these lengths) are not counted. The machine's peak is the best
FLOP/s (2 n^3 / t) of torch.matmul of large square matrices, fp32 and bf16, with torch's threads
and with one.
Nothing here asserts wall time: the scores of each variant are checked against the plain path,
the rates and fractions go to extra_info and are printed.
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.perf

N_EXAMPLES = 16
BATCH_SIZE = 8
ROUNDS = 3
IMAGE_SIZES = [(224, 224), (280, 224), (224, 252), (252, 252)]  # 64 to 81 image tokens each


def _build_midsize(out_dir: Path) -> Path:
    """Qwen2.5-VL with Qwen2.5-0.5B's decoder (tied embeddings) and a 4-layer vision tower of the
    real patch geometry (14 px patches, 2 x 2 merge), saved with save_pretrained."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    from tests.models import tiny

    tokenizer = tiny.train_tokenizer(tiny.QWEN_SPECIALS, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                     extra_special_tokens={"image_token": "<|image_pad|>",
                                                           "video_token": "<|video_pad|>"})
    sizes = {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2, "min_pixels": 56 * 56,
             "max_pixels": 448 * 448, "size": {"shortest_edge": 56 * 56, "longest_edge": 448 * 448}}
    processor = Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(**sizes), tokenizer=tokenizer,
                                    video_processor=Qwen2VLVideoProcessor(**sizes),
                                    chat_template=tiny.QWEN_CHAT_TEMPLATE)
    decoder = {"vocab_size": 151_936, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
               "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32_768,
               "tie_word_embeddings": True, "pad_token_id": tokenizer.pad_token_id,
               # head_dim 64: the rotary sections cover its 32 frequencies (t, h, w).
               "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [8, 12, 12]}}
    config = Qwen2_5_VLConfig(
        text_config=decoder,
        tie_word_embeddings=True,
        vision_config={"depth": 4, "hidden_size": 256, "intermediate_size": 1024, "num_heads": 4,
                       "out_hidden_size": 896, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "window_size": 112, "fullatt_block_indexes": [3]},
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
    )
    torch.manual_seed(0)
    Qwen2_5_VLForConditionalGeneration(config).save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir


@pytest.fixture(scope="module")
def midsize(tmp_path_factory):
    """(checkpoint directory, examples): SLAKE-shaped image questions of several image sizes."""
    from PIL import Image

    from medexp.benchmarks.base import Example
    from medexp.demo.scans import png_bytes, render_scan
    from tests.models import tiny

    root = tmp_path_factory.mktemp("midsize")
    examples = []
    for i in range(N_EXAMPLES):
        question, answer, spec, _ = tiny.IMAGE_QA[i % len(tiny.IMAGE_QA)]
        path = root / f"scan{i}.png"
        path.write_bytes(png_bytes(render_scan(spec, size=224).resize(IMAGE_SIZES[i % len(IMAGE_SIZES)],
                                                                      Image.BILINEAR)))
        examples.append(Example(f"midsize::test::{i}", i, path, question, answer))
    return _build_midsize(root / "qwen2_5_vl_0.5b"), examples


def _scorer(directory: Path, **settings):
    from omegaconf import OmegaConf

    from medexp.config.schemas import ModelConfig
    from medexp.models import scorer_class

    cfg = {"name": "midsize_qwen2_5_vl", "family": "qwen2_5_vl", "device": "cpu", "batch_size": BATCH_SIZE,
           **settings}
    return scorer_class("qwen2_5_vl")(OmegaConf.structured(ModelConfig(**cfg)), str(directory))


def matmul_peak(dtype, n: int = 2048, rounds: int = 5) -> float:
    """Best FLOP/s of torch.matmul of two n x n matrices (2 n^3 FLOPs) over ``rounds``."""
    import torch

    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    torch.matmul(a, b)  # the first call sets up the kernel
    fastest = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        torch.matmul(a, b)
        fastest = min(fastest, time.perf_counter() - started)
    return 2 * n**3 / fastest


def useful_flops(scorer, examples) -> tuple[float, int]:
    """The FLOPs of the formula in the module docstring, and the LM tokens, of scoring ``examples``."""
    from medexp.benchmarks.images import read_image

    model = scorer.model
    decoder = model.model.language_model
    n_decoder = sum(p.numel() for p in decoder.parameters()) - decoder.embed_tokens.weight.numel()
    n_vision = sum(p.numel() for p in model.model.visual.parameters())
    n_head = model.lm_head.weight.numel()
    tokens = patches = answers = 0
    for example in examples:
        prompt = scorer.prompt(example)
        answer_ids, _ = scorer.answer_ids(prompt, example.answer)
        encoded = scorer.processor_inputs([prompt], [read_image(example.image, "RGB")])
        tokens += int(encoded["attention_mask"].sum()) + len(answer_ids)
        patches += int(encoded["image_grid_thw"].prod(dim=-1).sum())
        answers += len(answer_ids)
    return 2.0 * (n_decoder * tokens + n_vision * patches + n_head * answers), tokens


@contextmanager
def _every_position_projected(scorer):
    """The path before answer-only projection: the model ignores logits_to_keep and projects every
    position (prompt, image and padding included) onto the vocabulary."""
    forward = scorer.model.forward
    scorer.model.forward = lambda *args, logits_to_keep=0, **kwargs: forward(*args, **kwargs)
    yield
    del scorer.model.forward  # the class's forward again


@contextmanager
def _eager_attention(scorer):
    scorer.model.set_attn_implementation("eager")
    yield
    scorer.model.set_attn_implementation("sdpa")


@contextmanager
def _settings(scorer, **settings):
    """The scorer with other batching settings (read at each score_examples call)."""
    previous = {key: scorer.cfg[key] for key in settings}
    scorer.cfg.update(settings)
    yield
    scorer.cfg.update(previous)


def test_scoring_throughput_as_a_fraction_of_the_matmul_peak(benchmark, midsize):
    """Examples/s, tokens/s and achieved FLOP/s of a mid-size VLM's teacher-forced scoring, as a
    fraction of the fp32 and bf16 matmul peaks measured in the same rounds (the best over torch's
    default threads and one thread), for: every position projected onto the vocabulary (before),
    answer positions only (after), then one torch thread, bf16 weights, eager instead of SDPA
    attention, another batch shape and a token budget. Rates are of each variant's fastest round."""
    import torch

    directory, examples = midsize
    scorers = {"fp32": _scorer(directory), "bf16": _scorer(directory, dtype="bfloat16")}
    all_threads = torch.get_num_threads()
    # Variant -> (dtype of its scorer, torch threads, what it changes while it scores).
    variants = {
        "fp32, every position projected (before)": ("fp32", all_threads, _every_position_projected),
        "fp32, answer positions projected": ("fp32", all_threads, nullcontext),
        "fp32, answer positions, 1 thread": ("fp32", 1, nullcontext),
        "bf16, answer positions": ("bf16", all_threads, nullcontext),
        "bf16, answer positions, 1 thread": ("bf16", 1, nullcontext),
        "bf16, 1 thread, eager attention": ("bf16", 1, _eager_attention),
        f"bf16, 1 thread, batches of {N_EXAMPLES}": ("bf16", 1, partial(_settings, batch_size=N_EXAMPLES)),
        "bf16, 1 thread, token budget 1,000": ("bf16", 1, partial(_settings, token_budget=1000)),
    }
    shapes: list[tuple[int, int]] = []
    for scorer in scorers.values():
        forward = scorer.answer_logits
        scorer.answer_logits = lambda inputs, mask, forward=forward: (shapes.append(tuple(inputs["input_ids"].shape))
                                                                      or forward(inputs, mask))
    flops, tokens = useful_flops(scorers["fp32"], examples)
    # (dtype, threads) -> best matmul FLOP/s; the machine's peak of a dtype is its best over threads.
    peaks = {(dtype, threads): 0.0 for dtype in ("fp32", "bf16") for threads in {all_threads, 1}}
    times: dict[str, list[float]] = {name: [] for name in variants}
    # Per round: each variant's achieved FLOP/s over its dtype's peak measured in that round, a
    # ratio that holds up when other work on the machine comes and goes between rounds.
    fractions: dict[str, list[float]] = {name: [] for name in variants}
    padded, frames = {}, {}

    def one_round():
        # Every variant and every peak in each round, so that the load of a shared machine falls
        # on all of them alike.
        round_peak = dict.fromkeys(("fp32", "bf16"), 0.0)
        for dtype, threads in peaks:
            torch.set_num_threads(threads)
            measured = matmul_peak(torch.float32 if dtype == "fp32" else torch.bfloat16)
            peaks[dtype, threads] = max(peaks[dtype, threads], measured)
            round_peak[dtype] = max(round_peak[dtype], measured)
        for name, (dtype, threads, change) in variants.items():
            shapes.clear()
            torch.set_num_threads(threads)
            with change(scorers[dtype]):
                started = time.perf_counter()
                frames[name] = scorers[dtype].score_examples(examples)
                times[name].append(time.perf_counter() - started)
            fractions[name].append(flops / times[name][-1] / round_peak[dtype])
            padded[name] = sum(rows * width for rows, width in shapes)
        torch.set_num_threads(all_threads)

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)

    before, after = frames["fp32, every position projected (before)"], frames["fp32, answer positions projected"]
    for column in ("token_logprobs", "token_minkpp_z"):
        np.testing.assert_allclose(np.concatenate(after[column]), np.concatenate(before[column]), rtol=0, atol=1e-4)
    bf16 = frames["bf16, answer positions"]
    for name in variants:
        if name.startswith("bf16"):
            # bf16 matmuls round differently with the shapes of other batches and kernels (about
            # 1e-3 of a sum); a misplaced position or row would be off by whole nats.
            np.testing.assert_allclose(frames[name]["sum_logprob"], bf16["sum_logprob"], rtol=5e-3, atol=0.05)
    bf16_vs_fp32 = float(np.max(np.abs(bf16["sum_logprob"] - after["sum_logprob"])))

    machine_peak = {dtype: max(peaks[dtype, threads] for threads in {all_threads, 1}) for dtype in ("fp32", "bf16")}
    info = benchmark.extra_info
    info.update(torch_threads=all_threads, useful_gflop=flops / 1e9, lm_tokens=tokens,
                matmul_peak_gflops={f"{dtype}, {threads} threads": value / 1e9 for (dtype, threads), value in peaks.items()},
                bf16_vs_fp32_max_abs_sum_logprob=bf16_vs_fp32)
    print(f"\nmid-size Qwen2.5-VL (0.5B decoder), {N_EXAMPLES} examples, {tokens} LM tokens, "
          f"{flops / 1e9:.0f} GFLOP useful; matmul peak (best of {ROUNDS} rounds) "
          + ", ".join(f"{dtype} {threads} threads {value / 1e9:.0f} GFLOP/s" for (dtype, threads), value in peaks.items()))
    baseline = min(times["fp32, every position projected (before)"])
    for name, seconds in ((name, min(spent)) for name, spent in times.items()):
        achieved = flops / seconds
        peak = machine_peak[variants[name][0]]
        info[name] = {"examples_per_s": N_EXAMPLES / seconds, "tokens_per_s": tokens / seconds,
                      "achieved_gflops": achieved / 1e9, "fraction_of_its_dtype_peak": achieved / peak,
                      "fraction_of_fp32_peak": achieved / machine_peak["fp32"],
                      "padding_fraction": 1 - tokens / padded[name], "speedup_vs_before": baseline / seconds,
                      "seconds_fastest": seconds, "seconds_median": float(np.median(times[name])),
                      "fraction_of_the_rounds_peak_best": max(fractions[name]),
                      "fraction_of_the_rounds_peak_median": float(np.median(fractions[name]))}
        print(f"  {name}: {N_EXAMPLES / seconds:.2f} ex/s, {tokens / seconds:.0f} tok/s, "
              f"{achieved / 1e9:.0f} GFLOP/s = {achieved / peak:.0%} of its dtype's peak "
              f"({achieved / machine_peak['fp32']:.0%} of fp32's), padding {1 - tokens / padded[name]:.0%}, "
              f"x{baseline / seconds:.2f} vs before (fastest of {ROUNDS}: {seconds:.2f} s, "
              f"median {np.median(times[name]):.2f} s); of its round's {variants[name][0]} peak: best "
              f"{max(fractions[name]):.0%}, median {np.median(fractions[name]):.0%}")
    print(f"  bf16 vs fp32 scores: max |sum log p| difference {bf16_vs_fp32:.3f}")
