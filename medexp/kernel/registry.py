"""Registries that name their entries as ``"package.module:attribute"`` strings, so that only the
chosen entry's module (and its heavy dependencies) is ever imported."""

from __future__ import annotations

import importlib


def import_object(spec: str):
    """The object ``spec`` names, e.g. ``"medexp.models.hf:HFScorer"``."""
    module, attribute = spec.split(":")
    return getattr(importlib.import_module(module), attribute)
