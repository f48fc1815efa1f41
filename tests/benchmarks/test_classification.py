"""Classification layouts: ImageFolder, the metadata CSV (HAM10000) and the generated demo sets."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from medexp.benchmarks import load_benchmark
from medexp.benchmarks.classification import image_folder
from medexp.config.schemas import DemoClassesConfig
from tests.benchmarks.upstream import corrupt_bytes, image_bytes, write_file

HAM_COLUMNS = ["lesion_id", "image_id", "dx", "dx_type", "age", "sex", "localization"]
# (lesion_id, image_id, dx, dx_type, age, sex, localization, where the image is): the release's
# two image folders; one row whose image is in neither, one whose image does not decode.
HAM_ROWS = [
    ("HAM_0000118", "ISIC_0027419", "bkl", "histo", "80.0", "male", "scalp", "part_1"),
    ("HAM_0000118", "ISIC_0025030", "bkl", "histo", "80.0", "male", "scalp", "part_1"),
    ("HAM_0002730", "ISIC_0026769", "nv", "follow_up", "50.0", "female", "back", "part_2"),
    ("HAM_0001466", "ISIC_0031633", "nv", "consensus", "", "unknown", "trunk", "part_2"),
    ("HAM_0004000", "ISIC_0029176", "df", "histo", "45.0", "female", "lower extremity", None),
    ("HAM_0005132", "ISIC_0025837", "mel", "histo", "60.0", "male", "face", "part_1"),
    ("HAM_0002700", "ISIC_0030000", "nv", "histo", "35.0", "male", "back", "corrupt"),
    ("HAM_0001396", "ISIC_0025276", "nv", "follow_up", "55.0", "female", "chest", "part_2"),
]


@pytest.fixture
def ham_root(tmp_path) -> Path:
    root = tmp_path / "HAM10000"
    root.mkdir()
    with (root / "HAM10000_metadata.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HAM_COLUMNS)
        for row in HAM_ROWS:
            writer.writerow(row[:7])
    for seed, (*_, image_id, _dx, _t, _a, _s, _l, where) in enumerate(HAM_ROWS):
        if where in ("part_1", "part_2"):
            write_file(root / f"HAM10000_images_{where}" / f"{image_id}.jpg", image_bytes(seed, "JPEG", 16))
        elif where == "corrupt":
            write_file(root / "HAM10000_images_part_1" / f"{image_id}.jpg", corrupt_bytes(seed))
    return root


def test_ham10000_csv_loads_in_file_order_with_frequencies_and_meta(ham_root, tmp_path):
    bench = load_benchmark("ham10000", cache_dir=tmp_path / "cache", root=ham_root, max_skipped_share=0.5)
    kept = [row for row in HAM_ROWS if row[7] in ("part_1", "part_2")]
    assert [ex.example_id for ex in bench.examples] == [f"ham10000::train::{row[1]}" for row in kept]
    assert [ex.answer for ex in bench.examples] == [row[2] for row in kept]
    assert all(ex.question == "" and ex.image.name == f"{ex.example_id.split('::')[-1]}.jpg" for ex in bench.examples)
    first = bench.examples[0]
    assert first.meta["label"] == "bkl" and first.meta["lesion_id"] == "HAM_0000118"
    assert first.meta["localization"] == "scalp" and first.meta["dx_type"] == "histo"
    counts = Counter(ex.answer for ex in bench.examples)
    for example in bench.examples:
        assert example.meta["class_frequency"] == pytest.approx(counts[example.answer] / len(bench))
    reasons = {skip.example_id: skip.kind for skip in bench.skipped}
    assert reasons == {"ham10000::train::ISIC_0029176": "missing image", "ham10000::train::ISIC_0030000": "corrupt image"}


def test_csv_errors_name_the_file_and_the_column(ham_root, tmp_path):
    with pytest.raises(ValueError, match=r"HAM10000_metadata.csv: no column\(s\) \['diagnosis'\]"):
        load_benchmark("ham10000", cache_dir=tmp_path, root=ham_root, label_column="diagnosis")
    with pytest.raises(FileNotFoundError, match="no_such.csv"):
        load_benchmark("ham10000", cache_dir=tmp_path, root=ham_root, csv_file="no_such.csv")
    with pytest.raises(FileNotFoundError, match="image_dirs"):
        load_benchmark("ham10000", cache_dir=tmp_path, root=ham_root, image_dirs=["HAM10000_images_part_3"])
    with pytest.raises(ValueError, match="bench.root"):
        load_benchmark("ham10000", cache_dir=tmp_path)


def test_a_csv_row_with_an_empty_label_is_skipped_and_counted(tmp_path):
    root = tmp_path / "set"
    write_file(root / "images" / "a.png", image_bytes(1))
    write_file(root / "images" / "b.png", image_bytes(2))
    (root / "labels.csv").write_text("file,finding\na.png,effusion\nb.png,\n", encoding="utf-8")
    bench = load_benchmark("ham10000", cache_dir=tmp_path, root=root, csv_file="labels.csv", image_column="file",
                           label_column="finding", image_dirs=["images"], image_extension=None, expected_examples=None,
                           max_skipped_share=0.5)
    assert [ex.answer for ex in bench.examples] == ["effusion"]
    assert [skip.kind for skip in bench.skipped] == ["missing field"]


@pytest.fixture
def folder_root(tmp_path) -> Path:
    root = tmp_path / "kvasir"
    for seed, name in enumerate(["normal/b.png", "normal/a.jpg", "erosion/c.png", "polyp/z.png", "polyp/y.png",
                                 "polyp/x.png"]):
        write_file(root / "train" / name, image_bytes(seed, "JPEG" if name.endswith(".jpg") else "PNG"))
    write_file(root / "train" / "polyp" / "broken.png", corrupt_bytes())
    write_file(root / "train" / "normal" / "notes.txt", b"not an image")
    return root


def test_image_folder_order_classes_frequencies_and_skips(folder_root, tmp_path):
    bench = load_benchmark("image_folder", cache_dir=tmp_path, root=folder_root, split="train", max_skipped_share=0.5)
    assert [ex.example_id for ex in bench.examples] == [
        "image_folder::train::erosion/c.png",
        "image_folder::train::normal/a.jpg",
        "image_folder::train::normal/b.png",
        "image_folder::train::polyp/x.png",
        "image_folder::train::polyp/y.png",
        "image_folder::train::polyp/z.png",
    ]
    assert [ex.answer for ex in bench.examples] == ["erosion", "normal", "normal", "polyp", "polyp", "polyp"]
    assert [ex.meta["class_frequency"] for ex in bench.examples] == pytest.approx([1 / 6, 2 / 6, 2 / 6, 3 / 6, 3 / 6, 3 / 6])
    assert [skip.example_id for skip in bench.skipped] == ["image_folder::train::polyp/broken.png"]


def test_image_folder_errors(folder_root, tmp_path):
    with pytest.raises(FileNotFoundError, match="no split folder .*test"):
        image_folder("kvasir", folder_root, "test")
    (folder_root / "empty").mkdir()
    with pytest.raises(ValueError, match="no class folders"):
        image_folder("kvasir", folder_root, "empty")
    with pytest.raises(ValueError, match="bench.root"):
        load_benchmark("image_folder", cache_dir=tmp_path)


def test_demo_findings_is_generated_deterministically_with_a_rare_class(tmp_path):
    settings = DemoClassesConfig(n_images=200, seed=5)  # the default weights: three lesions ~6%
    first = load_benchmark("demo_findings", cache_dir=tmp_path / "a", demo_classes=settings)
    second = load_benchmark("demo_findings", cache_dir=tmp_path / "b", demo_classes=settings)
    assert [ex.example_id for ex in first.examples] == [ex.example_id for ex in second.examples]
    assert [ex.image.read_bytes() for ex in first.examples[:20]] == [ex.image.read_bytes() for ex in second.examples[:20]]
    shares = Counter(ex.answer for ex in first.examples)
    assert set(shares) == {"normal", "one_lesion", "two_lesions", "three_lesions"}
    assert min(shares, key=shares.get) == "three_lesions" and shares["three_lesions"] / 200 < 0.12
    # the ground truth agrees with the folders: the class is the scan's lesion count
    root = first.examples[0].image.parents[3]
    specs = [json.loads(line) for line in (root / "labels.jsonl").read_text().splitlines()]
    counts = {"normal": 0, "one_lesion": 1, "two_lesions": 2, "three_lesions": 3}
    assert all(spec["scan"]["lesion_count"] == counts[spec["label"]] for spec in specs)
    assert len(specs) == 200 and all((root / spec["image"]).is_file() for spec in specs)


def test_demo_sides_labels_the_lesion_side(tmp_path):
    weights = {"normal": 0.4, "left": 0.15, "right": 0.15, "upper": 0.15, "lower": 0.15}
    bench = load_benchmark("demo_sides", cache_dir=tmp_path,
                           demo_classes=DemoClassesConfig(labels="side", n_images=60, seed=1, class_weights=weights))
    root = bench.examples[0].image.parents[3]
    for line in (root / "labels.jsonl").read_text().splitlines():
        spec = json.loads(line)
        assert spec["scan"]["lesion_side"] == (None if spec["label"] == "normal" else spec["label"])
    with pytest.raises(ValueError, match="the side classes are"):
        load_benchmark("demo_sides", cache_dir=tmp_path / "x", demo_classes=DemoClassesConfig(
            labels="side", n_images=10, seed=1, class_weights={"one_lesion": 1.0}))
