"""The cost of an audit before it runs (issue 41): a checkpoint's architecture from its config on
the meta device, an example's FLOPs and memory, and ``python -m medexp.plan experiment=<grid>``
sizing a grid's teacher-forced scoring. Checked on tiny checkpoints with the published processing;
no weights are read by the code under test."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from medexp import plan
from medexp.config.schemas import ModelConfig
from medexp.models.cost import Architecture, architecture, example_cost, memory_bytes
from tests.models import tiny_blip as tb
from tests.models.conftest import model_config
from tests.models.test_published_processing import SIDE, qwen_image_tokens
from tests.models.tiny import published_settings


ARCH = Architecture(params=1000, vision_params=200, embedding_params=100, layers=2, attention_width=8, kv_width=4)


def test_example_flops_by_hand():
    preview = {"total_tokens": 10, "image_tokens": 4, "vision_patches": 16, "image_prefix_tokens": 6,
               "shared_prefix": True}
    cost = example_cost(ARCH, preview)
    # language: 2 x (1000 - 200 - 100) x 10; vision: 2 x 200 x 16; attention: 2 x 2 layers x 10^2 x 8
    assert cost.flops == 14000 + 6400 + 3200
    assert (cost.tokens, cost.image_tokens, cost.vision_patches) == (10, 4, 16)
    # The prefix (6 tokens, with the pixels): 2 x 700 x 6 + 6400 + 2 x 2 x 6^2 x 8.
    assert cost.prefix_flops == 8400 + 6400 + 1152
    # 12 questions on 3 images: 3 prefixes, 12 continuations of 4 tokens.
    assert cost.shared_tokens(12, 3) == 3 * 6 + 12 * 4
    assert cost.shared_flops(12, 3) == 3 * cost.prefix_flops + 12 * (cost.flops - cost.prefix_flops)
    # One question per image shares nothing; neither does a family that scores examples whole.
    assert cost.shared_flops(5, 5) == 5 * cost.flops
    whole = example_cost(ARCH, {**preview, "shared_prefix": False})
    assert whole.prefix_flops is None and whole.shared_flops(12, 3) == 12 * whole.flops


def test_memory_is_weights_in_the_dtype_plus_a_batch_of_key_values():
    arch = Architecture(params=1000, vision_params=0, embedding_params=0, layers=2, attention_width=8, kv_width=4)
    cfg = OmegaConf.structured(ModelConfig(name="m", dtype="bfloat16", token_budget=100, batch_size=3))
    assert memory_bytes(arch, cfg, 7) == 1000 * 2 + 2 * 2 * 4 * 100 * 2  # keys and values of 2 layers, 100 tokens
    cfg.token_budget = None  # without a budget a batch is batch_size examples: 3 x 7 tokens, in float32
    cfg.dtype = "float32"
    assert memory_bytes(arch, cfg, 7) == 1000 * 4 + 2 * 2 * 4 * 21 * 4


def test_architecture_counts_what_the_loaded_model_holds(tiny_checkpoint):
    from transformers import Qwen2_5_VLForConditionalGeneration

    directory = tiny_checkpoint("qwen2_5_vl_published")
    arch = architecture(model_config("qwen2_5_vl"), str(directory))
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(directory)
    assert arch.params == sum(parameter.numel() for parameter in model.parameters())
    assert arch.vision_params == sum(parameter.numel() for parameter in model.model.visual.parameters())
    text = model.config.text_config
    assert arch.embedding_params == text.vocab_size * text.hidden_size
    assert (arch.layers, arch.attention_width, arch.kv_width) == (2, 32, 16)  # 4 heads / 2 kv heads of 8


@pytest.fixture(scope="module")
def checkpoints(tiny_checkpoint, tmp_path_factory):
    root = tmp_path_factory.mktemp("grid_cost")
    return {"qwen2_5_vl": tiny_checkpoint("qwen2_5_vl_published"),
            "blip2": tb.build_blip2(root / "blip2", published="blip2"),
            "instructblip": tb.build_instructblip(root / "instructblip", published=True)}


def rows_of(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    cells = [line.strip("|").split("|") for line in lines if line.startswith("| ") and "---" not in line]
    return {(row[0].strip(), row[1].strip()): [value.strip() for value in row[2:]] for row in cells[1:]}


def test_grid_counts_each_model_on_each_benchmark_once(checkpoints):
    blocks = [
        {"model": ["qwen2_5_vl", "blip2"], "bench": ["slake", "vqa_rad"], "detector": "exch_rank",
         "control": ["none", "order_hash"]},
        # A cohort detector with external baselines reads blip2 and instructblip on SLAKE too:
        # only instructblip is new scoring.
        {"model": "qwen2_5_vl", "bench": "slake", "detector": "mink_tail", "control": "external_baseline",
         "detector.cohort": "[qwen2_5_vl,blip2]"},
        {"model": "none", "bench": "vqa_rad", "detector": "image_nn", "embedder@detector.embedder": "siglip_b16",
         "corpus@detector.corpus": "pmc_oa", "control": "none"},
    ]
    lines = plan.grid_lines(blocks, [], 300.0, locate=lambda model_cfg, _: checkpoints[model_cfg.name],
                            from_checkpoint=True)
    assert lines[0] == "grid: 10 cells (exch_rank 8, image_nn 1, mink_tail 1)"
    assert lines[1].startswith("teacher-forced scoring: 5 jobs")
    rows = rows_of(lines)
    assert set(rows) == {("qwen2_5_vl", "slake"), ("qwen2_5_vl", "vqa_rad"), ("blip2", "slake"),
                         ("blip2", "vqa_rad"), ("instructblip", "slake")}
    # Examples: the benchmarks' published test-split counts, as their configs state them.
    assert rows[("qwen2_5_vl", "slake")][0] == "1061" and rows[("qwen2_5_vl", "vqa_rad")][0] == "451"
    # Image tokens per example: the published processors' counts for a 512 x 512 image.
    assert rows[("qwen2_5_vl", "slake")][3] == str(qwen_image_tokens(SIDE, SIDE,
                                                                     published_settings("qwen2_5_vl")["preprocessor_config"]))
    assert rows[("blip2", "slake")][3] == str(published_settings("blip2")["processor_config"]["num_query_tokens"])
    # A job's PFLOP are its examples times one example's TFLOP, and its GPU hours those at 300 TFLOP/s.
    for examples, images, _, _, per_example, total, shared, _, hours, shared_hours, rate in rows.values():
        assert float(total) == pytest.approx(int(examples) * float(per_example) / 1000, abs=0.006)
        assert float(hours) == pytest.approx(float(total) * 1e15 / 300e12 / 3600, abs=0.006)
        assert rate == "300 given"
        # No benchmark is on this machine: how many images share a prefix is unknown.
        assert images == shared == shared_hours == "unknown"
    assert lines[-1] == "not sized here (no teacher-forced benchmark scores): image_nn 1 cells"


def test_grid_counts_images_of_a_benchmark_on_this_machine(checkpoints):
    """The demo benchmark is generated here: its images are counted, and with one question per
    image shared prefixes save nothing."""
    from medexp.benchmarks import load_benchmark_from_config
    from medexp.config import compose

    blocks = [{"model": "qwen2_5_vl", "bench": "demo", "detector": "exch_rank", "control": "none"}]
    lines = plan.grid_lines(blocks, ["bench.expected_examples=400"], 300.0,
                            locate=lambda model_cfg, _: checkpoints[model_cfg.name], from_checkpoint=True)
    cfg = compose(["bench=demo"])
    demo = load_benchmark_from_config(cfg.bench, cfg.paths.cache_dir, pixels=False)
    examples, images, _, _, _, total, shared, _, hours, shared_hours, _ = rows_of(lines)[("qwen2_5_vl", "demo")]
    assert int(images) == len({str(example.image) for example in demo.examples}) == int(examples) == 400
    assert (shared, shared_hours) == (total, hours)
    # At the measured rates too: nothing shared runs whole, at the whole rate, not the shared one.
    lines = plan.grid_lines(blocks, ["bench.expected_examples=400"], None,
                            locate=lambda model_cfg, _: checkpoints[model_cfg.name], from_checkpoint=True)
    *_, total, shared, _, hours, shared_hours, rate = rows_of(lines)[("qwen2_5_vl", "demo")]
    assert rate.endswith(" measured") and (shared, shared_hours) == (total, hours)


def test_an_unreachable_checkpoint_leaves_its_rows_unknown(checkpoints):
    def locate(model_cfg, _):
        if model_cfg.name == "blip2":
            raise OSError("not on this machine")
        return checkpoints[model_cfg.name]

    blocks = [{"model": ["qwen2_5_vl", "blip2"], "bench": "slake", "detector": "exch_rank", "control": "none"}]
    lines = plan.grid_lines(blocks, [], 300.0, locate=locate, from_checkpoint=True)
    assert rows_of(lines)[("blip2", "slake")][2] == "unknown (below)"
    assert "not counted: blip2 on slake" in next(line for line in lines if line.startswith("total:"))
    assert "blip2: unknown, OSError: not on this machine" in lines


def test_command_line_sizes_the_published_grid_without_a_model_override(monkeypatch, capsys):
    """``experiment=controlled_audit`` needs no model= (the preset names them); --tflops is checked;
    --from-checkpoint switches from the published facts to the checkpoints."""
    monkeypatch.setattr(plan, "grid_lines", lambda blocks, overrides, tflops, from_checkpoint:
                        [f"{len(blocks)} blocks at {tflops} {from_checkpoint} {overrides}"])
    assert plan.main(["experiment=controlled_audit", "--tflops=400"]) == 0
    # conf/experiment/controlled_audit.yaml's six blocks
    assert capsys.readouterr().out.strip() == "6 blocks at 400.0 False ['experiment=controlled_audit']"
    assert plan.main(["experiment=controlled_audit", "--from-checkpoint"]) == 0  # no --tflops: measured rates
    assert capsys.readouterr().out.strip() == "6 blocks at None True ['experiment=controlled_audit']"
    assert plan.main(["experiment=controlled_audit", "--tflops=-1"]) == 2
    assert "--tflops must be positive" in capsys.readouterr().err


# ---------------------------------------------------------------------------- offline, from the published facts
# The published config.json numbers (medexp/models/published/<family>/settings.json, sources in
# its SOURCES.md), written out here as the hand computations below use them.
QWEN_TEXT = dict(hidden=3584, layers=28, intermediate=18944, heads=28, kv_heads=4, vocab=152064)
QWEN_VISION = dict(hidden=1280, depth=32, intermediate=3420, patch=14, temporal=2, merge=2, out=3584)
# BLIP-2 OPT-2.7b: OPT from the config.json; the vision tower and Q-Former sizes are
# transformers' defaults that its config.json leaves in place (shown by the checkpoint's module print).
OPT = dict(hidden=2560, layers=32, ffn=10240, vocab=50304, positions=2048 + 2)
BLIP_VISION = dict(hidden=1408, layers=39, intermediate=6144, patch=14, image=224)
QFORMER = dict(hidden=768, layers=12, intermediate=3072, cross_every=2, queries=32)


def linear(n_in: int, n_out: int, bias: bool = True) -> int:
    return n_in * n_out + (n_out if bias else 0)


def qwen2_5_vl_by_hand() -> tuple[int, int, int]:
    """(parameters, vision parameters, input embedding) of Qwen2.5-VL-7B-Instruct."""
    h, kv = QWEN_TEXT["hidden"], QWEN_TEXT["kv_heads"] * QWEN_TEXT["hidden"] // QWEN_TEXT["heads"]
    layer = (linear(h, h) + 2 * linear(h, kv) + linear(h, h, bias=False)  # q, k, v with bias; o without
             + 3 * linear(h, QWEN_TEXT["intermediate"], bias=False) + 2 * h)  # gate, up, down; two RMSNorms
    embedding = QWEN_TEXT["vocab"] * h
    text = 2 * embedding + QWEN_TEXT["layers"] * layer + h  # untied lm_head, final norm
    v, inter = QWEN_VISION["hidden"], QWEN_VISION["intermediate"]
    block = 2 * v + linear(v, 3 * v) + linear(v, v) + 2 * linear(v, inter) + linear(inter, v)
    merged = v * QWEN_VISION["merge"] ** 2
    vision = (3 * QWEN_VISION["temporal"] * QWEN_VISION["patch"] ** 2 * v  # Conv3d patch embedding, no bias
              + QWEN_VISION["depth"] * block + v + linear(merged, merged) + linear(merged, QWEN_VISION["out"]))
    return text + vision, vision, embedding


def blip2_by_hand() -> tuple[int, int, int]:
    """(parameters, vision parameters: tower, Q-Former, queries and projection, input embedding)
    of BLIP-2 OPT-2.7b; OPT's output projection is tied to its input embedding."""
    v, q = BLIP_VISION["hidden"], QFORMER["hidden"]
    positions = (BLIP_VISION["image"] // BLIP_VISION["patch"]) ** 2 + 1  # patches and the class token
    vision_layer = linear(v, 3 * v) + linear(v, v) + linear(v, BLIP_VISION["intermediate"]) \
        + linear(BLIP_VISION["intermediate"], v) + 4 * v
    tower = v + linear(3 * BLIP_VISION["patch"] ** 2, v) + positions * v + BLIP_VISION["layers"] * vision_layer + 2 * v
    self_attention = 4 * linear(q, q) + 2 * q
    feed_forward = linear(q, QFORMER["intermediate"]) + linear(QFORMER["intermediate"], q) + 2 * q
    cross_attention = 2 * linear(q, q) + 2 * linear(v, q) + 2 * q  # keys and values read the tower's width
    qformer = 2 * q + QFORMER["layers"] * (self_attention + feed_forward) \
        + QFORMER["layers"] // QFORMER["cross_every"] * cross_attention
    image_side = tower + qformer + QFORMER["queries"] * q + linear(q, OPT["hidden"])
    h = OPT["hidden"]
    opt_layer = 4 * linear(h, h) + 4 * h + linear(h, OPT["ffn"]) + linear(OPT["ffn"], h)
    embedding = OPT["vocab"] * h
    opt = embedding + OPT["positions"] * h + 2 * h + OPT["layers"] * opt_layer
    return image_side + opt, image_side, embedding


# InternVL3-8B-hf: Qwen2.5-7B's shape with InternVL's 151674-token vocabulary, untied; the
# InternViT-300M tower (448 px, 14 px patches) and the pixel-shuffle MLP projector.
INTERNVL_TEXT = dict(hidden=3584, layers=28, intermediate=18944, heads=28, kv_heads=4, vocab=151674)
INTERNVIT = dict(hidden=1024, layers=24, intermediate=4096, patch=14, image=448, shuffle=2)
# InstructBLIP Vicuna-7b: BLIP-2's ViT-g tower (the same defaults), InstructBLIP's Q-Former (which
# also embeds the instruction: BERT's vocabulary plus [DEC], 512 positions) and LLaMA-7B's shape.
LLAMA = dict(hidden=4096, layers=32, intermediate=11008, vocab=32001)
INSTRUCT_QFORMER = dict(QFORMER, vocab=30523, positions=512)


def internvl3_by_hand() -> tuple[int, int, int]:
    """(parameters, vision parameters: tower and projector, input embedding) of InternVL3-8B-hf."""
    v, inter = INTERNVIT["hidden"], INTERNVIT["intermediate"]
    patches = (INTERNVIT["image"] // INTERNVIT["patch"]) ** 2
    # per layer: two layer-scale vectors, q, k, v and output with bias, the MLP, two LayerNorms
    layer = 2 * v + 3 * linear(v, v) + linear(v, v) + linear(v, inter) + linear(inter, v) + 2 * 2 * v
    # cls token, positions (patches and cls), the patch convolution with bias, the layers
    tower = v + (patches + 1) * v + linear(3 * INTERNVIT["patch"] ** 2, v) + INTERNVIT["layers"] * layer
    h, shuffled = INTERNVL_TEXT["hidden"], v * INTERNVIT["shuffle"] ** 2  # 2 x 2 pixel shuffle: 4 x 1024 wide
    projector = 2 * shuffled + linear(shuffled, h) + linear(h, h)  # LayerNorm, linear, GELU, linear
    kv = INTERNVL_TEXT["kv_heads"] * h // INTERNVL_TEXT["heads"]
    text_layer = (linear(h, h) + 2 * linear(h, kv) + linear(h, h, bias=False)
                  + 3 * linear(h, INTERNVL_TEXT["intermediate"], bias=False) + 2 * h)
    embedding = INTERNVL_TEXT["vocab"] * h
    text = 2 * embedding + INTERNVL_TEXT["layers"] * text_layer + h  # untied lm_head, final norm
    return tower + projector + text, tower + projector, embedding


def instructblip_by_hand() -> tuple[int, int, int]:
    """(parameters, vision parameters: tower, Q-Former with its text embeddings, queries and
    projection, input embedding) of InstructBLIP Vicuna-7b; LLaMA's output projection is untied."""
    v, q, inter = BLIP_VISION["hidden"], INSTRUCT_QFORMER["hidden"], INSTRUCT_QFORMER["intermediate"]
    positions = (BLIP_VISION["image"] // BLIP_VISION["patch"]) ** 2 + 1
    vision_layer = linear(v, 3 * v) + linear(v, v) + linear(v, BLIP_VISION["intermediate"]) \
        + linear(BLIP_VISION["intermediate"], v) + 4 * v
    tower = v + linear(3 * BLIP_VISION["patch"] ** 2, v) + positions * v + BLIP_VISION["layers"] * vision_layer + 2 * v
    embeddings = (INSTRUCT_QFORMER["vocab"] + INSTRUCT_QFORMER["positions"]) * q + 2 * q  # words, positions, LayerNorm
    self_attention = 4 * linear(q, q) + 2 * q
    feed_forwards = 2 * (linear(q, inter) + linear(inter, q) + 2 * q)  # one for the text, one for the queries
    cross_attention = 2 * linear(q, q) + 2 * linear(v, q) + 2 * q
    qformer = embeddings + INSTRUCT_QFORMER["layers"] * (self_attention + feed_forwards) \
        + INSTRUCT_QFORMER["layers"] // INSTRUCT_QFORMER["cross_every"] * cross_attention
    h = LLAMA["hidden"]
    image_side = tower + qformer + INSTRUCT_QFORMER["queries"] * q + linear(q, h)
    llama_layer = 4 * linear(h, h, bias=False) + 3 * linear(h, LLAMA["intermediate"], bias=False) + 2 * h
    embedding = LLAMA["vocab"] * h
    llama = 2 * embedding + LLAMA["layers"] * llama_layer + h
    return image_side + llama, image_side, embedding


@pytest.mark.parametrize("family,by_hand", [("qwen2_5_vl", qwen2_5_vl_by_hand), ("blip2", blip2_by_hand),
                                            ("internvl", internvl3_by_hand), ("instructblip", instructblip_by_hand)])
def test_published_architecture_matches_the_config_numbers_by_hand(family, by_hand):
    from medexp.models.published import published_architecture

    arch = published_architecture(family)
    assert (arch.params, arch.vision_params, arch.embedding_params) == by_hand()


def test_published_parameter_counts_match_the_published_totals():
    """Totals published apart from the config numbers: the 8.29B parameters a training log printed
    on loading Qwen2.5-VL-7B-Instruct, the 3.74B a model listing gives BLIP-2 OPT-2.7b and the
    4.30B advertised for gemma-3-4b-it, MedGemma-4B's base (SOURCES.md)."""
    from medexp.models.published import published_architecture

    assert round(published_architecture("qwen2_5_vl").params / 1e9, 2) == 8.29
    assert round(published_architecture("blip2").params / 1e9, 2) == 3.74
    assert round(published_architecture("gemma3").params / 1e9, 2) == 4.30


@pytest.mark.parametrize("height,width", [(SIDE, SIDE), (SIDE, 2 * SIDE), (300, 2000), (2000, 300)])
def test_offline_anyres_rule_matches_the_hand_rule(height, width):
    """LLaVA-OneVision's image tokens offline equal the rule worked out by hand in
    test_published_processing, for a square, a 1:2, and two extreme shapes (the last pooled)."""
    from medexp.models.published import image_tokens_and_patches
    from tests.models.test_published_processing import anyres_image_tokens

    settings = published_settings("llava_onevision")
    tokens, patches = image_tokens_and_patches("llava_onevision", settings, height, width)
    assert tokens == anyres_image_tokens(height, width, settings)
    if (height, width) == (SIDE, SIDE):
        assert patches == (1 + 2 * 2) * 27 * 27  # the base tile and a 2 x 2 grid of 384 px tiles, 27 x 27 patches each


@pytest.mark.parametrize("height,width", [(SIDE, SIDE), (SIDE, 2 * SIDE), (300, 2000), (2000, 300)])
def test_offline_internvl_tiles_match_the_hand_rule(height, width):
    """InternVL's tokens and patches offline: 256 tokens and 32 x 32 patches of 14 px per 448 px tile, over
    the tiles of medexp's tiling rule (checked in test_published_processing against hand arithmetic and
    the processor's own expansion)."""
    from medexp.models.published import image_tokens_and_patches, internvl_tiles

    settings = published_settings("internvl")
    tiles = internvl_tiles(settings["preprocessor_config"], height, width)
    assert image_tokens_and_patches("internvl", settings, height, width) == (tiles * 256, tiles * 32 * 32)
    if (height, width) == (SIDE, 2 * SIDE):
        assert tiles == 3  # a 2 x 1 grid and the thumbnail


def offline_grid(monkeypatch, models: list[str], bench: str = "slake", tflops: float | None = 300.0) -> list[str]:
    """The offline grid with every way to a checkpoint or the network made to fail: reading a
    checkpoint's config, processor or tokenizer, locating one, or opening a socket."""
    import socket

    import transformers

    import medexp.models

    def refuse(*args, **kwargs):
        raise AssertionError(f"the offline estimate reached for a checkpoint or the network: {args[:2]}")

    for name in ("AutoConfig", "AutoProcessor", "AutoTokenizer"):
        monkeypatch.setattr(getattr(transformers, name), "from_pretrained", refuse)
    monkeypatch.setattr(medexp.models, "model_location", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the benchmark's image count: its local copy only
    blocks = [{"model": models, "bench": bench, "detector": "exch_rank", "control": "none"}]
    return plan.grid_lines(blocks, [], tflops)


def test_offline_grid_rows_by_hand(monkeypatch):
    """Rows sized from the published facts alone: tokens, TFLOP, memory and hours computed here
    from the config.json numbers and the processors' rules."""
    from medexp.models.published import TEXT_TOKENS_ESTIMATE
    from tests.models.test_published_processing import qwen_image_tokens

    lines = offline_grid(monkeypatch, ["qwen2_5_vl", "blip2", "internvl3", "instructblip"])
    rows = rows_of(lines)
    assert any(f"estimated at {TEXT_TOKENS_ESTIMATE} per example" in line for line in lines)
    qwen_tokens = qwen_image_tokens(SIDE, SIDE, published_settings("qwen2_5_vl")["preprocessor_config"])
    assert qwen_tokens == 324
    blip_tokens = published_settings("blip2")["processor_config"]["num_query_tokens"]
    # InternVL: a 512 x 512 image is one 448 px tile (test_published_processing), whose 32 x 32
    # patches the 2 x 2 pixel shuffle turns into 256 tokens; InstructBLIP: 32 queries
    assert published_settings("internvl")["processor_config"]["image_seq_length"] == (448 // 14) ** 2 // 4 == 256
    assert published_settings("instructblip")["processor_config"]["num_query_tokens"] == 32
    cases = {
        # patches the tower reads: Qwen's 504 px resize in 14 px patches; BLIP's and InstructBLIP's
        # 224 px image; InternVL's one 448 px tile
        "qwen2_5_vl": (qwen2_5_vl_by_hand(), qwen_tokens, (504 // 14) ** 2, QWEN_TEXT["layers"],
                       QWEN_TEXT["hidden"], QWEN_TEXT["kv_heads"] * 128),
        "blip2": (blip2_by_hand(), blip_tokens, (224 // 14) ** 2, OPT["layers"], OPT["hidden"], OPT["hidden"]),
        "internvl3": (internvl3_by_hand(), 256, (448 // 14) ** 2, INTERNVL_TEXT["layers"], INTERNVL_TEXT["hidden"],
                      INTERNVL_TEXT["kv_heads"] * 3584 // 28),
        "instructblip": (instructblip_by_hand(), 32, (224 // 14) ** 2, LLAMA["layers"], LLAMA["hidden"],
                         LLAMA["hidden"]),
    }
    for model, ((params, vision, embedding), image_tokens, patches, layers, width, kv_width) in cases.items():
        examples, images, tokens, shown_image_tokens, per_example, total, shared, memory, hours, _, _ = \
            rows[(model, "slake")]
        assert (int(examples), int(shown_image_tokens)) == (1061, image_tokens)
        tokens_by_hand = image_tokens + TEXT_TOKENS_ESTIMATE
        assert int(tokens) == tokens_by_hand
        flops = (2 * (params - vision - embedding) * tokens_by_hand + 2 * vision * patches
                 + 2 * layers * tokens_by_hand**2 * width)
        assert per_example == f"{flops / 1e12:.2f}"
        assert total == f"{1061 * flops / 1e15:.2f}"
        assert hours == f"{1061 * flops / 300e12 / 3600:.2f}"
        # bfloat16 weights plus keys and values of a 16384-token batch (the YAMLs' token_budget)
        assert memory == f"{(2 * params + 2 * layers * kv_width * 16384 * 2) / 2**30:.1f}"
        assert images == shared == "unknown"  # SLAKE is not on this machine


def test_offline_grid_says_why_a_model_is_unknown(monkeypatch):
    """A family whose config.json was not found is unknown with that reason, never guessed; so is
    a checkpoint other than the published one. LLaVA-OneVision's and Gemma 3's image tokens follow
    their processors' rules (computed by hand in test_published_processing)."""
    from tests.models.test_published_processing import anyres_image_tokens

    lines = offline_grid(monkeypatch, ["chexagent", "llava_onevision", "medgemma"])
    rows = rows_of(lines)
    assert rows[("chexagent", "slake")][2] == "unknown (below)"
    assert any(line.startswith("chexagent: unknown, no offline estimate: the published config.json of "
                               "StanfordAIMI/CheXagent-8b was not found whole") for line in lines)
    llava_tokens = anyres_image_tokens(SIDE, SIDE, published_settings("llava_onevision"))
    assert rows[("llava_onevision", "slake")][3] == str(llava_tokens)
    assert rows[("medgemma", "slake")][3] == str(published_settings("gemma3")["processor_config"]["image_seq_length"])
    blocks = [{"model": "qwen2_5_vl", "bench": "slake", "detector": "exch_rank", "control": "none"}]
    lines = plan.grid_lines(blocks, ["model.pretrained=/data/my-finetune"], 300.0)
    assert "qwen2_5_vl: unknown, no offline estimate: model.pretrained=/data/my-finetune is not the published " \
           "checkpoint Qwen/Qwen2.5-VL-7B-Instruct: size it with --from-checkpoint" in lines


def test_hours_are_at_each_checkpoints_measured_rate(monkeypatch):
    """Without --tflops a published checkpoint's GPU hours are its FLOPs at the rate measured for
    it on a GPU (medexp/models/measured: the cost model's FLOPs over measured seconds), whole and,
    for a family that shares prefixes, shared; a checkpoint not measured is at 300 TFLOP/s, said so."""
    import json

    from medexp.config import compose
    from medexp.models.throughput import MEASUREMENT, measured_rate

    measured = {model["model"]: model for model in json.loads(MEASUREMENT.read_text())["models"]}
    rows = rows_of(offline_grid(monkeypatch, ["qwen2_5_vl", "blip2", "chexagent"], bench="pathvqa", tflops=None))
    qwen, blip = measured["qwen2_5_vl"], measured["blip2"]
    for model, shown in (("qwen2_5_vl", f"{qwen['plain']['achieved_tflops']:.0f} / "
                                        f"{qwen['shared_prefix']['achieved_tflops']:.0f} measured"),
                         ("blip2", f"{blip['plain']['achieved_tflops']:.0f} measured (scored whole)")):
        examples, _, _, _, per_example, total, _, _, hours, _, rate = rows[(model, "pathvqa")]
        assert rate == shown
        whole = measured[model]["plain"]["achieved_tflops"]
        assert float(hours) == pytest.approx(int(examples) * float(per_example) * 1e12 / (whole * 1e12) / 3600,
                                             abs=0.006)
        assert abs(float(hours) - int(examples) * float(per_example) / 300 / 3600) > 0.02  # not the assumed rate
    # CheXagent was not measured (nor sized); neither is a checkpoint other than the measured one.
    assert measured_rate(compose(["model=chexagent"]).model) is None
    other = compose(["model=qwen2_5_vl", "model.pretrained=Qwen/Qwen2.5-VL-3B-Instruct"]).model
    assert measured_rate(other) is None
    assert plan.rates(other, None) == (300.0, 300.0, "300 assumed")
    assert plan.rates(other, 120.0) == (120.0, 120.0, "120 given")
