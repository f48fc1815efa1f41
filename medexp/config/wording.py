"""Names and default wordings of probes, and the checks of a slot template and of an evidence
battery: the vocabulary the detector schemas check, plain values with no numerical imports, so
that ``import medexp`` stays light and the probes take their names from here."""

from __future__ import annotations

import string

EVIDENCE_KINDS = ("original", "roi_masked", "roi_only", "lr_flip", "blur", "no_image")  # MedVIGIL's image families
# MedVIGIL's text families: the image kept, the question reworded (gold kept), negated (gold
# inverted), stripped of its qualifiers (gold kept), rewritten to need no image, or given a false
# premise (gold: the refusal). Made from a benchmark's own variants (meta "paraphrase" and "variants").
TEXT_KINDS = ("paraphrase", "negation", "specificity_drop", "knowledge_only", "false_premise")
BLUR_SIGMAS: tuple[int, ...] = (0, 2, 4, 8, 16, 32, 64)  # the blur sweep, Gaussian std in pixels
DEFAULT_REFUSAL = "I don't know"  # the refusal option a text-only probe adds
DEFAULT_MASK = "[MASK]"
DEFAULT_TEMPLATE = 'In this text one word is replaced by {mask}: "{text}"\nWhich word is missing?'


def check_template(template: str, mask: str) -> None:
    """The template names ``{text}`` (and optionally ``{mask}``), the mask token is not blank."""
    if not str(mask).strip():
        raise ValueError("the mask token is empty")
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as error:
        raise ValueError(f"slot template {template!r}: {error} (write a literal brace as '{{{{')") from None
    if "text" not in fields or fields - {"text", "mask"}:
        raise ValueError(f"slot template must name {{text}} and may name {{mask}}, nothing else; got {sorted(fields)} "
                         f"in {template!r}")


def check_evidence_battery(kinds, sigmas) -> None:
    """The evidence probe kinds are known ones and the blur sigmas distinct and non-negative."""
    unknown = sorted(set(kinds) - {*EVIDENCE_KINDS, *TEXT_KINDS})
    if unknown:
        raise ValueError(f"unknown evidence probe kind(s) {unknown}; known: {[*EVIDENCE_KINDS, *TEXT_KINDS]}")
    if any(sigma < 0 for sigma in sigmas) or len(set(sigmas)) != len(sigmas):
        raise ValueError(f"blur sigmas must be distinct and >= 0, got {list(sigmas)}")
DEFAULT_NONE_OPTION = "None of the above"  # the text that replaces the gold in a none_option probe
# The label sets renumbered_options shows instead of A, B, ... (one probe per set and example).
DEFAULT_LABEL_SETS: tuple[tuple[str, ...], ...] = (tuple(str(number) for number in range(1, 27)),)
DEFAULT_SOURCE_QUESTION = "Which public collection does this image come from?"
# The offline demo's collections as source_naming asks them: its benchmark (the audited test
# split), the public image corpus its models are trained on (the training split), and neither.
DEMO_SOURCES: tuple[str, ...] = ("MedDemo-VQA", "MedDemo-Atlas", "None of these")
