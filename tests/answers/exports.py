"""Small demo exports for tests of the harness formats: the ``demo_export`` fixture
(tests/answers/conftest.py) writes one; these read replies back as a cell does."""

from __future__ import annotations

import json
from pathlib import Path

from medexp.config import compose
from tests.answers.judging import judged_model_import


def jsonl_replies(export: Path, reply=lambda probe: probe["gold"], keep=lambda probe: True) -> Path:
    """Replies to an export's probes.jsonl, written beside its manifest."""
    probes = [json.loads(line) for line in (export / "probes.jsonl").read_text().splitlines()]
    path = export / "replies.jsonl"
    path.write_text("".join(json.dumps({"probe_id": probe["probe_id"], "response": reply(probe)}) + "\n"
                            for probe in probes if keep(probe)))
    return path


def imported(demo_cache, replies: Path, fmt: str, *overrides: str):
    cfg = compose([f"paths.cache_dir={demo_cache}", "bench.max_examples=6", "detector=option_order", "model=responses",
                   f"model.responses_path={replies}", f"model.responses_format={fmt}", *overrides])
    from medexp.evaluators.mmdetect import option_order_probes
    from medexp.export import _context

    probes = option_order_probes(_context(cfg)).probes
    return judged_model_import(probes, cfg.model, cfg.detector.answer, cache_dir=demo_cache)


def manifest_of(folder: Path, fmt: str, probe_set: str, n_probes: int) -> Path:
    """An export's manifest for replies written by hand (no files of its own), in ``folder``."""
    from medexp.answers.formats.manifest import Manifest

    return Manifest(format=fmt, probe_set=probe_set, cell_key="k", bench="demo", detector="option_order",
                    control="none", seed=0, n_probes=n_probes, arms={}, n_images=0, answer={}, files={},
                    rebuild=[]).write(folder)
