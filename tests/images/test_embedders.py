"""Embedders: the perceptual hash by hand and under perturbations; a tiny open_clip SigLIP-style model."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from omegaconf import OmegaConf
from PIL import Image

from medexp.config.schemas import OpenClipEmbedderConfig, PHashEmbedderConfig
from medexp.demo.scans import ScanSpec, render_scan
from medexp.images.embedders import OpenClipEmbedder, PerceptualHash, load_embedder
from tests.conftest import REPO


def save(image: Image.Image, path, **options):
    image.save(path, **options)
    return path


def cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(1.0 - a @ b)


def test_phash_of_a_2x2_image_by_hand():
    # unnormalised 2x2 DCT-II (imagehash's scipy.fftpack.dct on both axes) of [[a, b], [c, d]]:
    # DC 2(a+b+c+d), horizontal sqrt2 (a-b+c-d), vertical sqrt2 (a+b-c-d), diagonal a-b-c+d, times 2
    # each; for [[200, 0], [60, 20]]: 1120, 678.8, 339.4, 320, median 509.1
    image = Image.fromarray(np.array([[200, 0], [60, 20]], dtype=np.uint8))
    hasher = PerceptualHash(hash_size=2, highfreq_factor=1)
    assert hasher.dim == 4 and hasher.resolution == 0.25
    assert hasher.bits(image).tolist() == [True, True, False, False]


def test_inner_product_is_one_minus_twice_the_hamming_share(tmp_path):
    hasher = PerceptualHash(hash_size=8, highfreq_factor=4)
    scans = [render_scan(ScanSpec(modality, "liver", seed=3)) for modality in ("CT", "MRI")]
    paths = [save(scan, tmp_path / f"{k}.png") for k, scan in enumerate(scans)]
    vectors = hasher.embed(paths)
    hamming = int(np.count_nonzero(hasher.bits(scans[0]) != hasher.bits(scans[1])))
    assert hamming > 0
    assert vectors[0] @ vectors[1] == pytest.approx(1.0 - 2.0 * hamming / 64, abs=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_phash_is_imagehash_and_near_for_copies(tmp_path):
    import imagehash

    hasher = PerceptualHash()  # the default: 32 x 32 block, 1024 bits
    scan = render_scan(ScanSpec("CT", "kidney", True, "left", 2, seed=4))
    assert np.array_equal(hasher.bits(scan), imagehash.phash(scan, 32, 4).hash.ravel())
    pixels = np.asarray(scan, dtype=np.int16)
    brighter = Image.fromarray(np.clip(pixels + 10, 0, 255).astype(np.uint8))
    # a uniform shift moves the DC term only, up to the rounding of imagehash's 8-bit resize: 4 of 1,024 bits here
    assert 0 < np.count_nonzero(hasher.bits(brighter) != hasher.bits(scan)) <= 8
    original = save(scan, tmp_path / "original.png")
    copy = save(scan.resize((120, 120), Image.Resampling.BICUBIC), tmp_path / "copy.jpg", quality=85)
    other = save(render_scan(ScanSpec("CT", "kidney", True, "left", 2, seed=5)), tmp_path / "other.png")
    original_v, copy_v, other_v = hasher.embed([original, copy, other])
    assert cosine_distance(original_v, copy_v) < 0.1 < cosine_distance(original_v, other_v)


def test_phash_identical_files_have_distance_zero(tmp_path):
    scan = render_scan(ScanSpec("X-Ray", "lung", seed=1))
    first, second = save(scan, tmp_path / "a.png"), save(scan, tmp_path / "b.png")
    vectors = PerceptualHash().embed([first, second])
    assert cosine_distance(vectors[0], vectors[1]) == pytest.approx(0.0, abs=1e-6)


def test_load_embedder_dispatches_on_the_schema():
    cfg = OmegaConf.structured(PHashEmbedderConfig(name="phash", hash_size=8, highfreq_factor=2))
    embedder = load_embedder(cfg)
    assert isinstance(embedder, PerceptualHash) and embedder.dim == 64
    with pytest.raises(ValueError, match="/schema/embedder@_here_"):
        load_embedder(OmegaConf.create({"name": "mystery"}))


# --- open_clip ---------------------------------------------------------------------------------

TINY_SIGLIP = {
    "embed_dim": 48,
    "init_logit_bias": -10,
    "custom_text": True,
    "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 32, "layers": 2, "head_width": 16, "pool_type": "avg"},
    "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 32, "heads": 2, "layers": 1, "no_causal_mask": True},
}


@pytest.fixture()
def tiny_cfg(tmp_path):
    path = tmp_path / "medexp-tiny-siglip.json"
    path.write_text(json.dumps(TINY_SIGLIP))
    node = OpenClipEmbedderConfig(
        name="tiny", model="medexp-tiny-siglip", model_config=str(path), pretrained=None, dim=48, device="cpu"
    )
    return OmegaConf.structured(node)


def test_tiny_open_clip_model_embeds_with_siglip_normalisation(tiny_cfg, tmp_path):
    import open_clip
    import torch

    images = [render_scan(ScanSpec("MRI", "brain", seed=k)) for k in range(3)]
    paths = [save(image, tmp_path / f"{k}.png") for k, image in enumerate(images)]
    embedder = load_embedder(tiny_cfg)
    assert isinstance(embedder, OpenClipEmbedder) and embedder.dim == 48
    vectors = embedder.embed(paths)
    assert vectors.shape == (3, 48) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(load_embedder(tiny_cfg).embed(paths), vectors)  # reproducible weights
    # by hand: squash-resize to 32 px (bicubic), scale to [0, 1], (x - 0.5) / 0.5, encode, normalise
    model, _, _ = embedder._loaded
    pixels = [
        np.asarray(image.convert("RGB").resize((32, 32), Image.Resampling.BICUBIC), dtype=np.float32) / 255.0
        for image in images
    ]
    batch = torch.from_numpy((np.stack(pixels) - 0.5) / 0.5).permute(0, 3, 1, 2)
    with torch.no_grad():
        expected = model.encode_image(batch, normalize=True).numpy()
    np.testing.assert_allclose(vectors, expected, atol=0.05)  # torchvision and PIL bicubic differ slightly
    assert open_clip.get_model_config("medexp-tiny-siglip")["embed_dim"] == 48


# SigLIP in open_clip is a timm tower (``TimmModel``: attention-pool head, no projection), which,
# unlike open_clip's own VisionTransformer above, has no ``output_dim``: the shape of the real
# siglip_b16 / siglip_so400m towers at the size of timm's smallest ViT.
TINY_TIMM_SIGLIP = {
    "embed_dim": 192,
    "init_logit_bias": -10,
    "custom_text": True,
    "vision_cfg": {"image_size": 224, "timm_model_name": "vit_tiny_patch16_224", "timm_model_pretrained": False,
                   "timm_pool": "map", "timm_proj": "none"},
    "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 32, "heads": 2, "layers": 1, "no_causal_mask": True},
}


def test_a_timm_tower_embeds_at_its_architecture_width(tmp_path):
    path = tmp_path / "medexp-tiny-timm-siglip.json"
    path.write_text(json.dumps(TINY_TIMM_SIGLIP))
    cfg = OmegaConf.structured(OpenClipEmbedderConfig(
        name="tiny_timm", model="medexp-tiny-timm-siglip", model_config=str(path), pretrained=None, dim=None, device="cpu"))
    image = save(render_scan(ScanSpec("MRI", "brain", seed=0)), tmp_path / "scan.png")
    embedder = load_embedder(cfg)
    assert embedder.dim == 192  # from the architecture, before the model is built
    vectors = embedder.embed([image, image])
    assert vectors.shape == (2, 192)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cfg.dim = 1152
    with pytest.raises(ValueError, match="gives 192-d vectors, config says dim=1152"):
        load_embedder(cfg).embed([image])


def test_wrong_declared_width_and_unknown_model_fail_clearly(tiny_cfg, tmp_path):
    path = save(render_scan(ScanSpec("CT", "liver", seed=0)), tmp_path / "x.png")
    tiny_cfg.dim = 768
    with pytest.raises(ValueError, match="gives 48-d vectors, config says dim=768"):
        load_embedder(tiny_cfg).embed([path])
    tiny_cfg.dim, tiny_cfg.model_config, tiny_cfg.model = None, None, "no-such-model"
    with pytest.raises(ValueError, match="unknown open_clip model 'no-such-model'"):
        load_embedder(tiny_cfg).embed([path])


def test_missing_weights_file_explains_how_to_get_weights(tiny_cfg, tmp_path):
    path = save(render_scan(ScanSpec("CT", "liver", seed=0)), tmp_path / "x.png")
    tiny_cfg.pretrained = str(tmp_path / "absent" / "open_clip_pytorch_model.bin")
    with pytest.raises(RuntimeError, match="pretrained=/path/to/open_clip_pytorch_model.bin"):
        load_embedder(tiny_cfg).embed([path])


def test_real_siglip_configs_have_the_published_widths():
    import open_clip

    from medexp.config import compose

    for option, model, width in (("siglip_b16", "ViT-B-16-SigLIP", 768), ("siglip_so400m", "ViT-SO400M-14-SigLIP", 1152)):
        cfg = compose(["detector=image_nn", f"embedder@detector.embedder={option}"]).detector.embedder
        assert (cfg.model, cfg.pretrained, cfg.dim) == (model, "webli", width)
        assert open_clip.get_model_config(model)["embed_dim"] == width
        assert list(cfg.image_mean) == list(cfg.image_std) == [0.5, 0.5, 0.5]
        tag = open_clip.get_pretrained_cfg(model, "webli")
        assert (tag["mean"], tag["std"], tag["interpolation"], tag["resize_mode"]) == (
            (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), cfg.interpolation, cfg.resize_mode
        )


@pytest.mark.extended
def test_offline_hub_download_fails_with_instructions(tmp_path):
    """The real `pretrained: webli` path, offline: a clear error instead of a hub traceback."""
    probe = (
        "from medexp.config import compose; from medexp.images import load_embedder; import medexp;"
        "cfg = compose(['detector=image_nn', 'embedder@detector.embedder=siglip_b16']).detector.embedder;"
        "load_embedder(cfg).embed([])"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "could not load open_clip weights ViT-B-16-SigLIP/webli" in result.stderr
    assert "embedder.pretrained=/path/to/open_clip_pytorch_model.bin" in result.stderr

