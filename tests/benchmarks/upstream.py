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


# ------------------------------------------------------------------ SLAKE, several splits
# A release folder with train.json and validate.json beside test.json, all sharing imgs/ (as the
# official release does), with the flaws the real files have: one English training row whose
# answer is "" and images that a split uses only under Chinese questions.
SLAKE_TRAIN_IMAGES = ("xmlab200/source.jpg", "xmlab201/source.jpg", "xmlab202/source.jpg")
SLAKE_TRAIN_ENGLISH = 150  # enough rows that one bad row stays under the 1% limit
SLAKE_EMPTY_ANSWER_QID = 7003  # the English training row with answer ""
SLAKE_TEST_IMAGE_CHINESE_IN_TRAIN = "xmlab7/source.jpg"  # a test image train asks about only in Chinese
SLAKE_TEST_IMAGE_CHINESE_IN_VALIDATE = "xmlab160/source.jpg"


def slake_record(qid: int, img_name: str, lang: str, answer: str) -> dict:
    """One record with every key of the official release."""
    return {
        "img_id": int(img_name.split("/")[0].removeprefix("xmlab")), "img_name": img_name,
        "question": f"{'What is shown' if lang == 'en' else '图中是什么'} ({qid})?", "answer": answer, "q_lang": lang,
        "location": "Abdomen", "modality": "CT", "answer_type": "OPEN", "base_type": "vqa",
        "content_type": "Organ", "triple": ["vhead", "_", "_"], "qid": qid,
    }


def slake_split_records() -> dict[str, list[dict]]:
    """train.json and validate.json (test.json is :func:`slake_records`)."""
    train = []
    for k in range(SLAKE_TRAIN_ENGLISH):
        qid = 7000 + k
        record = slake_record(qid, SLAKE_TRAIN_IMAGES[k % len(SLAKE_TRAIN_IMAGES)], "en", f"answer {qid}")
        if qid == SLAKE_EMPTY_ANSWER_QID:
            record["answer"] = ""
        train.append(record)
        if k % 10 == 0:  # interleaved Chinese questions, one of every ten about the test image
            image = SLAKE_TEST_IMAGE_CHINESE_IN_TRAIN if k % 20 == 0 else SLAKE_TRAIN_IMAGES[0]
            train.append(slake_record(8000 + k, image, "zh", f"答案 {k}"))
    validate = [slake_record(9000 + k, "xmlab203/source.jpg", "en", f"answer {k}") for k in range(4)]
    validate.insert(2, slake_record(9100, SLAKE_TEST_IMAGE_CHINESE_IN_VALIDATE, "zh", "是"))
    return {"train": train, "validate": validate}


def write_slake_release(root: Path) -> Path:
    """The official folder with its three splits: test.json (:func:`slake_records`), train.json
    and validate.json (:func:`slake_split_records`), and every image they name under imgs/."""
    write_slake(root)
    for split, records in slake_split_records().items():
        (root / f"{split}.json").write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")
    for seed, name in enumerate((*SLAKE_TRAIN_IMAGES, "xmlab203/source.jpg"), start=200):
        write_file(root / "imgs" / name, image_bytes(seed, "JPEG", 32))
    return root


# ------------------------------------------------------------------ PathVQA (the authors' JSON)
PATHVQA_IMAGE_DIR = "images"


def pathvqa_record(img_id: str, qa: list[tuple[str, str]]) -> dict:
    """An LXMERT-style image record as pvqa_<split>.json holds them."""
    return {"img_id": img_id, "sentf": {"pvqa": [question for question, _ in qa]},
            "labelf": {"pvqa": [{answer: 1} for _, answer in qa]}}


def pathvqa_records() -> list[dict]:
    """Three images, seven questions; test_0002's second question repeats its first (same image,
    question and answer), the third asks the same question with another answer (kept)."""
    return [
        pathvqa_record("test_0000", [("what is present?", "necrosis"), ("is this a liver?", "yes")]),
        pathvqa_record("test_0002", [("what are the cells?", "neutrophils"), ("what are the cells?", "neutrophils"),
                                     ("what are the cells?", "lymphocytes")]),
        pathvqa_record("test_0001", [("where is this?", "kidney"), ("is there fibrosis?", "no")]),
    ]


def pathvqa_release_records(n_questions: int = 6761, n_repeated: int = 42, n_images: int = 858,
                            seed: int = 0) -> list[dict]:
    """A test file with the release's counts: ``n_questions`` questions about ``n_images``
    images, ``n_repeated`` of them repeating an earlier question of the same image with the same
    answer (the questions and the image count are synthetic)."""
    rng = np.random.default_rng(seed)
    per_image = np.full(n_images, (n_questions - n_repeated) // n_images)
    per_image[: (n_questions - n_repeated) % n_images] += 1
    repeats = np.bincount(rng.choice(n_images, n_repeated), minlength=n_images)
    records = []
    for image in range(n_images):
        qa = [(f"question {k} about image {image}?", ("yes", "no", f"finding {image}")[k % 3])
              for k in range(per_image[image])]
        for _ in range(repeats[image]):
            qa.insert(len(qa) // 2 + 1, qa[len(qa) // 2])
        records.append(pathvqa_record(f"test_{image:04d}", qa))
    return records


def write_pathvqa(root: Path, records: list[dict] | None = None, split: str = "test") -> Path:
    """pvqa_<split>.json (as the authors' repository publishes it) and images/<split>/<img_id>.jpg."""
    records = pathvqa_records() if records is None else records
    root.mkdir(parents=True, exist_ok=True)
    (root / f"pvqa_{split}.json").write_text(json.dumps(records), encoding="utf-8")
    for seed, record in enumerate(records):
        if isinstance(record, dict) and isinstance(record.get("img_id"), str):
            write_file(root / PATHVQA_IMAGE_DIR / split / f"{record['img_id']}.jpg", image_bytes(500 + seed, "JPEG", 8))
    return root


# ----------------------------------------------------- mm-perturb's published twin TSVs
# tsv/MMStar_pert_local.tsv: VLMEvalKit's local layout with the columns in the published order
# and image paths absolute on the authors' machine.
PERTURB_PREFIX = "/u/j/a/jadenpark/LMUData"
PERTURB_COLUMNS = ("index", "question", "answer", "category", "l2_category", "bench", "A", "B", "C", "D", "image_path")
MMSTAR_ITEMS = 1500
MMSTAR_OPTION_GAP = 269  # option A empty, B-D filled
MMSTAR_ANSWER_OUTSIDE = 1102  # answer D on a three-option row


def mmstar_pert_rows(n: int = MMSTAR_ITEMS) -> list[dict]:
    """The perturbed MMStar rows: answer B everywhere (the originals' is A), two bad rows."""
    rows = []
    for index in range(n):
        folder = "MMStar" if index % 50 == 2 else "MMStar_semantic_flux"  # a few name the original image
        row = {"index": index, "question": f"What is the main focus of image {index}?", "answer": "B",
               "category": "coarse perception", "l2_category": "image scene and topic", "bench": "SEEDBench_IMG",
               "A": f"option a{index}", "B": f"option b{index}", "C": f"option c{index}", "D": f"option d{index}",
               "image_path": f"{PERTURB_PREFIX}/images/{folder}/{index}.jpg"}
        if index == MMSTAR_OPTION_GAP:
            row["A"] = ""
        if index == MMSTAR_ANSWER_OUTSIDE:
            row["D"], row["answer"] = "", "D"
        rows.append(row)
    return rows


def write_mmstar_perturbed(root: Path, rows: list[dict] | None = None) -> Path:
    """<root>/MMStar_pert_local.tsv written as pandas writes it, and its images under <root>/images/."""
    rows = mmstar_pert_rows() if rows is None else rows
    import pandas as pd

    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=list(PERTURB_COLUMNS)).to_csv(root / "MMStar_pert_local.tsv", sep="\t", index=False)
    data = image_bytes(7, "JPEG", 8)
    for row in rows:
        write_file(root / row["image_path"].removeprefix(PERTURB_PREFIX + "/"), data)
    return root
