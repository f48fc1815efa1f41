"""Harness formats: a cell's probes written out for the harness a model runs in, and the harness's
output read back (DESIGN.md, "Records go both ways"). One module per format, its writer and reader
side by side; :data:`FORMATS` names each format's declaration as ``"module:attr"``; the manifest an
export writes beside its files is :mod:`medexp.answers.formats.manifest`'s."""

from __future__ import annotations

from medexp.answers.formats.base import HarnessFormat
from medexp.kernel.registry import import_object

FORMATS = {
    "openai_batch": "medexp.answers.formats.openai_batch:FORMAT",
    "vlmevalkit": "medexp.answers.formats.vlmevalkit:FORMAT",
    "lmms_eval": "medexp.answers.formats.lmms_eval:FORMAT",
    "jsonl": "medexp.answers.formats.jsonl:FORMAT",
    "llava_med": "medexp.answers.formats.llava_med:FORMAT",
    "inspect_ai": "medexp.answers.formats.inspect_ai:FORMAT",
}
ALIASES = {"medexp": "jsonl"}  # model.responses_format=medexp, the name of medexp's reply JSONL before exports


def harness_format(name: str) -> HarnessFormat:
    """The format ``name`` (an alias allowed); a ValueError naming the formats otherwise."""
    name = ALIASES.get(str(name), str(name))
    if name not in FORMATS:
        raise ValueError(f"no harness format {name!r}; formats: {sorted(FORMATS)}")
    return import_object(FORMATS[name])


__all__ = ["FORMATS", "HarnessFormat", "harness_format"]
