"""PMC-OA figure corpus: <split>.jsonl with image + caption, images in a folder or a zip."""

from __future__ import annotations

import json
import zipfile

import pytest
from omegaconf import OmegaConf

from medexp.benchmarks import load_benchmark_from_config
from medexp.config.schemas import BenchConfig
from tests.benchmarks.upstream import corrupt_bytes, image_bytes, write_file

FIGURES = [
    ("PMC2531090_F1.jpg", "Frontal chest radiograph."),
    ("PMC1064082_F3.jpg", "Axial CT of the abdomen."),
    ("PMC1001010_F2.jpg", "H&E stain, x40."),
]


def write_corpus(root, zipped_as=None):
    root.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"image": name, "caption": caption, "pmcid": name.split("_")[0]}) for name, caption in FIGURES]
    (root / "train.jsonl").write_text("\n".join(lines) + "\n")
    images = {name: (corrupt_bytes() if index == 1 else image_bytes(index, "JPEG")) for index, (name, _) in enumerate(FIGURES)}
    if zipped_as is None:
        for name, data in images.items():
            write_file(root / "images" / name, data)
    else:
        with zipfile.ZipFile(root / "images.zip", "w") as bundle:
            for name, data in images.items():
                bundle.writestr(f"{zipped_as}{name}", data)
    return root


def cfg(root, **fields):
    # the fixture plants one corrupt figure of three: far above the default 1% of skipped rows
    return OmegaConf.merge(OmegaConf.structured(BenchConfig), {
        "name": "pmc_oa", "format": "pmc_oa", "split": "train", "root": str(root), "max_skipped_share": 0.5, **fields})


@pytest.mark.parametrize("zipped_as", [None, "images/", "caption_T060_filtered_top4_sep_v0_subfigures/", ""])
def test_captions_become_answers_in_file_order(tmp_path, zipped_as):
    root = write_corpus(tmp_path / "pmc_oa", zipped_as)
    bench = load_benchmark_from_config(cfg(root), tmp_path / "cache")
    assert [ex.example_id for ex in bench.examples] == ["pmc_oa::train::PMC2531090_F1.jpg", "pmc_oa::train::PMC1001010_F2.jpg"]
    assert [ex.answer for ex in bench.examples] == [FIGURES[0][1], FIGURES[2][1]]
    assert all(ex.question == "" for ex in bench.examples)
    assert bench.examples[0].meta == {"upstream_id": "PMC2531090_F1.jpg", "pmcid": "PMC2531090"}
    assert bench.examples[1].image.read_bytes() == image_bytes(2, "JPEG")
    assert [(skip.example_id, skip.kind) for skip in bench.skipped] == [("pmc_oa::train::PMC1064082_F3.jpg", "corrupt image")]


def test_custom_image_dir_and_missing_caption(tmp_path):
    root = write_corpus(tmp_path / "pmc_oa")
    (root / "images").rename(root / "figures")
    assert len(load_benchmark_from_config(cfg(root, image_dir="figures"), tmp_path / "cache")) == 2
    # a figure without a caption is still an image of the corpus; a line without an image is skipped
    (root / "train.jsonl").write_text(json.dumps({"image": FIGURES[0][0]}) + "\n" + json.dumps({"caption": "x"}) + "\n")
    bench = load_benchmark_from_config(cfg(root, image_dir="figures"), tmp_path / "cache")
    assert [(ex.example_id, ex.answer) for ex in bench.examples] == [(f"pmc_oa::train::{FIGURES[0][0]}", "")]
    assert list(bench.flaws.values())[0]["answer"].startswith(f"missing answer: {root / 'train.jsonl'}:1: caption is missing")
    assert bench.skipped[0].reason == f"missing image: {root / 'train.jsonl'}:2: image is missing"
