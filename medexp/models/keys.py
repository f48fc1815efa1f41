"""What names a model's scores: the settings that can change them, and the weights they come from.

These dicts are the model part of every score-cache key and of a trained model's identity: a
change to them (a key added to or removed from ``SCORE_NEUTRAL_MODEL_KEYS`` included) orphans
every cached score.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from medexp.config.schemas.model import demo_identity
from medexp.models import weights_fingerprint

# Model settings that cannot change a score; left out of the score-cache key. (`independent` names
# another model: the counterpart a differential audit pairs this one with.)
SCORE_NEUTRAL_MODEL_KEYS = (
    "name", "device", "device_map", "batch_size", "token_budget", "independent",
    # scoring from a shared prefix's key/value cache gives the plain path's log-probs
    "shared_prefix",
    # black-box transport settings: they change how a server is asked, never what it answers
    "api_key_env", "max_concurrency", "max_retries", "request_timeout", "retry_backoff", "retry_backoff_max",
    "retry_after_max", "preflight",
    # how an imported file is read: imported answers are read from their file every time, never cached
    "reply_fields", "status_map",
)
# Settings added after score caches existed that can change a score, with the value every earlier
# score was made with: at that value they are left out of the key, so no existing key changes;
# any other value (backend=vllm: another engine's kernels, no Min-K%++ z) is part of it.
KEYED_AWAY_FROM_DEFAULT = {"backend": "transformers"}


def model_settings_key(model_cfg) -> dict:
    """The model settings that can change a score: what names a model before its weights exist."""
    resolved = OmegaConf.to_container(model_cfg, resolve=True, enum_to_str=True)
    if isinstance(resolved.get("demo"), dict):
        resolved["demo"] = demo_identity(resolved["demo"])
    return {name: value for name, value in resolved.items()
            if name not in SCORE_NEUTRAL_MODEL_KEYS
            and not (name in KEYED_AWAY_FROM_DEFAULT and value == KEYED_AWAY_FROM_DEFAULT[name])}


def model_cache_key(model_cfg, cache_dir: Path) -> dict:
    """What can change a model's scores (the score-cache key): its settings, and the bytes of its
    weights when they are a local directory (a demo model is built first if needed)."""
    return {**model_settings_key(model_cfg), "weights": weights_fingerprint(model_cfg, cache_dir)}
