"""A cell's settings: the config that can change its result, beyond the four names of its key.

The cell key names the axes (model, bench, detector, control, each by its config name, a flag
source's part derived from its fields). Every other choice that can change the result (a
detector's permutations, the seed, a bench filter, an answering cell's judge, a model override)
is a setting: the resolved config less the sections that change no result. Their digest tags
every run (``medexp.settings``), so the report keeps the latest run per key *and* settings and
shows runs of one key with other settings side by side (:mod:`medexp.report.cells`), and it is
the part of the config fingerprint (``medexp.config_hash``) a tracked run is reused by.
"""

from __future__ import annotations

from omegaconf import OmegaConf

from medexp.config.schemas import RUN_NEUTRAL_KEYS
from medexp.kernel.hashing import stable_hash


def cell_settings(cfg) -> dict:
    """The resolved config a cell's result can depend on: all of it but the run-neutral sections,
    and the judge only for a detector that reads answers (its declaration says so); no other
    detector reads a reply, so its judge changes nothing."""
    from medexp.detectors import declaration_for
    from medexp.detectors.declaration import Input

    resolved = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    unread = () if Input.answers in declaration_for(cfg.detector).inputs else ("judge",)
    return {key: value for key, value in resolved.items() if key not in (*RUN_NEUTRAL_KEYS, *unread)}


def settings_digest(settings: dict) -> str:
    """The tag ``medexp.settings``: runs of one cell key with equal digests computed the same thing."""
    return stable_hash(settings, length=16)
