"""A local VQA benchmark (generic ``local`` layout) whose test split reuses train images, as real
releases do: one image file per image, each used by several questions, the splits sharing the
image folder. What experiment=split_overlap must report is returned with it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from medexp.demo.scans import MODALITIES, ORGANS, ScanSpec, png_bytes, render_scan


def _scan(k: int) -> Image.Image:
    return render_scan(ScanSpec(MODALITIES[k % 4], ORGANS[(k // 4) % 5], seed=k), size=64)


def _brighter(image: Image.Image, shift: int = 6) -> Image.Image:
    return Image.fromarray(np.clip(np.asarray(image, dtype=np.int16) + shift, 0, 255).astype(np.uint8))


def write_split_benchmark(root: Path) -> dict:
    """Write train (11 images x 3 questions), valid (4 x 1) and test (6 images, 11 questions).

    Test images: 0 and 2 are byte copies of train images under their own names, 1 is the train
    file itself (the splits share images/), 3 is a train image re-encoded (other bytes, the same
    pixels, hence the same perceptual hash), 4 is new but copied into valid, 5 is new. Train and
    valid each hold one near pair (a scan and a brighter copy) and otherwise distinct scans.
    """
    images = root / "images"
    images.mkdir(parents=True)

    def save(name: str, image: Image.Image) -> str:
        (images / name).write_bytes(png_bytes(image))
        return f"images/{name}"

    train = [save(f"train_{k}.png", _scan(k)) for k in range(10)] + [save("train_10.png", _brighter(_scan(0)))]
    test = [
        save("test_0.png", _scan(2)),
        train[7],
        save("test_2.png", _scan(4)),
        None,
        save("test_4.png", _scan(40)),
        save("test_5.png", _scan(41)),
    ]
    Image.open(images / "train_6.png").save(images / "test_3.png", format="PNG", compress_level=9)
    test[3] = "images/test_3.png"
    valid = [save("valid_0.png", _scan(50)), save("valid_1.png", _brighter(_scan(50))), save("valid_2.png", _scan(51)),
             save("valid_3.png", _scan(40))]
    test_uses = [2, 1, 3, 1, 2, 2]

    def write(split: str, paths: list[str], uses: list[int]) -> None:
        rows = [{"id": f"{split}{index}_{q}", "question": f"What is shown ({q})?", "answer": "a scan", "image": path}
                for index, (path, count) in enumerate(zip(paths, uses)) for q in range(count)]
        (root / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")

    write("train", train, [3] * len(train))
    write("valid", valid, [1] * len(valid))
    write("test", test, test_uses)
    n_questions = sum(test_uses)
    return {
        "n_images": 6,
        "n_questions": n_questions,
        # against train: test images 0, 1, 2 (same bytes) and 3 (same vector); against valid: image 4
        "train": {"images": 4, "questions": 2 + 1 + 3 + 1, "same_bytes": 3, "same_vector": 1, "corpus_rows": 33},
        "valid": {"images": 1, "questions": 2, "same_bytes": 1, "same_vector": 0, "corpus_rows": 4},
    }
