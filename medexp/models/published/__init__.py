"""The published facts of the audited checkpoints, shipped with the package so that sizing an
audit (``python -m medexp.plan experiment=<grid>``) needs no hub access and no checkpoint.

``<family>/settings.json`` holds, per adapter family, the values of the published configuration
files that decide cost: the processor rules (image size, patch and merge sizes, query or image
token counts), and under ``config`` the architecture of the checkpoint's ``config.json`` where it
was found, with ``source`` naming where each came from (details and what was not found:
SOURCES.md). The tests build their tiny "published" checkpoints from the same files.

:func:`offline_cost` turns them into the same :class:`~medexp.models.cost.ExampleCost` that
:func:`medexp.models.cost.scoring_cost` computes from a checkpoint, for the default example (a
512 x 512 image and a SLAKE question): the architecture is built from ``config`` on PyTorch's meta
device by the family's transformers class, the image tokens follow the processor's rule, and the
text tokens, without the real tokenizer, are the round estimate :data:`TEXT_TOKENS_ESTIMATE`.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from medexp.models.cost import Architecture, ExampleCost, architecture_of_config, example_cost

PUBLISHED_DIR = Path(__file__).resolve().parent
# Text tokens of one example without the real tokenizer: the template's markers and any system
# turn, a SLAKE question (about 10 tokens) and a short answer. A round assumption, printed with
# every offline estimate; a checkpoint's processor counts them exactly (--from-checkpoint).
TEXT_TOKENS_ESTIMATE = 32


class PublishedFactsMissing(LookupError):
    """The published facts of a family do not suffice for an estimate (the reason is the message)."""


def published_settings(family: str) -> dict[str, Any]:
    """The published settings of a family (``settings.json``), with its chat template, if it has
    one, under ``chat_template``. A fresh dict each call (callers may change it)."""
    return json.loads(json.dumps(_settings(family)))


@lru_cache(maxsize=None)
def _settings(family: str) -> dict[str, Any]:
    directory = PUBLISHED_DIR / family
    if not (directory / "settings.json").is_file():
        raise PublishedFactsMissing(f"no published facts for family {family!r} in {PUBLISHED_DIR}")
    settings = json.loads((directory / "settings.json").read_text())
    template = directory / "chat_template.jinja"
    if template.exists():
        settings["chat_template"] = template.read_text()
    return settings


def image_tokens_and_patches(family: str, settings: dict[str, Any], height: int, width: int) -> tuple[int, int]:
    """(tokens standing for the image in the language model's input, patches the image tower
    reads) for one image under the family's published processor rule. Families whose rule is not
    implemented here raise :class:`PublishedFactsMissing`."""
    if family == "qwen2_5_vl":
        # Each side rounded to a multiple of patch x merge (28 px), every 2 x 2 block of 14 px
        # patches merged into one token; min/max pixels bound the area (512 x 512 is inside).
        rules = settings["preprocessor_config"]
        patch, merge = rules["patch_size"], rules["merge_size"]
        side_h, side_w = (max(merge * patch, round(side / (patch * merge)) * patch * merge) for side in (height, width))
        if not rules["min_pixels"] <= side_h * side_w <= rules["max_pixels"]:
            raise PublishedFactsMissing(f"{height} x {width} needs Qwen2.5-VL's pixel-budget rescaling, "
                                        "not implemented")
        patches = (side_h // patch) * (side_w // patch)
        return patches // merge**2, patches
    if family == "gemma3":
        # Pan-and-scan is off as published: one crop resized to the tower's size, a fixed number of
        # soft tokens (the tower's patches pooled down).
        if settings["preprocessor_config"].get("do_pan_and_scan"):
            raise PublishedFactsMissing("Gemma 3 pan-and-scan crops are not implemented")
        vision = settings["config"]["vision_config"]
        return settings["processor_config"]["image_seq_length"], (vision["image_size"] // vision["patch_size"]) ** 2
    if family == "llava_onevision":
        return _anyres_tokens_and_patches(settings, height, width)
    if family in ("blip2", "instructblip"):
        # One resized image; the Q-Former's queries stand for it whatever its size.
        size = settings["preprocessor_config"]["size"]
        patch = _blip_patch_size(settings)
        return settings["processor_config"]["num_query_tokens"], (size["height"] // patch) * (size["width"] // patch)
    if family == "internvl":
        # Dynamic tiling into 448 px tiles (the image's own size decides how many, see
        # internvl_tiles); image_seq_length tokens per tile, each tile read whole by the tower.
        tiles = internvl_tiles(settings["preprocessor_config"], height, width)
        vision = settings["config"]["vision_config"]
        (tile_h, tile_w), (patch_h, patch_w) = vision["image_size"], vision["patch_size"]
        tokens = tiles * settings["processor_config"]["image_seq_length"]
        return tokens, tiles * (tile_h // patch_h) * (tile_w // patch_w)
    raise PublishedFactsMissing(f"the {family} processor's image-token rule is not implemented offline")


def _anyres_tokens_and_patches(settings: dict[str, Any], height: int, width: int) -> tuple[int, int]:
    """LLaVA-OneVision's any-resolution layout, as transformers' LlavaOnevisionProcessor counts it:
    a base tile of the whole image plus the grid of tiles of the best-fitting pinpoint, whose
    features lose the rows or columns that only pad the image, gain one newline per row, and are
    pooled when they exceed ``anyres_max_<n>`` tiles by more than 10%."""
    tile = settings["preprocessor_config"]["size"]["height"]
    base = settings["processor_config"]["num_image_tokens"]
    side = math.isqrt(base)  # features along a tile's side (27 for 729)

    def fit(pinpoint: list[int]) -> tuple[int, int]:
        # most of the image's pixels kept when it is scaled into the pinpoint, then least area wasted
        pin_h, pin_w = pinpoint
        scale = min(pin_w / width, pin_h / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        return kept, kept - pin_h * pin_w

    best_h, best_w = max(settings["preprocessor_config"]["image_grid_pinpoints"], key=fit)
    grid_h, grid_w = best_h // tile, best_w // tile
    rows, cols = side * grid_h, side * grid_w
    if width / height > cols / rows:  # wider than the grid: the padding rows go
        rows -= 2 * ((rows - int(round(height * cols / width, 7))) // 2)
    else:
        cols -= 2 * ((cols - int(round(width * rows / height, 7))) // 2)
    features, newlines = rows * cols, rows
    max_tiles = int(settings["processor_config"]["vision_aspect_ratio"].removeprefix("anyres_max_"))
    ratio = math.sqrt(rows * cols / (max_tiles * side**2))
    if ratio > 1.1:
        features, newlines = int(rows // ratio) * int(cols // ratio), int(rows // ratio)
    tower_side = settings["config"]["vision_config"]["image_size"] // settings["config"]["vision_config"]["patch_size"]
    return base + features + newlines, (1 + grid_h * grid_w) * tower_side**2


def internvl_tiles(rules: dict[str, Any], height: int, width: int) -> int:
    """Tiles of InternVL's dynamic tiling (GotOcr2's ``crop_to_patches``, as InternVLProcessor
    forces it): of the grids of ``min_patches``..``max_patches`` tiles, the one whose aspect ratio
    is closest to the image's, on a tie the larger grid while the image covers more than half of it;
    a thumbnail tile is added when there are several."""
    tile = rules["size"]["height"]
    low, high = rules["min_patches"], rules["max_patches"]
    grids = sorted({(cols, rows) for n in range(low, high + 1) for cols in range(1, n + 1) for rows in range(1, n + 1)
                    if low <= cols * rows <= high}, key=lambda grid: grid[0] * grid[1])
    best, best_diff = (1, 1), float("inf")
    for cols, rows in grids:
        diff = abs(width / height - cols / rows)
        if diff < best_diff or (diff == best_diff and width * height > 0.5 * tile * tile * cols * rows):
            best, best_diff = (cols, rows), diff
    tiles = best[0] * best[1]
    return tiles + 1 if tiles > 1 else tiles


def _blip_patch_size(settings: dict[str, Any]) -> int:
    from transformers import AutoConfig

    # Not in the published config.json: the transformers default of the vision config's class fills
    # it when the checkpoint loads (14 px for BLIP-2's and InstructBLIP's).
    vision = dict(settings["config"]["vision_config"])
    return int(vision.get("patch_size") or AutoConfig.for_model(vision.pop("model_type"), **vision).patch_size)


@lru_cache(maxsize=None)
def published_architecture(family: str) -> Architecture:
    """The architecture of the family's published ``config.json`` (meta device, no weights)."""
    from transformers import AutoConfig

    settings = _settings(family)
    # Only a config.json found whole (its source named) is built: a partial one (CheXagent's) would
    # have transformers' defaults stand in for the values that were not found.
    if "config" not in settings.get("source", {}):
        raise PublishedFactsMissing(f"the published config.json of {settings['checkpoint']} was not found whole "
                                    "(medexp/models/published/SOURCES.md)")
    values = json.loads(json.dumps(settings["config"]))
    config = AutoConfig.for_model(values.pop("model_type"), **values)
    return architecture_of_config(config, family)


def offline_preview(model_cfg, height: int, width: int) -> dict[str, Any]:
    """The token counts :func:`medexp.models.cost.example_cost` needs (the keys of
    ``prompt_preview``'s summary), from the published facts: image tokens and patches by the
    processor's rule, text tokens :data:`TEXT_TOKENS_ESTIMATE`. The shared prefix is taken as the
    image tokens alone (the real one also holds the template's leading tokens), so shared-prefix
    savings are, if anything, understated."""
    from medexp.models import scorer_class

    family = _published_family(model_cfg)
    settings = _settings(family)
    image_tokens, patches = image_tokens_and_patches(family, settings, height, width)
    shares = bool(model_cfg.shared_prefix) and scorer_class(family).SHARED_PREFIX_UNSUPPORTED is None
    return {"total_tokens": image_tokens + TEXT_TOKENS_ESTIMATE, "image_tokens": image_tokens,
            "vision_patches": patches, "image_prefix_tokens": image_tokens, "shared_prefix": shares}


def offline_cost(model_cfg, height: int, width: int) -> tuple[Architecture, ExampleCost]:
    """(architecture, cost of one example on a ``height`` x ``width`` image) from the published
    facts alone: nothing is downloaded and no checkpoint is read."""
    arch = published_architecture(_published_family(model_cfg))
    return arch, example_cost(arch, offline_preview(model_cfg, height, width))


def _published_family(model_cfg) -> str:
    """The model's family, once its checkpoint is the one the published facts describe."""
    family = getattr(model_cfg.family, "value", model_cfg.family)
    checkpoint = _settings(family)["checkpoint"]
    if model_cfg.pretrained != checkpoint:
        raise PublishedFactsMissing(f"model.pretrained={model_cfg.pretrained} is not the published checkpoint "
                                    f"{checkpoint}: size it with --from-checkpoint")
    return family
