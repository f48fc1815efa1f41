"""A small SLAKE release written as its authors publish test.json (no imgs/), and record files of
per-example scores for it, as the controlled audit and lmms-eval write them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# 12 English questions on 4 images (3 each), plus Chinese rows the English bench leaves out.
N_IMAGES, PER_IMAGE = 4, 3


def slake_rows() -> list[dict]:
    rows = []
    for image in range(N_IMAGES):
        for k in range(PER_IMAGE):
            qid = 100 + image * PER_IMAGE + k
            rows.append({"img_id": image, "img_name": f"xmlab{image}/source.jpg", "question": f"Question {qid}?",
                         "answer": f"answer {qid}", "q_lang": "en", "location": "Lung", "modality": "CT",
                         "answer_type": "OPEN" if k else "CLOSED", "base_type": "vqa", "triple": ["vhead", "_", "_"],
                         "qid": qid, "content_type": "Modality"})
            rows.append({**rows[-1], "question": "这是什么?", "q_lang": "zh", "qid": 5000 + qid})
    return rows


@pytest.fixture()
def slake_root(tmp_path) -> Path:
    root = tmp_path / "slake"
    root.mkdir()
    (root / "test.json").write_text(json.dumps(slake_rows()), encoding="utf-8")
    return root


def audit_document(models=("Model-A", "Model-B")) -> dict:
    """The audit's multi-model JSON (slake_en_overlap_inflation.json's layout); image 0 flagged."""
    records = []
    for row in slake_rows():
        if row["q_lang"] != "en":
            continue
        qid = row["qid"]
        records.append({"example_id": f"slake_en::test::{qid}", "flagged": row["img_id"] == 0,
                        "answer_type": row["answer_type"],
                        "mean_logprob": {name: -(qid % 7) - 0.5 * index for index, name in enumerate(models)}})
    return {"benchmark": "slake_en", "description": "test", "n_examples": len(records),
            "n_flagged": sum(r["flagged"] for r in records), "models": list(models), "records": records}


@pytest.fixture()
def audit_file(tmp_path) -> Path:
    path = tmp_path / "slake_en_overlap_inflation.json"
    path.write_text(json.dumps(audit_document(), indent=1), encoding="utf-8")
    return path
