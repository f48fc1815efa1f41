"""Teacher-forced scoring of every audited family's full-size architecture on a GPU.

A plain script (not a test). For each family with a whole published ``config.json``
(:mod:`medexp.models.published`: Qwen2.5-VL-7B, LLaVA-OneVision-7B, InternVL3-8B, MedGemma-4B,
BLIP-2 OPT-2.7B, InstructBLIP Vicuna-7B; CheXagent's was not found) it builds the checkpoint
the tests build with the published processor settings and chat template
(``tests/models/tiny.py``, ``tiny_blip.py``), swaps its config for the published architecture at
full size (the token ids those of the offline tokenizer, trained on the fly, that carries the real
special tokens), builds that model with random weights in bfloat16 directly on the device (no
checkpoint is read or written), and scores a SLAKE-shaped set through medexp's own scorer with the
model's shipped settings (``conf/model/<name>.yaml``): ``--images`` synthetic 512 x 512 scans x
``--questions`` questions each (SLAKE's English test split asks about eleven per image), whole
and, where the family supports it, with shared prefixes.

Per family it records seconds, examples/s, peak GPU memory, the FLOPs medexp's cost model gives
for the set (:mod:`medexp.models.cost` on the same checkpoint: what ``python -m medexp.plan``
counts) and so the achieved TFLOP/s, and its fraction of a bf16 8192^3 matmul timed in the same
run. ``medexp.plan`` turns the plan's FLOPs into hours with these rates. Random weights give the
real compute of the shapes, not meaningful scores. One family failing does not stop the others.

Needs what ``perf/gpu_scoring.py`` needs (omegaconf and hydra-core carried to the lent GPU
machine) and pytest (the test builders import it), which the lent machine has::

    PYTHONPATH=.:outputs/gpu_deps python perf/gpu_families.py --out gpu_families.json
    python perf/gpu_families.py --check          # one layer per stack, float32, CPU: checks the script
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
import traceback
from functools import partial
from pathlib import Path

import torch

from perf.gpu_scoring import matmul_peak, slake_shaped, synchronize, timed_scoring

IMAGE_SIDE = 512


def builders() -> dict:
    """conf/model name -> builder of that family's tiny checkpoint with the published processing."""
    from tests.models import tiny, tiny_blip

    return {
        "qwen2_5_vl": partial(tiny.build_qwen2_5_vl, published=True),
        "llava_onevision": partial(tiny.build_llava_onevision, published=True),
        "internvl3": partial(tiny.build_internvl, published=True),
        "medgemma": partial(tiny.build_gemma3, published=True),
        "blip2": partial(tiny_blip.build_blip2, published="blip2"),
        "instructblip": partial(tiny_blip.build_instructblip, published=True),
    }


def model_settings(name: str, location: Path, device: str, dtype: str):
    """The model's shipped settings (conf/model/<name>.yaml) pointed at ``location`` (shared
    prefixes on, as shipped: each timed call picks its path)."""
    from omegaconf import OmegaConf

    from medexp.config.schemas import ModelConfig

    shipped = OmegaConf.load(Path(__file__).resolve().parents[1] / "conf" / "model" / f"{name}.yaml")
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), shipped)
    cfg.pretrained, cfg.device, cfg.dtype = str(location), device, dtype
    return cfg


def token_ids(values: dict) -> dict:
    return {key: value for key, value in values.items() if key.endswith(("token_id", "token_index"))}


def full_size_checkpoint(tiny_dir: Path, family: str, out_dir: Path, one_layer: bool) -> Path:
    """``tiny_dir``'s processor with the family's published architecture as config.json (and no
    weights). The offline tokenizer's token ids replace the published ones, which it does not have;
    the vocabulary keeps the published size. ``one_layer``: every stack one layer deep (a CPU check)."""
    from transformers import AutoConfig

    from medexp.models.published import published_settings

    shutil.copytree(tiny_dir, out_dir)
    for weights in out_dir.glob("*.safetensors*"):
        weights.unlink()
    tiny = json.loads((tiny_dir / "config.json").read_text())
    values = published_settings(family)["config"]
    values.update(token_ids(tiny))
    for section in ("text_config", "qformer_config"):
        if section in values and section in tiny:
            values[section].update(token_ids(tiny[section]))
    if one_layer:
        one_layer_deep(values)
    config = AutoConfig.for_model(values.pop("model_type"), **values)
    config.save_pretrained(out_dir)
    return out_dir


def one_layer_deep(values: dict) -> None:
    for key, value in list(values.items()):
        if isinstance(value, dict):
            one_layer_deep(value)
        elif key in ("num_hidden_layers", "depth"):
            values[key] = 1
        elif key == "layer_types":
            values[key] = value[:1]
        elif key == "fullatt_block_indexes":
            values[key] = [0]


def random_weight_scorer(cfg, location: Path):
    """The family's medexp scorer over a model built from ``location``'s config with random weights,
    directly on the configured device: no weights are read."""
    import transformers

    from medexp.models import scorer_class

    class RandomWeights(scorer_class(cfg.family.value)):
        def load(self, location, dtype, common):
            config = transformers.AutoConfig.from_pretrained(location)
            model_class = getattr(transformers, self.MODEL_CLASS)
            with torch.device(cfg.device):
                if self.MODEL_CLASS.startswith("Auto"):  # BLIP-2's and InstructBLIP's scorers load through one
                    model = model_class.from_config(config, dtype=dtype)
                else:
                    model = model_class._from_config(config, dtype=dtype)
            return self.load_processor(location, common), model

    return RandomWeights(cfg, str(location))


def set_flops(cfg, location: Path, examples, images: int) -> tuple[float, float, dict]:
    """(FLOPs of the set whole, FLOPs with shared prefixes, the example's token counts) by
    medexp's cost model on this checkpoint, as ``medexp.plan --from-checkpoint`` counts them."""
    from medexp.models.cost import scoring_cost

    _, cost = scoring_cost(cfg, str(location), examples[0])
    counts = {"tokens_per_example": cost.tokens, "image_tokens": cost.image_tokens,
              "vision_patches": cost.vision_patches, "prefix_tokens": cost.prefix_tokens}
    return len(examples) * cost.flops, cost.shared_flops(len(examples), images), counts


def timed(scorer, examples, shared: bool, device: str) -> dict:
    seconds, table = timed_scoring(scorer, examples, shared, device)
    if not table["sum_logprob"].notna().all():
        raise RuntimeError("a score came back missing")
    return {"seconds": seconds, "examples_per_s": len(examples) / seconds,
            "tokens_computed": scorer.token_counts.computed, "images_processed": scorer.token_counts.images_processed,
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None}


def measure(name: str, build, scratch: Path, examples, images: int, args, peak: float) -> dict:
    from medexp.models import scorer_class

    tiny_dir = build(scratch / f"{name}_tiny")
    cfg = model_settings(name, scratch / name, args.device, args.dtype)
    family = cfg.family.value
    location = full_size_checkpoint(tiny_dir, family, scratch / name, one_layer=args.check)
    plain_flops, shared_flops, counts = set_flops(cfg, location, examples, images)
    started = time.perf_counter()
    scorer = random_weight_scorer(cfg, location)
    synchronize(args.device)
    result = {"model": name, "family": family, "build_s": time.perf_counter() - started,
              "parameters": sum(p.numel() for p in scorer.model.parameters()),
              "batch_size": cfg.batch_size, "token_budget": cfg.token_budget, **counts}
    paths = [False] + ([True] if scorer_class(family).SHARED_PREFIX_UNSUPPORTED is None else [])
    warm = examples[: 2 * args.questions]
    for shared in paths:  # kernels, allocator and autotuning warmed up on both paths
        timed(scorer, warm, shared, args.device)
    for shared, flops in zip(paths, (plain_flops, shared_flops)):
        run = timed(scorer, examples, shared, args.device)
        run["flops"] = flops
        run["achieved_tflops"] = flops / run["seconds"] / 1e12
        run["fraction_of_matmul_peak"] = flops / run["seconds"] / peak
        result["shared_prefix" if shared else "plain"] = run
    del scorer
    gc.collect()
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return result


def table(results: list[dict]) -> str:
    lines = ["| model | tokens/example | path | examples/s | achieved TFLOP/s | of matmul peak | peak GiB | s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for result in results:
        if "error" in result:
            lines.append(f"| {result['model']} | failed: {result['error']} | | | | | | |")
            continue
        for path in ("plain", "shared_prefix"):
            if path in result:
                run = result[path]
                memory = "" if run["peak_memory_gib"] is None else f"{run['peak_memory_gib']:.1f}"
                lines.append(f"| {result['model']} | {result['tokens_per_example']} | {path} | "
                             f"{run['examples_per_s']:.1f} | {run['achieved_tflops']:.0f} | "
                             f"{run['fraction_of_matmul_peak']:.0%} | {memory} | {run['seconds']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="one layer per stack, float32, 2 images: a CPU check")
    parser.add_argument("--images", type=int, default=None, help="distinct 512 px scans (default 16; --check 2)")
    parser.add_argument("--questions", type=int, default=11, help="questions per scan")
    parser.add_argument("--models", default=None, help="comma-separated conf/model names (default: all six)")
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.dtype = "float32" if args.check else "bfloat16"
    images = args.images or (2 if args.check else 16)
    table_of = builders()
    names = args.models.split(",") if args.models else list(table_of)
    peak = matmul_peak(args.device, 1024 if args.check else 8192, getattr(torch, args.dtype))
    report = {"device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
              "date": time.strftime("%Y-%m-%d", time.gmtime()), "torch": torch.__version__,
              "transformers": __import__("transformers").__version__, "dtype": args.dtype, "images": images,
              "questions_per_image": args.questions, "image_side": IMAGE_SIDE, "matmul_peak_tflops": peak / 1e12,
              "flops_note": "medexp.models.cost's count for the set: 2 x language parameters (embedding table out) "
                            "x tokens + 2 x vision parameters x patches + causal attention products",
              "models": []}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        examples = slake_shaped(scratch, images, args.questions, IMAGE_SIDE)
        for name in names:
            torch.manual_seed(0)
            print(f"[{time.strftime('%H:%M:%S')}] {name}", file=sys.stderr, flush=True)
            try:
                report["models"].append(measure(name, table_of[name], scratch, examples, images, args, peak))
            except Exception as error:  # one family's failure is reported, the others still run
                traceback.print_exc()
                report["models"].append({"model": name, "error": f"{type(error).__name__}: {error}"[:300]})
            if args.out:
                args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    print(table(report["models"]))


if __name__ == "__main__":
    main()
