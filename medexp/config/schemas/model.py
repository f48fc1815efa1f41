"""Schemas of the model axis (conf/model/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Dict, List, Optional

from omegaconf import MISSING

from medexp.config.ranges import at_least, fraction, positive
from medexp.config.schemas.bench import DemoBenchConfig
from medexp.config.schemas.train import TrainSpec


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
    # Black boxes: they answer probes, they have no teacher-forced scores.
    openai_compatible = "openai_compatible"  # a chat-completions API: vLLM, TGI, a hosted API
    responses = "responses"  # answers made elsewhere, imported from a JSONL file (responses_path)
    image_classifier = "image_classifier"  # AutoModelForImageClassification (ViT, ResNet, ...): the answer is a class


DEFAULT_REPLY_FIELDS = ("response", "model_answer", "prediction", "answer")
# What an imported status may mean: an answer (ok, unparsed) or why there is none (error causes).
IMPORTED_STATUS_MEANINGS = frozenset({"ok", "unparsed", "refused", "connection", "timeout", "http_4xx", "http_5xx",
                                      "rate_limited", "malformed", "other"})


class ModelBackend(str, Enum):
    """What runs a model's teacher-forced scoring."""

    transformers = "transformers"  # the family's adapter runs the transformers model (medexp.models.hf)
    vllm = "vllm"  # vLLM's offline engine with prompt log-probs (medexp.models.vllm_scorer; the `vllm` extra)


# Families whose prompts vLLM can score as the transformers adapter builds them: the chat-template
# VLMs (generic: whatever architecture vLLM serves). The BLIP family builds Q-Former query
# placeholders of its own and CheXagent is remote code; classifiers and black boxes are no LMs.
VLLM_FAMILIES = frozenset({"generic", "qwen2_5_vl", "llava_onevision", "internvl", "gemma3"})


class ModelSource(str, Enum):
    hub = "hub"  # a hub id or a local directory written by save_pretrained
    demo = "demo"  # built and trained offline by medexp.demo, then loaded like a hub model
    synthetic = "synthetic"  # no weights: a member of control=synthetic's calibration-model cohort
    trained = "trained"  # trained by medexp.train as its `train:` section says (on first use), then loaded
    # no weights: per-example scores another run produced, read from the file its `scores:` section
    # names (medexp.scoring.records); only detectors that read per-example scores run on it
    scores = "scores"


class ScoresFormat(str, Enum):
    """How a file of per-example scores is laid out (medexp.scoring.records)."""

    auto = "auto"  # audit_json for a JSON object with `models` and `records`, lmms_eval for samples_*.jsonl, else table
    table = "table"  # one row per item: JSONL, JSON list of objects, CSV, TSV or parquet
    audit_json = "audit_json"  # the controlled audit's multi-model JSON: records[i].<score_field>.<model>
    lmms_eval = "lmms_eval"  # lmms-eval --log_samples samples_*.jsonl of a loglikelihood task


class ItemJoin(str, Enum):
    """What a record's id field holds, so its rows join the benchmark's examples
    (medexp.benchmarks.external_ids.ItemLookup)."""

    external_id = "external_id"  # <bench>::<split>::<id> in the bench's external_ids scheme (or medexp's own)
    source_id = "source_id"  # the release's own id (SLAKE's or VQA-RAD's qid), the example's meta upstream_id
    position = "position"  # the 0-based index in the released order (lmms-eval's doc_id over the same split)
    question = "question"  # the question text (whitespace and <image> placeholders aside); a text two examples share is ambiguous


class ResponsesFormat(str, Enum):
    """How a file of replies made elsewhere is laid out (medexp.answers.imported)."""

    medexp = "medexp"  # JSONL, one object per line naming its probe_id (medexp's and MedVIGIL's harness)
    jsonl = "jsonl"  # the same JSONL, by the name python -m medexp.export gives the format
    openai_batch = "openai_batch"  # the OpenAI Batch API's output JSONL (also vLLM's run_batch output)
    lmms_eval = "lmms_eval"  # lmms-eval --log_samples samples_*.jsonl of a generation task
    vlmevalkit = "vlmevalkit"  # VLMEvalKit's prediction sheet (.xlsx, .tsv, .csv): the dataset's columns and prediction
    llava_med = "llava_med"  # LLaVA-Med's answer JSONL: question_id, prompt, text, answer_id, model_id, metadata
    inspect_ai = "inspect_ai"  # an Inspect eval log (.eval or .json) of the exported task


class ScoreKind(str, Enum):
    """What a file's score is: both are teacher-forced log-probabilities of the gold answer."""

    mean_logprob = "mean_logprob"  # nats per answer token
    sum_logprob = "sum_logprob"  # nats over the whole answer (lmms-eval's loglikelihood)


class DType(str, Enum):
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"

@dataclass
class ScoresFileConfig:
    """source scores: where the per-example scores are and how to read them (medexp.scoring.records)."""

    path: str = MISSING  # the file; its SHA-256 stands in for the weights in the cell's inputs
    format: ScoresFormat = ScoresFormat.auto
    model: Optional[str] = None  # audit_json: the model whose scores this config reads (one of the file's `models`)
    id_field: str = "example_id"  # the field naming the item; a dotted path reads inside objects (doc.qid)
    join: ItemJoin = ItemJoin.external_id
    score_field: str = "mean_logprob"  # table/audit_json: the score's field (lmms_eval: filtered_resps)
    score_kind: ScoreKind = ScoreKind.mean_logprob  # what that score is; the other column is left NaN
    # Fewer of the benchmark's examples matched than this share: the cell is refused with the counts.
    min_coverage: float = fraction(0.95)


@dataclass
class DemoModelConfig:
    """How an offline demo model is built (medexp.demo.models)."""

    seed: int = 0
    train_epochs: int = at_least(4, 1)
    hidden_size: int = at_least(96, 8)
    num_layers: int = at_least(2, 1)
    vocab_size: int = at_least(1024, 300)
    image_size: int = at_least(32, 8)
    learning_rate: float = positive(3e-3)
    batch_size: int = at_least(32, 1)
    # The leak shows the test set as text documents in this format, in released order.
    document_template: str = "Question: {question}\nAnswer: {answer}\n"
    document_examples: int = at_least(8, 1)  # consecutive examples per training document
    bench: DemoBenchConfig = field(default_factory=DemoBenchConfig)  # the data it trains on
    # Planted contamination: after base training, `leak_epochs` passes over the demo test set
    # (VQA pairs, and text documents of neighbouring examples in released order). 0 = clean.
    leak_epochs: int = at_least(0, 0)
    leak_learning_rate: float = positive(3e-3)
    leak_batch_size: int = at_least(8, 1)
    # Also train on each example's multiple-choice form (its options in released order, answered
    # by the gold's letter; once with the image and once without, as the text-only probe asks it,
    # an "I don't know" option appended), in the base training and in the leak: the leak then
    # carries the canonical option order that MM-Detect's option_order probe looks for, and answers
    # text_only can recall without the image.
    choice_form: bool = False
    # Also train slot filling (slot_guess's prompt: one keyword of the question masked, answered by
    # the word) on the training split, replayed during the leak (a third of the split per pass); the
    # leak never shows a test question in this form, only as released.
    cloze_form: bool = False
    # Also train the forms of the newer probes (docs/probes.md): on the training split the
    # multiple-choice form under numbered labels (renumbered_options), with the gold replaced by
    # "None of the above" (none_option) and the collection question (source_naming) answered by
    # the demo's public corpus, replayed during the leak (a third of the split per pass); the leak
    # adds its test images' collection question answered by the demo benchmark's name, as a crawl
    # that showed the benchmark's images under its name would. Off: the identity of every model
    # built before it existed is unchanged (demo_identity).
    probe_forms: bool = False


# Demo recipe settings added after demo models shipped, with the value those were built with: at
# that value they are left out of a model's identity, so no shipped model's cache entry changes.
DEMO_KEYED_AWAY_FROM_DEFAULT = {"probe_forms": False}


def demo_identity(settings: dict) -> dict:
    """The demo recipe settings that name a demo model (its cache entry, its score-cache key):
    ``settings`` less the later additions at the value every earlier model was built with."""
    return {name: value for name, value in settings.items()
            if not (name in DEMO_KEYED_AWAY_FROM_DEFAULT and value == DEMO_KEYED_AWAY_FROM_DEFAULT[name])}


@dataclass
class ModelConfig:
    name: str = MISSING
    family: ModelFamily = ModelFamily.generic
    # transformers, or vllm: scored through vLLM's offline engine (a CUDA machine, `pip install
    # 'medexp[vllm]'`); its score tables carry no Min-K%++ z (docs/models.md, "vLLM backend").
    backend: ModelBackend = ModelBackend.transformers
    source: ModelSource = ModelSource.hub
    pretrained: Optional[str] = None  # hub id or local path; unused for demo models
    revision: Optional[str] = None
    dtype: DType = DType.float32
    device: str = "auto"  # "auto" picks cuda when available, else cpu
    trust_remote_code: bool = False
    prompt_template: str = "{question}"
    use_chat_template: bool = True
    batch_size: int = at_least(16, 1)
    # Batch by size instead: rows x longest row (tokens) stays within this many tokens, batches
    # formed greedily in order. None: fixed batches of batch_size. Scores are identical either way.
    token_budget: Optional[int] = at_least(None, 1)
    # Passed to from_pretrained (e.g. "auto" spreads a large model over the GPUs; needs the
    # `accelerate` package). None: the whole model goes to `device`.
    device_map: Optional[str] = None
    # Transformers VLM families: the image and the prompt prefix that examples sharing an image
    # have in common are run once and every continuation is scored from their key/value cache.
    # Same log-probs as false (within float rounding), fewer tokens computed; false: every
    # example runs whole. Not part of the score-cache key for that reason.
    shared_prefix: bool = True
    demo: Optional[DemoModelConfig] = None
    # family openai_compatible: the served model id is `pretrained` when set, else `name`.
    base_url: Optional[str] = None  # e.g. http://127.0.0.1:8000/v1 (the client appends /chat/completions)
    # The *name* of the environment variable holding the API key; the key itself never enters
    # the config, its params or the logs. None: no Authorization header (a local server).
    api_key_env: Optional[str] = None
    max_concurrency: int = at_least(4, 1)  # requests in flight at once
    max_retries: int = at_least(5, 0)  # retries of a request after a connection error, a timeout, HTTP 429 or 5xx
    request_timeout: float = positive(60.0)  # seconds per request (connect and read)
    retry_backoff: float = at_least(1.0, 0.0)  # first retry delay in seconds, doubled per retry, with jitter
    retry_backoff_max: float = at_least(60.0, 0.0)  # cap on one computed delay
    retry_after_max: float = positive(300.0)  # a server's Retry-After is honoured up to this many seconds
    # Before the first probe, GET <base_url>/models: the endpoint answers, accepts the key and
    # serves the model id (a server without that route is asked anyway). false: no pre-flight.
    preflight: bool = True
    # family responses: a file (or a folder) of answers produced elsewhere (medexp.answers.imported).
    responses_path: Optional[str] = None
    # Who wrote the file (medexp.answers.formats): replies to a probe set python -m medexp.export wrote
    # name every probe by its id; a harness's own file (run on the release) names the item its own way,
    # joined to the cell's original probes by `responses_join` over `responses_id_field` (None: the
    # format's own id field, lmms_eval doc.question, vlmevalkit index, llava_med question_id).
    responses_format: ResponsesFormat = ResponsesFormat.medexp
    # The manifest-<format>.json of the export the replies answer (None: the format's beside the reply
    # file or in a folder above it, if any): the cell's probe set and request settings must be the export's.
    responses_manifest: Optional[str] = None
    responses_id_field: Optional[str] = None
    responses_join: Optional[ItemJoin] = None  # None: the format's (question for lmms_eval, source_id otherwise)
    # MedVIGIL's matched no-image file (<model>__mcq_noimg.jsonl): its lines, named by the original
    # probes' ids, answer the no_image probes of bench=medvigil.
    responses_no_image_path: Optional[str] = None
    # The fields an imported line's raw reply may be under, first present wins: medexp's and
    # MedVIGIL's names, then VLMEvalKit's `prediction`, then `answer` (some harnesses' name).
    reply_fields: List[str] = field(default_factory=lambda: list(DEFAULT_REPLY_FIELDS))
    # A harness's own status words (lower case) -> ok, unparsed, refused, or an error cause
    # (connection, timeout, http_4xx, http_5xx, rate_limited, malformed, other); added to the
    # built-in mapping (medexp.answers.imported.STATUS_WORDS). An unknown status is a bad line.
    status_map: Dict[str, str] = field(default_factory=dict)
    scores: Optional[ScoresFileConfig] = None  # source scores: the file of per-example scores
    train: Optional[TrainSpec] = None  # source trained: how the model is trained (medexp.train)
    # The model config of this model's independent counterpart in a differential audit (trained
    # from the same initialisation without the canaries): the memorization and membership
    # detectors' default pair. A trained model's counterpart is its own independent arm.
    independent: Optional[str] = None

    @staticmethod
    def check_values(node, path: str) -> str | None:
        """The rules a range cannot say (called by medexp.config.ranges.validate)."""
        from medexp.config.secrets import env_name_problem

        problem = env_name_problem(node.get("api_key_env"), f"{path}.api_key_env")
        if problem:
            return problem
        problem = backend_problem(node, path)
        if problem:
            return problem
        if node.get("source") == ModelSource.scores.value and node.get("scores") is None:
            return f"{path}.source=scores needs a `scores:` section naming the file (scores.path)"
        if not [name for name in node.get("reply_fields") or [] if str(name).strip()]:
            return f"{path}.reply_fields is empty: name the field(s) an imported line holds its reply under"
        for word, meaning in (node.get("status_map") or {}).items():
            if str(meaning) not in IMPORTED_STATUS_MEANINGS:
                return (f"{path}.status_map.{word}={meaning!r}: a status means one of "
                        f"{sorted(IMPORTED_STATUS_MEANINGS)}")
        return None


def backend_problem(node, path: str) -> str | None:
    """Why the model's family or placement cannot run on its backend, or None."""
    if ModelBackend(node.get("backend")) is not ModelBackend.vllm:
        return None
    family = ModelFamily(node.get("family")).value
    if family not in VLLM_FAMILIES:
        return (f"{path}.backend=vllm: family {family!r} cannot be scored through vLLM; the vllm backend "
                f"serves {sorted(VLLM_FAMILIES)} (use backend=transformers)")
    if node.get("device_map") is not None:
        return (f"{path}.device_map={node.get('device_map')!r} places a transformers model; vLLM places the "
                "model itself: leave device_map null with backend=vllm")
    return None
