"""Structured-config schemas for every config group.

Registered in Hydra's ConfigStore by :func:`register_schemas`, so that a YAML file with a wrong
type or an unknown key fails at composition with a message naming the offending key.
One module per axis (model, bench, images, control, root, report); one per detector family, beside
its evaluator module in medexp.evaluators (exchangeability, cohort, composition, memorization,
images, mmdetect, medvigil, perturbation, dataset_tests, overlap), over their common base (detector); one for the
answering section that answering detectors embed (answers), the judges of their replies (judge), MM-Detect's keyword section
(keywords), translators (translator) and the bench's twin section (twin); and two for
`python -m medexp.train` (train, train_app). Model, benchmark and tracking configs share one
schema each; detectors and controls have one schema per kind, selected by the YAML file's
defaults list (``/schema/detector@_here_: exch``).
"""

from __future__ import annotations

from medexp.config.schemas.answers import (  # noqa: F401
    AnswerConfig,
    AnswerMode,
    check_answer_config,
)
from medexp.config.schemas.bench import (  # noqa: F401
    BenchConfig,
    BenchFormat,
    DemoBenchConfig,
    DemoClassesConfig,
    DemoCorpusConfig,
    ExternalIdsConfig,
    SyntheticBenchConfig,
)
from medexp.config.schemas.control import (  # noqa: F401
    ControlBase,
    ControlKind,
    ExternalBaselineControl,
    NegativeImagesControl,
    OrderMinkControl,
    SyntheticControl,
    SyntheticModel,
)
from medexp.config.schemas.cohort import (  # noqa: F401
    CohortDetectorBase,
    LossConfig,
    MinkTailConfig,
    OverlapNull,
    RankBy,
    TopKJaccardConfig,
)
from medexp.config.schemas.composition import CompositionSweepConfig  # noqa: F401
from medexp.config.schemas.dataset_tests import (  # noqa: F401
    CodecConfig,
    DatasetInferenceConfig,
    DatasetTestBase,
    MembershipFeature,
)
from medexp.config.schemas.detector import DetectorBase  # noqa: F401
from medexp.config.schemas.exchangeability import ExchConfig, ExchRankConfig  # noqa: F401
from medexp.config.schemas.images import (  # noqa: F401
    CorpusConfig,
    EmbedderBase,
    ImageNNConfig,
    IndexConfig,
    IndexKind,
    OpenClipEmbedderConfig,
    PHashEmbedderConfig,
)
from medexp.config.schemas.judge import (  # noqa: F401
    JUDGE_SCHEMAS,
    ExactJudgeConfig,
    FreeTextMetric,
    JudgeBase,
    JudgeKind,
    LlavaMedJudgeConfig,
    ModelJudgeConfig,
    ReadJudgeConfig,
    VlmevalkitJudgeConfig,
)
from medexp.config.schemas.keywords import KeywordConfig  # noqa: F401
from medexp.config.schemas.medvigil import MedvigilConfig  # noqa: F401
from medexp.config.schemas.memorization import (  # noqa: F401
    ATTACKS_NEEDING_IN_REFERENCES,
    DifferentialDetectorBase,
    LiraVariance,
    MembershipAttack,
    MembershipConfig,
    MemorizationConfig,
    ModelPair,
)
from medexp.config.schemas.mmdetect import (  # noqa: F401
    AnsweringDetectorBase,
    ChanceModel,
    OptionOrderConfig,
    SlotGuessConfig,
    TextOnlyConfig,
)
from medexp.config.schemas.overlap import (  # noqa: F401
    FLAG_SOURCE_FIELDS, FlagSourceConfig, FlagSourceKind, OverlapGapAnswersConfig, OverlapGapConfig,
)
from medexp.config.schemas.perturbation import PerturbationGapConfig  # noqa: F401
from medexp.config.schemas.probe_forms import (  # noqa: F401
    NoneOptionConfig,
    OpenEndedConfig,
    RenumberedOptionsConfig,
)
from medexp.config.schemas.source_naming import SourceNamingConfig  # noqa: F401
from medexp.config.schemas.twin import PairBy, TwinConfig  # noqa: F401
from medexp.config.schemas.model import (  # noqa: F401
    DemoModelConfig,
    DType,
    ModelBackend,
    ModelConfig,
    ModelFamily,
    ItemJoin,
    ModelSource,
    ResponsesFormat,
    ScoreKind,
    ScoresFileConfig,
    ScoresFormat,
)
from medexp.config.schemas.report import (  # noqa: F401
    CellSelection,
    ClaimConfig,
    ClaimStatuses,
    EvidenceConfig,
    ReportConfig,
    ReportPathsConfig,
)
from medexp.config.schemas.root import (  # noqa: F401
    RUN_NEUTRAL_KEYS,
    Config,
    PathsConfig,
    TrackingConfig,
)
from medexp.config.schemas.train import (  # noqa: F401
    DPSettings,
    InitConfig,
    LoraSettings,
    PartitionConfig,
    TrainArm,
    TrainMethod,
    TrainSpec,
)
from medexp.config.schemas.train_app import TrainAppConfig  # noqa: F401
from medexp.config.schemas.translator import (  # noqa: F401
    DemoTranslatorConfig,
    MarianDirection,
    MarianTranslatorConfig,
    TranslatorBase,
)

DETECTOR_SCHEMAS = {
    "exch": ExchConfig,
    "exch_rank": ExchRankConfig,
    "mink_tail": MinkTailConfig,
    "topk_jaccard": TopKJaccardConfig,
    "loss": LossConfig,
    "image_nn": ImageNNConfig,
    "composition_sweep": CompositionSweepConfig,
    "memorization": MemorizationConfig,
    "membership": MembershipConfig,
    "dataset_inference": DatasetInferenceConfig,
    "codec": CodecConfig,
    "option_order": OptionOrderConfig,
    "slot_guess": SlotGuessConfig,
    "text_only": TextOnlyConfig,
    "medvigil": MedvigilConfig,
    "perturbation_gap": PerturbationGapConfig,
    "overlap_gap": OverlapGapConfig,
    "overlap_gap_answers": OverlapGapAnswersConfig,
    "none_option": NoneOptionConfig,
    "renumbered_options": RenumberedOptionsConfig,
    "open_ended": OpenEndedConfig,
    "source_naming": SourceNamingConfig,
}
EMBEDDER_SCHEMAS = {"open_clip": OpenClipEmbedderConfig, "phash": PHashEmbedderConfig}
TRANSLATOR_SCHEMAS = {"marian": MarianTranslatorConfig, "demo": DemoTranslatorConfig}
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
    store.store(name="train_schema", node=TrainAppConfig)
    store.store(group="schema", name="claim", node=ClaimConfig)
    store.store(group="schema", name="answer", node=AnswerConfig)
    for name, node in DETECTOR_SCHEMAS.items():
        store.store(group="schema/detector", name=name, node=node)
    for name, node in CONTROL_SCHEMAS.items():
        store.store(group="schema/control", name=name, node=node)
    for name, node in EMBEDDER_SCHEMAS.items():
        store.store(group="schema/embedder", name=name, node=node)
    for name, node in TRANSLATOR_SCHEMAS.items():
        store.store(group="schema/translator", name=name, node=node)
    for name, node in JUDGE_SCHEMAS.items():
        store.store(group="schema/judge", name=name, node=node)
