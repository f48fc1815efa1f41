"""Which controls a detector can take: a misfit fails the cell before anything is loaded."""

from __future__ import annotations

from omegaconf import OmegaConf

from medexp.config.schemas import (
    CodecConfig,
    ControlKind,
    DatasetInferenceConfig,
    ExchConfig,
    ExchRankConfig,
    ImageNNConfig,
    MembershipConfig,
    MemorizationConfig,
    PerturbationGapConfig,
)

_SCORE_ORDER = "the order comes from the cell model's scores, but image_nn uses no model and does not depend on order"
# image_nn compares benchmark images with a corpus: no model scores anything.
_NOT_FOR_IMAGE_NN = {
    ControlKind.blind_image: "image_nn compares images only; without images there is nothing to test",
    ControlKind.external_baseline: "image_nn involves no model, so there is nothing to run on a baseline model",
    ControlKind.order_answer_len: _SCORE_ORDER,
    ControlKind.order_mink: _SCORE_ORDER,
}
_SYNTHETIC = ("it replaces a cohort's score tables by draws from the calibration model; it applies to the cohort "
              "detectors (mink_tail, topk_jaccard, loss) and composition_sweep only")
# memorization and membership compare a candidate with the independent model trained beside it
_NOT_FOR_PAIRS = {
    ControlKind.synthetic: _SYNTHETIC,
    ControlKind.external_baseline: ("a baseline model has no independent counterpart trained without the canaries; "
                                    "name further pairs in detector.pairs or references in detector.reference_models"),
}

# dataset_inference and codec compare the cell's examples (members) with another split loaded
# beside them (non-members, which blind_image strips too: medexp.controls.control_nonmembers).
_NOT_FOR_DATASET_TESTS = {
    ControlKind.synthetic: _SYNTHETIC,
}

# perturbation_gap compares each item with its twin; a control that changes one arm's inputs
# (or supplies scores instead of answers) breaks the pairing. Reorderings change nothing it reads.
_NOT_FOR_TWINS = {
    ControlKind.synthetic: _SYNTHETIC,
    ControlKind.blind_image: "the twin differs from its original by its image; without images both arms ask the same question",
    ControlKind.external_baseline: "clean comparison models are named in detector.reference_models",
}


def check_control_fits(control_cfg, detector_cfg) -> None:
    """Raise a ValueError naming the control and the detector when the control cannot apply."""
    problem = control_misfit(ControlKind(control_cfg.kind), OmegaConf.get_type(detector_cfg))
    if problem:
        raise ValueError(f"control={control_cfg.name} does not apply to detector={detector_cfg.name}: {problem}")


def control_misfit(kind: ControlKind, detector_schema: type) -> str | None:
    """Why a control of ``kind`` cannot apply to a detector with this schema (None: it can)."""
    if kind is ControlKind.synthetic and detector_schema in (ExchConfig, ExchRankConfig, ImageNNConfig):
        return _SYNTHETIC
    if detector_schema is ImageNNConfig:
        return _NOT_FOR_IMAGE_NN.get(kind)
    if detector_schema in (MemorizationConfig, MembershipConfig) and kind in _NOT_FOR_PAIRS:
        return _NOT_FOR_PAIRS[kind]
    if detector_schema in (DatasetInferenceConfig, CodecConfig) and kind in _NOT_FOR_DATASET_TESTS:
        return _NOT_FOR_DATASET_TESTS[kind]
    if detector_schema is PerturbationGapConfig and kind in _NOT_FOR_TWINS:
        return _NOT_FOR_TWINS[kind]
    if kind is ControlKind.negative_images:
        return ("it replaces the benchmark's images by an out-of-domain image set, which only the image "
                "detector reads; it applies to image_nn only")
    if kind is ControlKind.blind_image and detector_schema is ExchConfig:
        return "exch scores the question/answer text alone, so without images it would repeat control=none"
    return None
