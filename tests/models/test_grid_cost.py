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
    lines = plan.grid_lines(blocks, [], 300.0, locate=lambda model_cfg, _: checkpoints[model_cfg.name])
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
    for examples, images, _, _, per_example, total, shared, _, hours, shared_hours in rows.values():
        assert float(total) == pytest.approx(int(examples) * float(per_example) / 1000, abs=0.006)
        assert float(hours) == pytest.approx(float(total) * 1e15 / 300e12 / 3600, abs=0.006)
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
                            locate=lambda model_cfg, _: checkpoints[model_cfg.name])
    cfg = compose(["bench=demo"])
    demo = load_benchmark_from_config(cfg.bench, cfg.paths.cache_dir, pixels=False)
    examples, images, _, _, _, total, shared, _, hours, shared_hours = rows_of(lines)[("qwen2_5_vl", "demo")]
    assert int(images) == len({str(example.image) for example in demo.examples}) == int(examples) == 400
    assert (shared, shared_hours) == (total, hours)


def test_an_unreachable_checkpoint_leaves_its_rows_unknown(checkpoints):
    def locate(model_cfg, _):
        if model_cfg.name == "blip2":
            raise OSError("not on this machine")
        return checkpoints[model_cfg.name]

    blocks = [{"model": ["qwen2_5_vl", "blip2"], "bench": "slake", "detector": "exch_rank", "control": "none"}]
    lines = plan.grid_lines(blocks, [], 300.0, locate=locate)
    assert rows_of(lines)[("blip2", "slake")][2] == "unknown (below)"
    assert "not counted: blip2 on slake" in next(line for line in lines if line.startswith("total:"))
    assert "blip2: unknown, OSError: not on this machine" in lines


def test_command_line_sizes_the_published_grid_without_a_model_override(monkeypatch, capsys):
    """``experiment=controlled_audit`` needs no model= (the preset names them); --tflops is checked."""
    monkeypatch.setattr(plan, "grid_lines", lambda blocks, overrides, tflops: [f"{len(blocks)} blocks at {tflops:g}"])
    assert plan.main(["experiment=controlled_audit", "--tflops=400"]) == 0
    assert capsys.readouterr().out.strip() == "6 blocks at 400"  # conf/experiment/controlled_audit.yaml's six
    assert plan.main(["experiment=controlled_audit", "--tflops=-1"]) == 2
    assert "--tflops must be positive" in capsys.readouterr().err
