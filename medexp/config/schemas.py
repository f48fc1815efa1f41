"""Structured-config schemas for every config group.

Registered in Hydra's ConfigStore by :func:`register_schemas`, so that a YAML file with a wrong
type or an unknown key fails at composition with a message naming the offending key.
Model, benchmark and tracking configs share one schema each; detectors and controls have one
schema per kind, selected by the YAML file's defaults list (``/schema/detector@_here_: exch``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from omegaconf import MISSING


class ModelFamily(str, Enum):
    """Adapter families; a model of a listed family needs only a YAML file."""

    generic = "generic"  # any AutoModelForImageTextToText checkpoint with an AutoProcessor
    qwen2_5_vl = "qwen2_5_vl"  # Qwen2.5-VL: dynamic-resolution patches, image_grid_thw, <|im_start|> chat
    llava_onevision = "llava_onevision"  # LLaVA-OneVision: anyres tiles with image_sizes, Qwen2 chat
    internvl = "internvl"  # InternVL3 in transformers format (-hf): <IMG_CONTEXT> tiles, left padding
    gemma3 = "gemma3"  # Gemma 3 / MedGemma: token_type_ids over image tokens, <start_of_turn> chat
    blip2 = "blip2"  # BLIP-2: Q-Former image queries in front of a decoder LM, no chat template
    instructblip = "instructblip"  # BLIP-2 whose Q-Former also reads the instruction
    chexagent = "chexagent"  # BLIP-2-like remote-code checkpoint (StanfordAIMI/CheXagent-8b)


class ModelSource(str, Enum):
    hub = "hub"  # a hub id or a local directory written by save_pretrained
    demo = "demo"  # built and trained offline by medexp.demo, then loaded like a hub model
    synthetic = "synthetic"  # no weights: a member of control=synthetic's calibration-model cohort


class DType(str, Enum):
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class BenchFormat(str, Enum):
    """Upstream file layouts; a benchmark in a listed layout needs only a YAML file."""

    local = "local"  # JSONL rows with image paths relative to the root
    demo = "demo"  # the generated offline benchmark, written in the local format
    slake = "slake"  # official SLAKE release: <split>.json list + <image_dir>/<img_name>
    hf_parquet = "hf_parquet"  # hub VQA parquet shards: image struct, question, answer columns
    omnimedvqa = "omnimedvqa"  # QA_information/Open-access/*.json (or parquet), multiple choice
    image_set = "image_set"  # image-only hub parquet (negative controls), optionally sub-sampled
    pmc_oa = "pmc_oa"  # figure corpus: <split>.jsonl {image, caption} + <image_dir>/
    demo_corpus = "demo_corpus"  # generated image_nn reference corpus: splits corpus and ood
    synthetic = "synthetic"  # text-free examples with an easiness e_i, for control=synthetic


class ControlKind(str, Enum):
    """What a control does to a cell's inputs (conf/control/)."""

    none = "none"  # the benchmark in its released order
    order_hash = "order_hash"  # ordering ablation: sorted by SHA-1 of example_id
    order_answer_len = "order_answer_len"  # ordering ablation: sorted by answer token count (a known confound)
    order_mink = "order_mink"  # ordering ablation: sorted by the model's per-example Min-K%++ score
    external_baseline = "external_baseline"  # pre-domain baselines join the cohort and are tested too
    negative_images = "negative_images"  # an out-of-domain image set replaces the benchmark's images
    blind_image = "blind_image"  # every example scored without its image
    synthetic = "synthetic"  # scores drawn from the calibration model s = g e + b + eps + delta


@dataclass
class DemoBenchConfig:
    n_test: int = 400
    n_train: int = 1200
    seed: int = 20261121


@dataclass
class DemoModelConfig:
    """How an offline demo model is built (medexp.demo.models)."""

    seed: int = 0
    train_epochs: int = 4
    hidden_size: int = 96
    num_layers: int = 2
    vocab_size: int = 1024
    image_size: int = 32
    learning_rate: float = 3e-3
    batch_size: int = 32
    # The leak shows the test set as text documents in this format, in released order.
    document_template: str = "Question: {question}\nAnswer: {answer}\n"
    document_examples: int = 8  # consecutive examples per training document
    bench: DemoBenchConfig = field(default_factory=DemoBenchConfig)  # the data it trains on
    # Planted contamination: after base training, `leak_epochs` passes over the demo test set
    # (VQA pairs, and text documents of neighbouring examples in released order). 0 = clean.
    leak_epochs: int = 0
    leak_learning_rate: float = 3e-3
    leak_batch_size: int = 8


@dataclass
class ModelConfig:
    name: str = MISSING
    family: ModelFamily = ModelFamily.generic
    source: ModelSource = ModelSource.hub
    pretrained: Optional[str] = None  # hub id or local path; unused for demo models
    revision: Optional[str] = None
    dtype: DType = DType.float32
    device: str = "auto"  # "auto" picks cuda when available, else cpu
    trust_remote_code: bool = False
    prompt_template: str = "{question}"
    use_chat_template: bool = True
    batch_size: int = 16
    # Batch by size instead: rows x longest row (tokens) stays within this many tokens, batches
    # formed greedily in order. None: fixed batches of batch_size. Scores are identical either way.
    token_budget: Optional[int] = None
    # Passed to from_pretrained (e.g. "auto" spreads a large model over the GPUs; needs the
    # `accelerate` package). None: the whole model goes to `device`.
    device_map: Optional[str] = None
    demo: Optional[DemoModelConfig] = None


@dataclass
class DemoCorpusConfig:
    """The generated demo reference corpus (medexp.demo.corpus); ``demo`` names the benchmark it copies."""

    n_distractors: int = 1600  # fresh scans from the demo renderer: same distribution, other "patients"
    n_planted: int = 100  # perturbed copies of demo test images: the ground truth
    n_ood: int = 300  # colourful non-medical pictures, split "ood" (the out-of-domain control)
    seed: int = 20261122


@dataclass
class SyntheticBenchConfig:
    """Easiness e_i of the calibration model's benchmark (controlled audit, Appendix B).

    round((1 - open_fraction) n) CLOSED examples at positions drawn by ``seed`` with
    e ~ Exponential(mean closed_mean); the others OPEN with e = |N(0, 1)|.
    """

    n_examples: int = 1061
    open_fraction: float = 0.6
    closed_mean: float = 900.0
    seed: int = 20260531


@dataclass
class BenchConfig:
    name: str = MISSING
    format: BenchFormat = BenchFormat.local
    version: int = 1  # bump when an edit changes the examples the file yields (like lm-eval tasks)
    root: Optional[str] = None  # local copy; when unset, a format with a hub_id reads the hub
    hub_id: Optional[str] = None  # Hugging Face dataset repo used when root is unset
    revision: Optional[str] = None  # hub branch, tag or commit (None: the default branch)
    split: str = "test"
    # Read only the first N rows of the split in released order; rows skipped for a bad image
    # count toward N (the audit's "first 5,000 rows, one corrupt image dropped" gives 4,999).
    max_examples: Optional[int] = None
    expected_examples: Optional[int] = None  # the count this file should yield; a mismatch is logged
    languages: Optional[List[str]] = None  # slake: keep rows whose q_lang is listed
    image_dir: Optional[str] = None  # slake, pmc_oa: image folder (or <image_dir>.zip) under root
    subsample_n: Optional[int] = None  # image_set: n rows drawn uniformly from the first max(4n, n+50)
    subsample_seed: int = 0  # image_set: numpy default_rng seed of that draw
    label_column: Optional[str] = None  # image_set: the column whose value becomes the answer
    demo: Optional[DemoBenchConfig] = None
    demo_corpus: Optional[DemoCorpusConfig] = None  # demo_corpus: how the corpus is generated
    synthetic: Optional[SyntheticBenchConfig] = None  # synthetic: how the easiness is drawn


@dataclass
class DetectorBase:
    name: str = MISSING
    family: str = MISSING  # the multiple-testing family the cell's p-value belongs to
    alpha: float = 0.01  # flag when p_value < alpha


@dataclass
class ExchConfig(DetectorBase):
    """Oren et al. sharded likelihood comparison on text concatenations."""

    shards: int = 50
    permutations: int = 250
    text_template: str = "Question: {question}\nAnswer: {answer}\n"
    context_length: int = 1024  # longer concatenations are scored with a sliding window
    stride: int = 512
    batch_size: int = 32


@dataclass
class ExchRankConfig(DetectorBase):
    """Permutation test of Spearman(position, per-example log-likelihood)."""

    n_permutations: int = 10000
    score: str = "sum_logprob"


class RankBy(str, Enum):
    score = "score"  # the model's own per-example score
    delta = "delta"  # the score minus the median of the other cohort models on the same example


@dataclass
class CohortDetectorBase(DetectorBase):
    """A detector comparing the cell's model with reference models on the same examples."""

    # Model config names (conf/model/<name>.yaml) scored next to the cell's model; an entry
    # naming the cell's own model is skipped, so a model is never its own reference.
    cohort: List[str] = field(default_factory=list)
    n_permutations: int = 10000  # cohort-relabel permutation test (p floor 1/(P+1))


@dataclass
class MinkTailConfig(CohortDetectorBase):
    """Min-K%++ cohort tail enrichment (Detector 3); defaults are the controlled audit's."""

    k_percent: float = 20.0  # m_i = mean of the lowest K% (at least one) of the answer's z_t
    thresholds: List[float] = field(default_factory=lambda: [50.0, 100.0])  # report Pr[Delta > t]
    flag_threshold: float = 100.0
    flag_fraction: float = 0.05  # flag when Pr[Delta > flag_threshold] > flag_fraction
    strata: List[str] = field(default_factory=lambda: ["answer_type", "content_type", "modality"])


@dataclass
class TopKJaccardConfig(CohortDetectorBase):
    """Cross-model top-K overlap of Min-K%++ scores (Detector 4)."""

    top_k: int = 25
    k_percent: float = 20.0
    rank_by: RankBy = RankBy.score
    flag_lift: float = 10.0  # a pair is flagged when its overlap is >= this many times chance


@dataclass
class LossConfig(CohortDetectorBase):
    """Loss attack: per-example mean negative log-likelihood of the gold answer."""

    rank_by: RankBy = RankBy.score  # score: the target's own NLL; delta: its NLL gap to the cohort
    top_n: int = 25  # examples shown as the top-ranked in the figure


@dataclass
class CompositionSweepConfig(DetectorBase):
    """Appendix B, Fig. 7b: how often mink_tail flags a clean probe as the cohort gains
    low-gain outliers. Descriptive (no p-value); runs under control=synthetic only.

    For k = 0..max_outliers and each of ``draws`` fresh synthetic benchmarks (drawn like
    bench.synthetic), the cohort is the probe, ``n_anchors`` anchors and k outliers, all with
    offset 0, no contamination and noise control.noise_sd; the probe is flagged by the
    mink_tail rule Pr[Delta > flag_threshold] > flag_fraction.
    """

    n_anchors: int = 2
    anchor_gain: float = 1.0
    probe_gain: float = 1.0
    outlier_gain: float = 0.05
    max_outliers: int = 4
    draws: int = 200
    flag_threshold: float = 100.0
    flag_fraction: float = 0.05


@dataclass
class EmbedderBase:
    """An image embedder (conf/embedder/); vectors are cached per embedder and image list."""

    name: str = MISSING
    batch_size: int = 64
    shard_size: int = 4096  # images per float16 cache shard: the unit an interrupted run resumes from


@dataclass
class OpenClipEmbedderConfig(EmbedderBase):
    """An open_clip image tower; SigLIP preprocessing (mean = std = 0.5, bicubic squash) by default."""

    model: str = MISSING  # open_clip architecture, e.g. ViT-B-16-SigLIP
    pretrained: Optional[str] = None  # tag ("webli", from the hub) or a local weights file; None: random
    model_config: Optional[str] = None  # a JSON architecture file to register first (named by its stem)
    dim: Optional[int] = None  # expected embedding width, checked once the model is built
    image_mean: List[float] = field(default_factory=lambda: [0.5, 0.5, 0.5])
    image_std: List[float] = field(default_factory=lambda: [0.5, 0.5, 0.5])
    interpolation: str = "bicubic"
    resize_mode: str = "squash"
    device: str = "auto"  # "auto" picks cuda when available, else cpu
    loader_threads: int = 4  # threads decoding and resizing images


@dataclass
class PHashEmbedderConfig(EmbedderBase):
    """DCT perceptual hash as a +-1 vector: no weights; cosine distance = 2 Hamming / bits."""

    hash_size: int = 32  # hash_size^2 - 1 bits: the lowest DCT frequencies, DC dropped
    highfreq_factor: int = 4  # images are reduced to hash_size * highfreq_factor pixels a side
    batch_size: int = 256


@dataclass
class CorpusConfig:
    """A reference image corpus (conf/corpus/): the images of a benchmark source."""

    name: str = MISSING
    source: BenchConfig = MISSING  # read with the benchmark loaders; its example images form the corpus


class IndexKind(str, Enum):
    exact = "exact"  # brute force over float16 shards, block by block (memory-bounded)
    ivf = "ivf"  # faiss IVF-flat: approximate, recall@1 measured and logged
    hnsw = "hnsw"  # faiss HNSW-flat: approximate, recall@1 measured and logged


@dataclass
class IndexConfig:
    kind: IndexKind = IndexKind.exact
    block_size: int = 65536  # corpus vectors per search block (exact) or per add call
    ivf_nlist: Optional[int] = None  # None: 4 sqrt(corpus size)
    ivf_nprobe: int = 16
    hnsw_m: int = 32
    hnsw_ef_search: int = 128
    recall_sample: int = 1000  # queries checked against exact search (approximate kinds only)
    gpu: bool = True  # use faiss-gpu when it is installed and sees a GPU


@dataclass
class ImageNNConfig(DetectorBase):
    """Image near-neighbour overlap (Detector 1); ``alpha`` is the level of the flag-count test."""

    embedder: Any = MISSING  # an embedder config; its schema comes from its own defaults list
    corpus: CorpusConfig = MISSING
    tau_alpha: float = 0.01  # tau = the tau_alpha-quantile of corpus-to-corpus NN distances
    calibration_size: int = 5000  # corpus images sampled for tau (capped at the corpus size)
    sweep_alphas: List[float] = field(default_factory=lambda: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1])
    index: IndexConfig = field(default_factory=IndexConfig)
    max_panels: int = 20  # side-by-side adjudication panels of the closest flagged pairs


@dataclass
class ControlBase:
    name: str = MISSING
    kind: ControlKind = MISSING


@dataclass
class OrderMinkControl(ControlBase):
    k_percent: float = 20.0  # the per-example score sorted by: mean of the lowest K% of Min-K%++ z


@dataclass
class ExternalBaselineControl(ControlBase):
    """Pre-domain baseline models (conf/model names): added to a cohort detector's cohort, and
    the cell's detector is run on each of them too (metrics ``baseline_<name>_<metric>``)."""

    baselines: List[str] = field(default_factory=lambda: ["blip2", "instructblip"])


@dataclass
class NegativeImagesControl(ControlBase):
    """image_nn on an out-of-domain image set instead of the benchmark's images, same tau."""

    images: BenchConfig = MISSING  # composed from conf/bench by the control's defaults list


@dataclass
class SyntheticModel:
    """One model of the calibration model s_im = gain e_i + offset + eps_im + delta_im."""

    gain: float = 1.0
    offset: float = 0.0
    contaminated_fraction: float = 0.0  # share of examples with delta_im > 0 (planted contamination)


@dataclass
class SyntheticControl(ControlBase):
    """Replaces model scores by draws from the calibration model (section 4.10, Appendix B).

    Easiness e_i comes from the benchmark (``bench=synthetic``: meta ``easiness``); the cell's
    model name must be one of ``cohort``; every other cohort member is a reference model.
    """

    cohort: Dict[str, SyntheticModel] = field(default_factory=dict)
    noise_sd: float = 1.0  # eps_im ~ N(0, noise_sd^2), independent per model and example
    contamination_size: float = 500.0  # delta_im on a contaminated example (nats)


@dataclass
class TrackingConfig:
    uri: Optional[str] = None  # None: $MLFLOW_TRACKING_URI, else sqlite:///<root>/mlruns/mlflow.db
    experiment: str = "medexp"
    artifact_root: Optional[str] = None  # None: <root>/mlruns/artifacts for the default store


@dataclass
class PathsConfig:
    root: str = MISSING  # project root: anchors mlruns/ whatever Hydra's output directory is
    cache_dir: str = MISSING  # demo data, demo models and score tables


@dataclass
class Config:
    seed: int = 0
    force: bool = False  # recompute a cell even when a finished run with its key exists
    family: str = MISSING  # multiple-testing family of the cell's p-value (tag medexp.family)
    paths: PathsConfig = field(default_factory=PathsConfig)
    model: ModelConfig = MISSING
    bench: BenchConfig = MISSING
    detector: Any = MISSING
    control: Any = MISSING
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


class Quantifier(str, Enum):
    """How an evidence item's condition combines over the cells it selects."""

    all = "all"  # every selected cell meets the condition
    any = "any"  # at least one selected cell does


@dataclass
class CellSelection:
    """Cells an evidence item reads: per axis a config name, a list of names, or "*" (any)."""

    model: Any = "*"
    bench: Any = "*"
    detector: Any = "*"
    control: Any = "*"


@dataclass
class EvidenceConfig:
    name: str = MISSING  # short label of the item in the report
    select: CellSelection = field(default_factory=CellSelection)
    # Condition on each selected cell: its metrics, p_bonferroni, q_bh, family_size; numbers,
    # comparisons, arithmetic, and/or/not, abs(). E.g. "p_bonferroni < 0.05 and flag == 1".
    require: str = MISSING
    quantifier: Quantifier = Quantifier.all


@dataclass
class ClaimStatuses:
    holds: str = MISSING  # status when every evidence item holds (e.g. survives)
    fails: str = MISSING  # status when one does not (e.g. collapses)


@dataclass
class ClaimConfig:
    """One claim of the claims-to-evidence map (conf/claims/<id>.yaml)."""

    id: str = MISSING  # equal to the file name
    sentence: str = MISSING
    source: str = ""  # where the claim is established, e.g. "§4.1, §4.7"
    evidence: List[EvidenceConfig] = MISSING
    statuses: ClaimStatuses = MISSING
    manual_review: Optional[str] = None  # the part a person must check; the rule checks the rest


@dataclass
class ReportPathsConfig:
    root: str = MISSING  # project root: anchors mlruns/ and the default output folder


@dataclass
class ReportConfig:
    """``python -m medexp.report`` (conf/report.yaml)."""

    paths: ReportPathsConfig = field(default_factory=ReportPathsConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    output_dir: str = MISSING
    claim_ids: Optional[List[str]] = None  # None: every file of the claims group in the search path
    figures: bool = True


DETECTOR_SCHEMAS = {
    "exch": ExchConfig,
    "exch_rank": ExchRankConfig,
    "mink_tail": MinkTailConfig,
    "topk_jaccard": TopKJaccardConfig,
    "loss": LossConfig,
    "image_nn": ImageNNConfig,
    "composition_sweep": CompositionSweepConfig,
}
EMBEDDER_SCHEMAS = {"open_clip": OpenClipEmbedderConfig, "phash": PHashEmbedderConfig}
CONTROL_SCHEMAS = {
    "base": ControlBase,
    "order_mink": OrderMinkControl,
    "external_baseline": ExternalBaselineControl,
    "negative_images": NegativeImagesControl,
    "synthetic": SyntheticControl,
}


def register_schemas() -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(name="config_schema", node=Config)
    store.store(name="report_schema", node=ReportConfig)
    store.store(group="schema", name="claim", node=ClaimConfig)
    for name, node in DETECTOR_SCHEMAS.items():
        store.store(group="schema/detector", name=name, node=node)
    for name, node in CONTROL_SCHEMAS.items():
        store.store(group="schema/control", name=name, node=node)
    for name, node in EMBEDDER_SCHEMAS.items():
        store.store(group="schema/embedder", name=name, node=node)
