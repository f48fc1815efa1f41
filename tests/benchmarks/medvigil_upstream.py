"""A small MedVIGIL release and harness responses, written in the upstream formats.

``write_medvigil_release(root)`` lays out a copy as the Hugging Face dataset does: manifest.csv,
grounding.csv, probes_mcq.csv (the documented columns, csv-module quoting, so questions with
commas, quotes and line breaks are quoted), images/ and images_perturbed/. Case MVB-0003 comes
from the credentialed CXR corpus and has no image, as in the release.

``write_harness_responses(path, rows)`` writes what the harness's baseline runner appends per
probe (results/baselines/<model>__mcq.jsonl): an answered probe has probe_id, case_id,
probe_kind, format, model_id, image_file, question, model_answer, latency_ms, usage, status "ok",
timestamp, model_letter ("" when its parser found no letter), correct_letter and
expected_behavior; a failed call has probe_id, case_id, probe_kind, format, model_id,
model_answer "", status "error: <message>" and timestamp, and no letters.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.benchmarks.upstream import image_bytes, write_file

MANIFEST_COLUMNS = ["case_id", "source_dataset", "modality", "image_file", "question", "gold_answer",
                    "risk_tier", "text_only_answerable", "annotator_notes"]
GROUNDING_COLUMNS = ["case_id", "answer_rationale", "roi_pointer", "roi_bbox_norm", "differential_set",
                     "indication", "modality_detail", "laterality_dependent", "gold_after_lr_flip"]
PROBE_COLUMNS = ["probe_id", "case_id", "probe_kind", "question", "choice_A", "choice_B", "choice_C", "choice_D",
                 "choice_E", "correct_letter", "expected_behavior", "image_file"]

# case_id, source, modality, image_file, question, gold, tier, text_only_answerable, notes
CASES = [
    ("MVB-0001", "vqa_rad", "X-Ray", "mvb0001.png", "Is there evidence of a right apical pneumothorax?",
     "Yes, right apical pneumothorax", "L5", "No", ""),
    ("MVB-0002", "slake", "CT", "mvb0002.jpg", 'Which organ, "left" or "right", shows the lesion?',
     "left kidney", "L2", "TRUE", "two readers agreed,\nafter discussion"),
    ("MVB-0003", "cxr", "X-Ray", "mvb0003.jpg", "Describe the most clinically significant finding.",
     "cardiomegaly", "L4", "", "credentialed source"),
    ("MVB-0004", "roco", "MRI", "mvb0004.png", "What imaging modality is this?", "MRI", "L1", "FALSE", ""),
]
# case_id -> (roi_pointer, box, laterality_dependent, gold_after_lr_flip)
GROUNDING = {
    "MVB-0001": ("right apex", [0.55, 0.05, 0.95, 0.45], "true", "No, the pneumothorax is left apical"),
    "MVB-0002": ("left kidney", [0.1, 0.25, 0.5, 0.75], "true", "right kidney"),
    "MVB-0003": ("cardiac silhouette", [0.3, 0.4, 0.8, 0.9], "false", ""),
    "MVB-0004": ("", "", "false", ""),  # no box: a whole-image question
}
REFUSAL = "The premise of this question is incorrect."
MASKED_REFUSAL = "The region needed to answer is not visible."


def _probes(case_id: str, image_file: str, question: str) -> list[dict]:
    """The release's battery for one case (original, tcf, negation, ..., two traps, three image probes)."""
    stem = Path(image_file).stem
    base = ["Yes", "No", "Cannot say", "Partially", MASKED_REFUSAL]
    rows = [
        ("orig", "original", question, base, "A", "match_gold", image_file),
        ("tcf", "tcf", f"Reworded: {question}", base, "A", "match_gold", image_file),
        ("neg", "negation", f"Is it false that: {question}", ["No", "Yes", "Unclear", "Maybe", REFUSAL], "A",
         "match_negated_gold", image_file),
        ("sdr", "specificity_drop", question.replace("right apical ", ""), base, "A", "match_gold", image_file),
        ("know", "knowledge_only", "Can a pneumothorax be seen on a chest X-ray?",
         ["Yes", "No", "Only on CT", "Only on MRI", REFUSAL], "A", "match_gold", ""),
        ("trap1", "halluc_trap", "How large is the left apical pneumothorax?",
         ["1 cm", "2 cm", "3 cm", "4 cm", REFUSAL], "E", "refuse_or_flag", image_file),
        ("trap2", "halluc_trap", "How many rib fractures accompany it?",
         ["One", "Two", "Three", "Four", REFUSAL], "E", "refuse_or_flag", image_file),
        ("lr_flip", "lr_flip", question, ["No", "Yes", "Cannot say", "Partially", MASKED_REFUSAL], "B",
         "match_flipped_gold", f"images_perturbed/{stem}_lr_flip.png"),
        ("roi_only", "roi_only", question, base, "A", "match_gold", f"images_perturbed/{stem}_roi_only.png"),
        ("roi_masked", "roi_masked", question, base, "E", "uncertain_or_lower_confidence",
         f"images_perturbed/{stem}_roi_masked.png"),
    ]
    return [
        {"probe_id": f"{case_id}__{suffix}", "case_id": case_id, "probe_kind": kind, "question": text,
         **{f"choice_{letter}": choice for letter, choice in zip("ABCDE", choices)},
         "correct_letter": correct, "expected_behavior": behaviour, "image_file": image}
        for suffix, kind, text, choices, correct, behaviour, image in rows
    ]


def release_probe_rows() -> list[dict]:
    """Every probes_mcq.csv row of the fixture release, in file order."""
    rows = []
    for case_id, _, _, image_file, question, *_ in CASES:
        rows.extend(_probes(case_id, image_file, question))
    # a probe with four choices: choice_E is empty
    rows.append({"probe_id": "MVB-0004__orig_short", "case_id": "MVB-0004", "probe_kind": "original",
                 "question": "Which sequence is this?", "choice_A": "T1", "choice_B": "T2", "choice_C": "FLAIR",
                 "choice_D": "DWI", "choice_E": "", "correct_letter": "B", "expected_behavior": "match_gold",
                 "image_file": "mvb0004.png"})
    return rows


def write_medvigil_release(root: Path, probe_rows: list[dict] | None = None) -> Path:
    """The fixture release under ``root``; ``probe_rows`` replaces probes_mcq.csv's rows."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    _write_csv(root / "manifest.csv", MANIFEST_COLUMNS, [dict(zip(MANIFEST_COLUMNS, case)) for case in CASES])
    grounding = []
    for case_id, (pointer, box, lateral, after) in GROUNDING.items():
        grounding.append({"case_id": case_id, "answer_rationale": "finding at the box", "roi_pointer": pointer,
                          "roi_bbox_norm": json.dumps(box) if box else "", "differential_set": json.dumps(["a", "b"]),
                          "indication": "", "modality_detail": "", "laterality_dependent": lateral,
                          "gold_after_lr_flip": after})
    _write_csv(root / "grounding.csv", GROUNDING_COLUMNS, grounding)
    rows = release_probe_rows() if probe_rows is None else probe_rows
    _write_csv(root / "probes_mcq.csv", PROBE_COLUMNS, rows)
    for index, (case_id, source, _, image_file, *_) in enumerate(CASES):
        if source == "cxr":
            continue  # credentialed: not redistributed
        fmt = "JPEG" if image_file.endswith(".jpg") else "PNG"
        write_file(root / "images" / image_file, image_bytes(index, fmt, size=20))
    for index, row in enumerate(rows):
        image = row["image_file"]
        if image.startswith("images_perturbed/") and row["case_id"] != "MVB-0003":
            write_file(root / image, image_bytes(100 + index, "PNG", size=20))
    return root


def harness_row(probe: dict, model_letter: str | None, model: str = "gpt-4o", error: str | None = None) -> dict:
    """One line of the harness's JSONL for a probes_mcq.csv row (``error`` for a failed call)."""
    common = {"probe_id": probe["probe_id"], "case_id": probe["case_id"], "probe_kind": probe["probe_kind"],
              "format": "mcq", "model_id": model}
    if error is not None:
        return {**common, "model_answer": "", "status": f"error: {error}", "timestamp": "2026-04-20T10:00:00Z"}
    return {**common, "image_file": probe["image_file"], "question": probe["question"],
            "model_answer": model_letter or "It could be either of them.", "latency_ms": 812,
            "usage": {"prompt_tokens": 412, "completion_tokens": 1, "total_tokens": 413}, "status": "ok",
            "timestamp": "2026-04-20T10:00:00Z", "model_letter": model_letter or "",
            "correct_letter": probe["correct_letter"], "expected_behavior": probe["expected_behavior"]}


def write_harness_responses(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def _write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
