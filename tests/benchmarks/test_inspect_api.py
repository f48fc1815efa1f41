"""``python -m medexp.inspect``, ``medexp.benchmarks.load_benchmark`` and the CLI composing each benchmark."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from omegaconf.errors import ValidationError

from medexp.benchmarks import load_benchmark
from medexp.benchmarks.base import Example
from medexp.inspect import MAX_LISTED_VALUES, strata
from tests.benchmarks.upstream import (
    VQA_RAD_IMAGE_DIR, corrupt_bytes, mask_bytes, vqa_rad_release_records, write_slake, write_vqa_rad,
)
from tests.conftest import REPO, run_medexp


def run_inspect(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEDEXP_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "medexp.inspect", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_inspect_prints_counts_and_strata_as_json(tmp_path):
    root = write_slake(tmp_path / "slake")
    (root / "imgs" / "xmlab7" / "source.jpg").unlink()  # one English question loses its image
    refused = run_inspect("bench=slake", f"bench.root={root}", cache=tmp_path / "cache")
    # 1 of 5 rows skipped is above the default 1%: refused, but still described
    assert refused.returncode == 1 and "TooManySkipped: bench=slake split=test: 1 of 5 rows skipped" in refused.stderr
    assert json.loads(refused.stdout)["findings"][0].startswith("refused: bench=slake split=test: 1 of 5 rows skipped")
    result = run_inspect("bench=slake", f"bench.root={root}", "bench.max_skipped_share=0.5", cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["name"] == "slake" and summary["split"] == "test" and summary["format"] == "slake"
    assert summary["version"] == 1
    assert (summary["n_examples"], summary["n_with_image"], summary["n_skipped"]) == (4, 4, 1)
    assert summary["skipped"] == {"missing image": 1} and summary["n_skipped.missing_image"] == 1
    assert summary["skipped_rows"] == [{"row": "slake::test::11950", "reason": f"missing image: {root / 'imgs/xmlab7/source.jpg'}"}]
    assert summary["files"] == [str(root / "test.json")]
    assert summary["expected_examples"] == 1061 and summary["matches_expected"] is False
    assert summary["strata"]["answer_type"] == {"OPEN": 3, "CLOSED": 1}
    assert summary["strata"]["modality"] == {"CT": 2, "X-Ray": 2}
    assert summary["strata"]["img_name"] == {"xmlab102/source.jpg": 2, "xmlab160/source.jpg": 2}
    assert "expects 1061" in result.stderr  # the mismatch warning is logged


def test_inspect_reads_the_official_vqa_rad_release(tmp_path):
    records = vqa_rad_release_records()  # 2,248 rows, 451 test rows (272 CLOSED), 315 images
    root = write_vqa_rad(tmp_path / "VQA_RAD", records)
    result = run_inspect("bench=vqa_rad", f"bench.root={root}", cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["format"], summary["layout"], summary["root"]) == ("vqa_rad", "vqa_rad_osf", str(root))
    assert (summary["n_examples"], summary["n_skipped"], summary["expected_examples"]) == (451, 0, 451)
    assert summary["matches_expected"] is True
    assert summary["findings"] == ["451 examples, as the config expects for split test"]
    test = [record for record in records if record["phrase_type"] in ("test_freeform", "test_para")]
    assert summary["strata"]["answer_type"] == {"CLOSED": 272, "OPEN": 179}
    assert summary["strata"]["phrase_type"] == dict(Counter(record["phrase_type"] for record in test).most_common())
    assert summary["strata"]["qid"] == {"n_distinct": 451}
    per_image = Counter(record["image_name"] for record in test)
    images = summary["images"]
    assert images["n_distinct"] == len(per_image)
    assert images["questions_per_image"] == {
        "min": min(per_image.values()), "median": statistics.median(per_image.values()), "max": max(per_image.values())}
    assert images["duplicates"] == {"n_groups": 0, "n_images": 0, "groups": []}
    assert "roi" not in summary
    assert (tmp_path / "cache" / "digests.sqlite").is_file()  # digests remembered for the next run


def test_inspect_names_missing_corrupt_and_byte_identical_images(tmp_path):
    root = write_vqa_rad(tmp_path / "VQA_RAD")  # test rows: qid 1, 3 -> synpic29265; 12, 10 -> synpic42202;
    folder = root / VQA_RAD_IMAGE_DIR           # 4 -> synpic100176; 8 -> synpic54610
    duplicate = (folder / "synpic29265.jpg").read_bytes()
    (folder / "synpic100176.jpg").write_bytes(duplicate)  # the same picture under a second name
    (folder / "synpic42202.jpg").unlink()
    (folder / "synpic54610.jpg").write_bytes(corrupt_bytes())
    result = run_inspect("bench=vqa_rad", f"bench.root={root}", "bench.max_skipped_share=0.5", cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["n_examples"], summary["n_skipped"]) == (3, 3)
    assert summary["skipped"] == {"missing image": 2, "corrupt image": 1}
    images = summary["images"]
    assert images["n_distinct"] == 2 and images["questions_per_image"] == {"min": 1, "median": 1.5, "max": 2}
    assert images["missing"] == {"n_images": 1, "n_questions": 2, "images": [str(folder / "synpic42202.jpg")]}
    assert (images["corrupt"]["n_images"], images["corrupt"]["n_questions"]) == (1, 1)
    assert images["corrupt"]["images"][0].startswith(f"{folder / 'synpic54610.jpg'}: ")
    assert images["duplicates"] == {"n_groups": 1, "n_images": 2, "groups": [{
        "sha256": hashlib.sha256(duplicate).hexdigest(),
        "images": [str(folder / "synpic29265.jpg"), str(folder / "synpic100176.jpg")],
        "n_questions": 3,
    }]}
    assert summary["findings"] == [
        ("3 examples where the config expects 451 for split test (-448): is the copy complete, and are the layout "
         "(vqa_rad_osf) and split right?"),
        f"2 question(s) skipped for 1 missing image(s), e.g. {folder / 'synpic42202.jpg'}",
        f"1 question(s) skipped for 1 corrupt image(s), e.g. {images['corrupt']['images'][0]}",
        "1 group(s) of byte-identical images under different names (2 files): the same picture is counted as distinct images",
    ]


def test_inspect_summarises_slake_regions(tmp_path):
    root = write_slake(tmp_path / "slake")
    (root / "imgs" / "xmlab102" / "mask.png").write_bytes(mask_bytes((30, 40)))  # transposed: 30x40 for a 40x30 image
    result = run_inspect("bench=slake", f"bench.root={root}", cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["layout"] == "slake_release"
    assert not {"roi_boxes", "roi_mask"} & set(summary["strata"])
    assert summary["roi"] == {
        "n_examples_annotated": 4, "n_images_annotated": 2, "n_images_without_annotation": 1, "n_boxes": 3,
        "labels": {"Liver": 1, "Tumor": 1, "Left Lung": 1}, "n_images_with_mask": 1,
        "mask_size_mismatch": {"n_masks": 1, "masks": [str(root / "imgs" / "xmlab102" / "mask.png")]},
    }
    assert summary["findings"][-1] == "1 mask(s) differ in size from their image"


def test_inspect_expected_count_match(tmp_path):
    root = write_slake(tmp_path / "slake")
    result = run_inspect("bench=slake", f"bench.root={root}", "bench.expected_by_split.test=5", cache=tmp_path / "cache")
    summary = json.loads(result.stdout)
    assert summary["n_examples"] == 5 and summary["matches_expected"] is True and summary["skipped"] == {}


@pytest.mark.parametrize("args,message", [
    (["bench=slake"], "hf download BoKelvin/SLAKE --repo-type dataset"),
    (["bench=nope"], "Could not find 'bench/nope'"),
    (["bench=slake", "bench.max_examples=many"], "bench.max_examples"),
    (["bench.root=/tmp"], "name the benchmark with bench=<name>"),
])
def test_inspect_errors_exit_non_zero_with_a_message(tmp_path, args, message):
    result = run_inspect(*args, cache=tmp_path / "cache")
    assert result.returncode != 0
    assert result.stdout == ""
    assert message in result.stderr


def test_inspect_usage():
    from medexp.inspect import main

    assert main(["--help"]) == 0
    assert main([]) == 2


def test_strata_lists_few_values_and_counts_many():
    examples = [Example(f"x::t::{i}", i, None, "q", "a", meta={"side": "left" if i % 3 else "right",
                                                              "case": f"case{i}", "size": i % 2, "flags": [i % 2]})
                for i in range(MAX_LISTED_VALUES + 1)]
    counts = strata(examples)
    assert counts["side"] == {"left": 20, "right": 11}
    assert list(counts["side"]) == ["left", "right"]  # most common first
    assert counts["case"] == {"n_distinct": MAX_LISTED_VALUES + 1}
    assert counts["size"] == {"0": 16, "1": 15}
    assert counts["flags"] == {"[0]": 16, "[1]": 15}


def test_load_benchmark_api(tmp_path):
    root = write_slake(tmp_path / "slake")
    bench = load_benchmark("slake", root=root, split="test", cache_dir=tmp_path / "cache")
    frame = bench.frame()
    assert list(frame.columns)[:4] == ["example_id", "position", "question", "answer"]
    assert {"answer_type", "content_type", "modality", "location", "base_type", "img_name"} <= set(frame.columns)
    assert frame["example_id"].tolist() == [f"slake::test::{qid}" for qid in (11934, 12035, 12001, 11950, 11800)]
    assert frame["position"].tolist() == [0, 1, 2, 3, 4]
    assert frame["answer_type"].tolist() == ["OPEN", "CLOSED", "OPEN", "CLOSED", "OPEN"]
    capped = load_benchmark("slake", root=str(root), max_examples=2, cache_dir=tmp_path / "cache")
    assert capped.examples == bench.examples[:2]


def test_load_benchmark_rejects_bad_overrides(tmp_path):
    with pytest.raises(ValueError, match="unknown bench field 'rooot'"):
        load_benchmark("slake", rooot="/x")
    with pytest.raises(ValidationError, match="max_examples"):
        load_benchmark("slake", max_examples="many")


def test_import_medexp_stays_light():
    probe = (
        "import sys, medexp.inspect; from medexp.benchmarks import load_benchmark; assert callable(load_benchmark);"
        "heavy = [m for m in ('torch', 'transformers', 'mlflow', 'open_clip', 'faiss', 'pandas', 'pyarrow',"
        " 'numpy', 'PIL', 'huggingface_hub', 'datasets') if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name,fmt,hub_id", [
    ("slake", "slake", "BoKelvin/SLAKE"),
    ("pathvqa", "pathvqa", "flaviagiammarino/path-vqa"),
    ("vqa_rad", "vqa_rad", "flaviagiammarino/vqa-rad"),
    ("omnimedvqa", "omnimedvqa", "foreverbeliever/OmniMedVQA"),
])
def test_cli_composes_each_benchmark(name, fmt, hub_id):
    result = run_medexp(f"bench={name}", "--cfg", "job", timeout=300)
    assert result.returncode == 0, result.stderr
    bench = yaml.safe_load(result.stdout)["bench"]
    assert (bench["name"], bench["format"], bench["hub_id"]) == (name, fmt, hub_id)
    expected = bench["expected_examples"] or bench["expected_by_split"][bench["split"]]
    assert expected == {"slake": 1061, "pathvqa": 6719, "vqa_rad": 451, "omnimedvqa": 4999}[name]
