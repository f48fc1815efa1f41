"""Cost of embedding one image with a SigLIP-SO400M tower, measured on this machine's CPU.

Two measurements, each in a fresh process (its own peak memory), with random weights, so no
download is needed (the cost of a forward pass does not depend on the weights' values):

- ``medexp``: medexp's own embedder path, :class:`medexp.images.embedders.OpenClipEmbedder` with
  ``conf/embedder/siglip_so400m.yaml`` (open_clip ``ViT-SO400M-14-SigLIP``, 224 px) and
  ``pretrained: null``, over synthetic JPEG files: decoding, SigLIP preprocessing, the tower and
  normalisation, as a corpus is embedded.
- ``siglip384``: transformers ``SiglipVisionModel`` built from the so400m-patch14-384 values
  (hidden 1152, 27 layers, 16 heads, intermediate 4304, patch 14, image 384) on a random pixel
  batch: the tower alone, at the resolution of the -384 checkpoints.

Each reports images/s (the best of ``--rounds`` timed batches after a one-image warm-up), the
forward FLOPs per image (``torch.utils.flop_counter``) and the peak resident memory; ``medexp``
also times JPEG decoding and the resize alone on one core (what a GPU embedder must be fed).

    PYTHONPATH=$PWD python perf/embedding_cost.py --batch 8
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def forward_flops(model, forward, inputs) -> float:
    """FLOPs of one forward pass (matrix products and attention, as torch counts them)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    for parameter in model.parameters():
        parameter.requires_grad_(False)  # the counter's module hooks trip over parameters that want gradients
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        forward(inputs)
    return float(counter.get_total_flops())


def best_seconds(run, rounds: int) -> tuple[float, list[float]]:
    """Time ``rounds`` calls of ``run`` (the caller warms up first): (best, all)."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times), times


def medexp_embedder(batch: int, rounds: int, image_dir: Path) -> dict:
    import numpy as np
    import open_clip
    import torch
    from omegaconf import OmegaConf
    from PIL import Image

    from medexp.benchmarks.images import read_image
    from medexp.config.schemas.images import OpenClipEmbedderConfig
    from medexp.images.embedders import load_embedder

    image_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(batch):  # 512 x 512 RGB JPEGs: about the size of a PMC-OA figure panel
        path = image_dir / f"{i}.jpg"
        Image.fromarray(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)).save(path, quality=90)
        paths.append(path)
    yaml = OmegaConf.load(REPO / "conf" / "embedder" / "siglip_so400m.yaml")
    yaml.pop("defaults")
    cfg = OmegaConf.merge(OmegaConf.structured(OpenClipEmbedderConfig), yaml,
                          {"pretrained": None, "device": "cpu", "batch_size": batch})
    embedder = load_embedder(cfg)
    started = time.perf_counter()
    embedder.embed(paths[:1])  # the first call builds the model and warms up
    build_seconds = time.perf_counter() - started
    best, times = best_seconds(lambda: embedder.embed(paths), rounds)
    model = embedder._loaded[0]  # the model medexp built, for its FLOPs (as tests/images/test_embedders.py reads it)
    size = int(open_clip.get_model_config(cfg.model)["vision_cfg"]["image_size"])
    flops = forward_flops(model, model.encode_image, torch.zeros(1, 3, size, size))
    # decoding and a bicubic resize alone, on one core: what feeds a GPU that embeds faster
    decode, _ = best_seconds(lambda: [read_image(path, "RGB").resize((size, size), Image.BICUBIC) for path in paths], 3)
    return {"what": f"medexp OpenClipEmbedder {cfg.model} (random weights), 512 px JPEG files",
            "model_build_and_first_image_s": build_seconds, "flops_per_image": flops,
            "decode_resize_images_per_s_one_core": batch / decode, **_rates(batch, best, times)}


def siglip384(batch: int, rounds: int) -> dict:
    import torch
    from transformers import SiglipVisionConfig, SiglipVisionModel

    config = SiglipVisionConfig(hidden_size=1152, num_hidden_layers=27, num_attention_heads=16,
                                intermediate_size=4304, patch_size=14, image_size=384)
    started = time.perf_counter()
    model = SiglipVisionModel(config).eval()
    build_seconds = time.perf_counter() - started
    pixels = torch.randn(batch, 3, 384, 384)

    def run():
        with torch.inference_mode():
            model(pixel_values=pixels)

    with torch.inference_mode():
        model(pixel_values=pixels[:1])  # warm-up
    best, times = best_seconds(run, rounds)
    flops = forward_flops(model, lambda x: model(pixel_values=x), pixels[:1])
    return {"what": "transformers SiglipVisionModel, so400m-patch14-384 shape (random weights), pixels given",
            "params": sum(p.numel() for p in model.parameters()), "model_build_s": build_seconds,
            "flops_per_image": flops, **_rates(batch, best, times)}


def _rates(batch: int, best: float, times: list[float]) -> dict:
    import torch

    return {"batch": batch, "batch_seconds": times, "images_per_s": batch / best, "threads": torch.get_num_threads(),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--images", type=Path, default=Path("/tmp/medexp-embedding-cost"))
    parser.add_argument("--only", choices=["medexp", "siglip384"], help=argparse.SUPPRESS)  # a child process
    args = parser.parse_args(argv)
    if args.only == "medexp":
        print(json.dumps(medexp_embedder(args.batch, args.rounds, args.images)))
        return 0
    if args.only == "siglip384":
        print(json.dumps(siglip384(args.batch, args.rounds)))
        return 0
    results = {}
    for which in ("medexp", "siglip384"):
        child = subprocess.run([sys.executable, __file__, "--batch", str(args.batch), "--rounds", str(args.rounds),
                                "--images", str(args.images), "--only", which], capture_output=True, text=True)
        if child.returncode:
            sys.stderr.write(child.stderr)
            return child.returncode
        results[which] = json.loads(child.stdout.strip().splitlines()[-1])
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
