"""Writers of small fixtures in the exact upstream file formats the loaders read."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

# A datasets-style row group size small enough that a split spans several row groups.
ROW_GROUP = 4


def image_bytes(seed: int, fmt: str = "PNG", size: int | tuple[int, int] = 12) -> bytes:
    """A small random RGB image, distinct per seed; ``size`` is a side or ``(width, height)``."""
    width, height = (size, size) if isinstance(size, int) else size
    pixels = (np.random.default_rng(seed).random((height, width, 3)) * 255).astype("uint8")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


def corrupt_bytes(seed: int = 0) -> bytes:
    """A PNG signature followed by garbage: recognised as PNG by name, undecodable."""
    return b"\x89PNG\r\n\x1a\n" + np.random.default_rng(seed).bytes(200)


def write_file(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# ----------------------------------------------------------------------------------------- SLAKE
# (qid, img_name, q_lang, answer_type, content_type, modality, location) in file order: the
# release interleaves English and Chinese questions about the same image.
SLAKE_ROWS = [
    (11934, "xmlab102/source.jpg", "en", "OPEN", "Organ", "CT", "Abdomen"),
    (11935, "xmlab102/source.jpg", "zh", "OPEN", "Organ", "CT", "Abdomen"),
    (12035, "xmlab160/source.jpg", "en", "CLOSED", "Abnormality", "X-Ray", "Chest"),
    (12001, "xmlab160/source.jpg", "en", "OPEN", "Modality", "X-Ray", "Chest"),
    (12002, "xmlab160/source.jpg", "zh", "CLOSED", "Abnormality", "X-Ray", "Chest"),
    (11950, "xmlab7/source.jpg", "en", "CLOSED", "Position", "MRI", "Brain"),
    (11951, "xmlab7/source.jpg", "zh", "OPEN", "Position", "MRI", "Brain"),
    (11800, "xmlab102/source.jpg", "en", "OPEN", "Size", "CT", "Abdomen"),
]
SLAKE_IMAGES = ("xmlab102/source.jpg", "xmlab160/source.jpg", "xmlab7/source.jpg")
SLAKE_IMAGE_SIZES = {"xmlab102": (40, 30), "xmlab160": (20, 25), "xmlab7": (12, 12)}  # (width, height)
# The release's region annotations, beside source.jpg: detection.json ({label: [x, y, w, h]} in
# pixels) for two images, mask.png for one, nothing for xmlab7. The Tumor box overhangs its image.
SLAKE_DETECTIONS = {
    "xmlab102": [{"Liver": [4, 3, 20, 12]}, {"Tumor": [30, 20, 15, 15]}],
    "xmlab160": [{"Left Lung": [2, 5, 8, 10]}],
}
SLAKE_MASKS = ("xmlab102",)


def slake_records() -> list[dict]:
    """test.json content with every key of the official release (img_id int, triple list ...)."""
    records = []
    for index, (qid, img_name, lang, answer_type, content_type, modality, location) in enumerate(SLAKE_ROWS):
        img_id = int(img_name.split("/")[0].removeprefix("xmlab"))
        records.append({
            "img_id": img_id,
            "img_name": img_name,
            "question": f"{'Which' if lang == 'en' else '哪个'} question {index}?",
            "answer": f"answer {index}" if lang == "en" else f"答案 {index}",
            "q_lang": lang,
            "location": location,
            "modality": modality,
            "answer_type": answer_type,
            "base_type": "vqa",
            "content_type": content_type,
            "triple": ["vhead", "_", "_"],
            "qid": qid,
        })
    return records


def slake_image_files() -> dict[str, bytes]:
    """Every file of the release's imgs/ folder used here: source.jpg, detection.json, mask.png."""
    files = {}
    for seed, name in enumerate(SLAKE_IMAGES):
        folder = name.split("/")[0]
        files[name] = image_bytes(seed, "JPEG", SLAKE_IMAGE_SIZES[folder])
        if folder in SLAKE_DETECTIONS:
            files[f"{folder}/detection.json"] = json.dumps(SLAKE_DETECTIONS[folder]).encode()
        if folder in SLAKE_MASKS:
            files[f"{folder}/mask.png"] = mask_bytes(SLAKE_IMAGE_SIZES[folder])
    return files


def mask_bytes(size: tuple[int, int]) -> bytes:
    """A grayscale PNG segmentation mask of ``(width, height)``: organ labels as gray levels."""
    width, height = size
    labels = (np.arange(width * height).reshape(height, width) % 3 * 80).astype("uint8")
    buffer = io.BytesIO()
    Image.fromarray(labels).save(buffer, format="PNG")
    return buffer.getvalue()


def write_slake(root: Path, records: list[dict] | None = None, zipped: bool = False) -> Path:
    """The official layout (test.json + imgs/) or the hub layout (test.json + imgs.zip)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "test.json").write_text(json.dumps(records or slake_records(), ensure_ascii=False), encoding="utf-8")
    files = slake_image_files()
    if zipped:
        with zipfile.ZipFile(root / "imgs.zip", "w") as bundle:
            for name, data in files.items():
                bundle.writestr(f"imgs/{name}", data)
    else:
        for name, data in files.items():
            write_file(root / "imgs" / name, data)
    return root


# ------------------------------------------------------------------------------ VQA-RAD (OSF)
VQA_RAD_JSON = "VQA_RAD Dataset Public.json"
VQA_RAD_IMAGE_DIR = "VQA_RAD Image Folder"
# The release's keys, in the order its records list them.
VQA_RAD_KEYS = ("qid", "phrase_type", "qid_linked_id", "image_case_url", "image_name", "image_organ", "evaluation",
                "question", "question_rephrase", "question_relation", "question_frame", "question_type", "answer",
                "answer_type")
# (qid, phrase_type, image_name, image_organ, question_type, answer_type, answer) in file order.
# Test rows (phrase_type test_freeform / test_para) are interleaved with training rows and their
# qids are not in file order (12 before 4); answers include JSON integers; some answer_type and
# image_organ values carry a trailing space, as in the release.
VQA_RAD_ROWS = [
    (0, "freeform", "synpic54610.jpg", "HEAD", "PRES", "CLOSED", "Yes"),
    (1, "test_freeform", "synpic29265.jpg", "CHEST", "COUNT", "CLOSED ", 2),
    (2, "para", "synpic54610.jpg", "HEAD", "PRES", "CLOSED", "Yes"),
    (3, "test_para", "synpic29265.jpg", "CHEST", "COUNT", "CLOSED", 2),
    (12, "test_freeform", "synpic42202.jpg", "ABD", "MODALITY", "OPEN", "CT with contrast"),
    (5, "freeform", "synpic42202.jpg", "ABD", "ABN", "OPEN", "appendicitis"),
    (4, "test_para", "synpic100176.jpg", "ABD", "PRES, POS", "OPEN", "Left kidney"),
    (6, "freeform", "synpic100176.jpg", "ABD", "PLANE", "OPEN ", "Axial"),
    (7, "para", "synpic100176.jpg", "ABD", "PLANE", "OPEN", "Axial"),
    (8, "test_freeform", "synpic54610.jpg", "HEAD ", "SIZE", "CLOSED ", "No"),
    (9, "freeform", "synpic29265.jpg", "CHEST", "COUNT", "CLOSED", 1),
    (10, "test_freeform", "synpic42202.jpg", "ABD", "PRES", "CLOSED", "Yes"),
]


def vqa_rad_record(index: int, qid, phrase_type: str, image_name: str, organ: str, question_type: str,
                   answer_type: str, answer) -> dict:
    """One record with every key of the release and its odd value types: qid_linked_id a string
    or a number, "NULL" for an absent rephrase, relation or frame."""
    record = {
        "qid": qid,
        "phrase_type": phrase_type,
        "qid_linked_id": f"{index:08x}-2f6c-4e1b-9a7d-{qid:012x}" if index % 2 else 1000 + index,
        "image_case_url": f"https://medpix.nlm.nih.gov/case?id={index % 5:08x}-0000-0000-0000-000000000000",
        "image_name": image_name,
        "image_organ": organ,
        "evaluation": ("not evaluated", "evaluated", "given")[index % 3],
        "question": f"Question {qid}: what does {image_name} show?",
        "question_rephrase": "NULL" if index % 3 else f"Rephrased question {qid}?",
        "question_relation": "NULL" if index % 4 else "STRICT AGREEMENT",
        "question_frame": "NULL" if index % 2 else f"Is there evidence of finding {qid}?",
        "question_type": question_type,
        "answer": answer,
        "answer_type": answer_type,
    }
    return {key: record[key] for key in VQA_RAD_KEYS}


def vqa_rad_records() -> list[dict]:
    return [vqa_rad_record(index, *row) for index, row in enumerate(VQA_RAD_ROWS)]


def vqa_rad_release_records(n_rows: int = 2248, n_test: int = 451, n_test_closed: int = 272,
                            n_images: int = 315, seed: int = 0) -> list[dict]:
    """A release with the real counts (2,248 rows; 451 test rows, 272 of them CLOSED; 315 images),
    test rows at random positions among the training rows."""
    rng = np.random.default_rng(seed)
    test = set(rng.choice(n_rows, n_test, replace=False).tolist())
    closed_test = set(rng.choice(sorted(test), n_test_closed, replace=False).tolist())
    records = []
    for index in range(n_rows):
        closed = index in closed_test if index in test else index % 2 == 0
        phrase_type = (("test_para", "test_freeform") if index in test else ("para", "freeform"))[index % 3 > 0]
        records.append(vqa_rad_record(
            index, index, phrase_type, f"synpic{10000 + index % n_images}.jpg", ("HEAD", "CHEST", "ABD")[index % 3],
            ("PRES", "POS", "ABN", "MODALITY")[index % 4], ("CLOSED" if closed else "OPEN") + " " * (index % 7 == 0),
            (("Yes", "No", 2)[index % 3]) if closed else f"finding {index}",
        ))
    return records


def write_vqa_rad(root: Path, records: list[dict] | None = None, image_dir: str = VQA_RAD_IMAGE_DIR) -> Path:
    """The OSF release: the JSON list (indented, as exported) and a JPEG per image_name."""
    records = vqa_rad_records() if records is None else records
    root.mkdir(parents=True, exist_ok=True)
    (root / VQA_RAD_JSON).write_text(json.dumps(records, indent=4), encoding="utf-8")
    names = dict.fromkeys(record["image_name"] for record in records if isinstance(record, dict) and record.get("image_name"))
    for seed, name in enumerate(names):
        write_file(root / image_dir / name, image_bytes(1000 + seed, "JPEG"))
    return root


# ----------------------------------------------------------------------------- hub parquet (HF)
def write_hf_parquet(path: Path, columns: dict[str, list], features: dict | None = None,
                     row_group: int = ROW_GROUP) -> Path:
    """A parquet shard written by the datasets library; the ``image`` column becomes an Image
    feature (struct of bytes and path) and ``features`` can declare other column types."""
    import datasets

    dataset = datasets.Dataset.from_dict(columns)
    if "image" in columns:
        dataset = dataset.cast_column("image", datasets.Image())
    for name, feature in (features or {}).items():
        dataset = dataset.cast_column(name, feature)
    path.parent.mkdir(parents=True, exist_ok=True)
    dataset.to_parquet(str(path), batch_size=row_group)
    return path


def image_cells(seeds: list[int], corrupt: tuple[int, ...] = ()) -> list[dict]:
    """Image feature values (embedded bytes); the listed positions hold undecodable bytes."""
    return [
        {"bytes": corrupt_bytes(seed) if position in corrupt else image_bytes(seed), "path": f"{seed}.png"}
        for position, seed in enumerate(seeds)
    ]


# ------------------------------------------------------------------------------------ VLMEvalKit
def write_vlmevalkit_tsv(path: Path, rows: list[dict]) -> Path:
    """A TSV as VLMEvalKit writes one (pandas ``to_csv(sep="\\t", index=False)``): a column per key
    of any row, in first-seen order; a key a row lacks is an empty cell (pandas writes NaN as "")."""
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, sep="\t", index=False, encoding="utf-8")
    return path


def base64_image(seed: int, fmt: str = "PNG") -> str:
    """An image as the base64 text VLMEvalKit stores in its ``image`` column."""
    import base64

    return base64.b64encode(image_bytes(seed, fmt)).decode("ascii")
