"""Schemas of the benchmark axis (conf/bench/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Dict, List, Optional

from omegaconf import MISSING

from medexp.config.ranges import at_least, fraction, positive
from medexp.config.schemas.twin import TwinConfig


class BenchFormat(str, Enum):
    """Upstream file layouts; a benchmark in a listed layout needs only a YAML file."""

    local = "local"  # JSONL rows with image paths relative to the root
    demo = "demo"  # the generated offline benchmark, written in the local format
    slake = "slake"  # official SLAKE release: <split>.json list + <image_dir>/<img_name>
    hf_parquet = "hf_parquet"  # hub VQA parquet shards: image struct, question, answer columns
    vqa_rad = "vqa_rad"  # VQA-RAD: the OSF release JSON when bench.root holds it, else hub parquet
    vqa_rad_osf = "vqa_rad_osf"  # VQA-RAD's OSF release only: VQA_RAD Dataset Public.json + image folder
    # PathVQA: the authors' pvqa_<split>.json + images/<split>/ when bench.root holds them, else hub parquet
    pathvqa = "pathvqa"
    omnimedvqa = "omnimedvqa"  # QA_information/Open-access/*.json (or parquet), multiple choice
    image_set = "image_set"  # image-only hub parquet (negative controls), optionally sub-sampled
    pmc_oa = "pmc_oa"  # figure corpus: <split>.jsonl {image, caption} + <image_dir>/
    demo_corpus = "demo_corpus"  # generated image_nn reference corpus: splits corpus and ood
    synthetic = "synthetic"  # text-free examples with an easiness e_i, for control=synthetic
    medvigil = "medvigil"  # MedVIGIL release: manifest.csv + grounding.csv + probes_mcq.csv + images/
    image_folder = "image_folder"  # classification: <root>/<split>/<class>/<image>, the folder names the class
    image_csv = "image_csv"  # classification: a metadata CSV (image id and label columns) + image folders
    demo_classes = "demo_classes"  # the generated classification set of demo scans, in the image_folder layout
    # VLMEvalKit's TSV (MMStar, RealWorldQA, MMBench ...): index, question, answer letter, option
    # columns A, B, ..., image as base64 or image_path
    vlmevalkit_tsv = "vlmevalkit_tsv"

@dataclass
class DemoBenchConfig:
    n_test: int = at_least(400, 1)
    n_train: int = at_least(1200, 1)
    # Split "heldout": drawn like the others from its own seed and trained on by no demo model,
    # the non-members of the membership and memorization detectors.
    n_heldout: int = at_least(400, 1)
    seed: int = 20261121


@dataclass
class DemoClassesConfig:
    """The generated demo classification set (medexp.demo.classes): scans labelled by a finding.

    ``labels: finding``: the class is the lesion count (``normal``, ``one_lesion`` ..
    ``three_lesions``); ``labels: side``: where the lesions are (``normal``, ``left``, ``right``,
    ``upper``, ``lower``). ``class_weights`` maps each class to its sampling weight; None: the
    labelling's defaults (finding: three lesions is the rare class, about 6%; side: 40% normal).
    """

    labels: str = "finding"
    n_images: int = at_least(1000, 1)
    class_weights: Optional[Dict[str, float]] = None
    seed: int = 20261123

@dataclass
class DemoCorpusConfig:
    """The generated demo reference corpus (medexp.demo.corpus); ``demo`` names the benchmark it copies."""

    n_distractors: int = at_least(1600, 0)  # fresh scans from the demo renderer: same distribution, other "patients"
    n_planted: int = at_least(100, 0)  # perturbed copies of demo test images: the ground truth
    n_ood: int = at_least(300, 0)  # colourful non-medical pictures, split "ood" (the out-of-domain control)
    seed: int = 20261122


@dataclass
class SyntheticBenchConfig:
    """Easiness e_i of the calibration model's benchmark (controlled audit, Appendix B).

    round((1 - open_fraction) n) CLOSED examples at positions drawn by ``seed`` with
    e ~ Exponential(mean closed_mean); the others OPEN with e = |N(0, 1)|.
    """

    n_examples: int = at_least(1061, 1)
    open_fraction: float = fraction(0.6)
    closed_mean: float = positive(900.0)
    seed: int = 20260531


@dataclass
class ExternalIdsConfig:
    """How other tools name this benchmark's items: ``<prefix>::<split>::<id>``, the id zero-padded.

    The controlled audit's published per-item files name PathVQA items ``pathvqa::test::002892``
    (medexp: ``pathvqa::test::2892``) and SLAKE's ``slake_en::test::12748`` (medexp:
    ``slake::test::12748``): ``{prefix: slake_en}`` and ``{padding: 6}`` say so, and
    ``python -m medexp.inspect --join <file>`` and the report's ``external_tables`` join such files.
    """

    prefix: Optional[str] = None  # the benchmark part of the other tool's ids (None: bench.name)
    padding: Optional[int] = at_least(None, 1)  # zero-pad a numeric upstream id to this many digits
    # Other benchmark names the same items go by (accepted when reading a table), e.g. [slake_english]
    aliases: List[str] = field(default_factory=list)


@dataclass
class BenchConfig:
    name: str = MISSING
    format: BenchFormat = BenchFormat.local
    version: int = 1  # bump when an edit changes the examples the file yields (like lm-eval tasks)
    root: Optional[str] = None  # local copy; when unset, a format with a hub_id reads the hub
    # Image paths must resolve (symlinks included) inside the root; true allows paths outside it.
    allow_outside_root: bool = False
    hub_id: Optional[str] = None  # Hugging Face dataset repo used when root is unset
    revision: Optional[str] = None  # hub branch, tag or commit (None: the default branch)
    split: str = "test"
    # A set of images, not questions (a negative control's image set, a local reference corpus): rows
    # may leave question and answer empty but need an image (format local).
    image_only: bool = False
    # The splits experiment=split_overlap checks this split's images against (corpus=bench_split):
    # the training split, and the validation split where the release has one.
    overlap_splits: List[str] = field(default_factory=lambda: ["train"])
    # Read only the first N rows of the split in released order; rows skipped for a bad image
    # count toward N (the audit's "first 5,000 rows, one corrupt image dropped" gives 4,999).
    max_examples: Optional[int] = at_least(None, 1)
    expected_examples: Optional[int] = at_least(None, 1)  # the count this file should yield; a mismatch is logged
    # The count each split should yield, for releases with several splits (split -> count); the
    # one of bench.split is compared (no comparison for a split it does not list). Set this or
    # expected_examples, not both.
    expected_by_split: Optional[Dict[str, int]] = None
    # A split whose skipped rows (missing images, empty answers, ...) exceed this share of the rows
    # read fails, naming the file, the reasons and the first rows (medexp.benchmarks.skips).
    max_skipped_share: float = fraction(0.01)
    # pathvqa: drop rows repeating an earlier (image, question, answer) triple of the split, as the
    # hub copy did (the removed rows and their count are logged); None: off
    dedup: Optional[bool] = None
    external_ids: Optional[ExternalIdsConfig] = None  # how other tools name the items (published per-item tables)
    # slake: keep the questions whose q_lang is listed (an image corpus, image_only, reads every row:
    # filters select questions, not images)
    languages: Optional[List[str]] = None
    image_dir: Optional[str] = None  # slake, pmc_oa, vqa_rad, pathvqa: image folder (or <image_dir>.zip) under root
    subsample_n: Optional[int] = at_least(None, 1)  # image_set: n rows drawn uniformly from the first max(4n, n+50)
    subsample_seed: int = 0  # image_set: numpy default_rng seed of that draw
    label_column: Optional[str] = None  # image_set, image_csv: the column whose value becomes the answer (the class)
    # image_csv: the metadata file under root, its image-id column, the folders under root that
    # hold the images (searched in order) and the extension appended to an id without one.
    # HAM10000: HAM10000_metadata.csv, image_id, dx, [HAM10000_images_part_1, HAM10000_images_part_2], .jpg
    csv_file: Optional[str] = None
    image_column: Optional[str] = None
    image_dirs: Optional[List[str]] = None
    image_extension: Optional[str] = None
    demo: Optional[DemoBenchConfig] = None
    demo_corpus: Optional[DemoCorpusConfig] = None  # demo_corpus: how the corpus is generated
    synthetic: Optional[SyntheticBenchConfig] = None  # synthetic: how the easiness is drawn
    demo_classes: Optional[DemoClassesConfig] = None  # demo_classes: how the classification set is generated
    # vlmevalkit_tsv: the TSV under root (None: <split>.tsv). An absolute image_path written on
    # another machine that starts with image_root_from is moved under image_root_to (a relative
    # image_root_to is under root); a relative image_path is under the TSV's folder.
    tsv_file: Optional[str] = None
    image_root_from: Optional[str] = None
    image_root_to: Optional[str] = None
    twin: Optional[TwinConfig] = None  # the perturbed twin of every item, for detector=perturbation_gap

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if (node.get("image_root_from") is None) != (node.get("image_root_to") is None):
            return (f"{path}.image_root_from and {path}.image_root_to go together: the prefix written in the TSV "
                    f"and the folder that holds those images here")
        if node.get("expected_examples") is not None and node.get("expected_by_split") is not None:
            return (f"set {path}.expected_examples (the count of bench.split) or {path}.expected_by_split "
                    f"(a count per split), not both")
        wrong = {split: count for split, count in (node.get("expected_by_split") or {}).items()
                 if not isinstance(count, int) or count < 1}
        if wrong:
            return f"{path}.expected_by_split: every count must be a whole number >= 1, got {dict(wrong)}"
        return None
