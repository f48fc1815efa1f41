"""Which controls a detector can take: a misfit fails the cell before anything is loaded.

A detector's declaration lists the controls that fit it and, where the reason is its own, why
another cannot; a control that a detector does not take for no reason of its own is refused with
the control's general reason below, which names the detectors it does fit.
"""

from __future__ import annotations

from medexp.config.schemas import ControlKind
from medexp.detectors import declaration_for, declarations
from medexp.detectors.declaration import DetectorDeclaration

# A control's general reason, completed with the detectors whose declarations take it.
_GENERAL_REASONS = {
    ControlKind.synthetic: ("it replaces a cohort's score tables by draws from the calibration model; it applies to "
                            "the cohort detectors ({}) only"),
    ControlKind.negative_images: ("it replaces the benchmark's images by an out-of-domain image set, which only an "
                                  "image detector reads; it applies to {} only"),
}


def check_control_fits(control_cfg, detector_cfg) -> None:
    """Raise a ValueError naming the control and the detector when the control cannot apply."""
    problem = control_misfit(ControlKind(control_cfg.kind), declaration_for(detector_cfg))
    if problem:
        raise ValueError(f"control={control_cfg.name} does not apply to detector={detector_cfg.name}: {problem}")


def control_misfit(kind: ControlKind, declaration: DetectorDeclaration) -> str | None:
    """Why a control of ``kind`` cannot apply to the declared detector (None: it can)."""
    if kind in declaration.controls:
        return None
    if kind in declaration.control_reasons:
        return declaration.control_reasons[kind]
    taking = [other.name for other in declarations() if kind in other.controls]
    general = _GENERAL_REASONS.get(kind, "it applies to {} only")
    return general.format(", ".join(taking) if taking else "no detector")
