"""Model adapters: a model config -> a scorer that fills score tables."""

from __future__ import annotations

from pathlib import Path


# Sources whose weights are built into the cache on first use, by a package above models: the
# config section describing the build and the "module:function" (section, cache_dir) -> directory
# that builds it, imported only when such a model is loaded.
BUILT_SOURCES = {
    "demo": ("demo", "medexp.demo.models:demo_model_dir"),
    "trained": ("train", "medexp.train.models:trained_model_dir"),
}
# Models whose "weights" are files the config names: "module:function" path -> digest. The
# responses family answers probes from a file; the scores source gives per-example scores from one.
FILE_DIGESTS = {"responses": "medexp.answers.imported:responses_digest",
                "scores": "medexp.scoring.records:scores_digest"}
# Sources whose models are files, not weights: their FILE_DIGESTS entry fingerprints them.
FILE_SOURCES = ("scores",)


def model_location(model_cfg, cache_dir: str | Path) -> str:
    """Where the checkpoint is loaded from: a hub id, a local directory, or a built model's directory."""
    from medexp.config.schemas import ModelSource
    from medexp.kernel.registry import import_object

    source = ModelSource(model_cfg.source)
    if source is ModelSource.scores:
        raise ValueError(
            f"model={model_cfg.name} is a record of per-example scores ({model_cfg.scores.path}): it has no "
            "weights to load; detectors that read only per-example scores run on it"
        )
    if source is ModelSource.synthetic:
        raise ValueError(
            f"model={model_cfg.name} is a synthetic calibration-model member (source: synthetic): it has no "
            "weights to load; its scores exist only under control=synthetic (with bench=synthetic)"
        )
    if source.value in BUILT_SOURCES:
        section, builder = BUILT_SOURCES[source.value]
        if getattr(model_cfg, section) is None:
            raise ValueError(f"model={model_cfg.name}: source '{source.value}' needs a `{section}:` section")
        return str(import_object(builder)(getattr(model_cfg, section), cache_dir))
    if not model_cfg.pretrained:
        raise ValueError(f"model={model_cfg.name}: set `pretrained` to a hub id or a local directory")
    return str(model_cfg.pretrained)


def checkpoint_fingerprint(location: str, cache_dir: str | Path) -> str | None:
    """A hash of a local checkpoint directory's files (names and byte digests), or None for a hub id.

    Part of every score-cache key, so re-trained or replaced weights in the same directory are
    never scored from a stale cache entry. A hub id is identified by its id and ``revision``
    only: pin the revision for a reproducible audit.
    """
    from medexp.benchmarks.digests import DigestCache
    from medexp.kernel.hashing import stable_hash

    directory = Path(location)
    if not directory.is_dir():
        return None
    files = sorted(path for path in directory.rglob("*") if path.is_file())
    digests = DigestCache(cache_dir).digests(files)
    return stable_hash([[str(path.relative_to(directory)), digest] for path, digest in zip(files, digests)], length=32)


def weights_fingerprint(model_cfg, cache_dir: str | Path) -> str | None:
    """The fingerprint of a model's local weights (a demo model is built first if needed), or
    None when there are none to read: a hub id, a calibration-model member, ``model=none``. An
    imported-responses model's "weights" are its responses file(s): the hash of their content."""
    from medexp.config.schemas import ModelFamily, ModelSource
    from medexp.kernel.registry import import_object

    if model_cfg.get("family") == ModelFamily.responses.value and model_cfg.get("responses_path"):
        from medexp.kernel.hashing import stable_hash

        digest = import_object(FILE_DIGESTS[ModelFamily.responses.value])
        files = [model_cfg.responses_path, model_cfg.get("responses_no_image_path")]
        digests = [digest(path) for path in files if path]
        return digests[0] if len(digests) == 1 else stable_hash(digests, length=64)
    source = ModelSource(model_cfg.source)
    if source is ModelSource.scores:
        return import_object(FILE_DIGESTS[source.value])(model_cfg.scores.path)
    if source is ModelSource.synthetic or (source is ModelSource.hub and not model_cfg.pretrained):
        return None
    return checkpoint_fingerprint(model_location(model_cfg, cache_dir), cache_dir)


# Scorer class per adapter family, as "module:Class" so that only the chosen one is imported.
ADAPTERS = {
    "generic": "medexp.models.hf:HFScorer",
    "qwen2_5_vl": "medexp.models.families:Qwen25VLScorer",
    "llava_onevision": "medexp.models.families:LlavaOnevisionScorer",
    "internvl": "medexp.models.families:InternVLScorer",
    "gemma3": "medexp.models.families:Gemma3Scorer",
    "blip2": "medexp.models.blip:Blip2Scorer",
    "instructblip": "medexp.models.blip:InstructBlipScorer",
    "chexagent": "medexp.models.blip:CheXagentScorer",
    "image_classifier": "medexp.models.classifier:ImageClassifierScorer",
}

# Scorer class per backend other than transformers (whose scorer is the family's adapter), as
# "module:Class": the engine's own package is imported only inside that module, when it loads.
BACKENDS = {"vllm": "medexp.models.vllm_scorer:VLLMScorer"}

# Families that answer probes through an API or a file and have no weights to score with.
BLACK_BOX_FAMILIES = ("openai_compatible", "responses")


def scorer_class(family) -> type:
    """The scorer class of a model family (a ``ModelFamily`` or its name)."""
    from medexp.kernel.registry import import_object

    name = getattr(family, "value", family)
    if name in BLACK_BOX_FAMILIES:
        raise ValueError(f"model family {name!r} is a black box: it answers probes (answering detectors such as "
                         "option-order sensitivity) and has no teacher-forced scores for a scoring detector")
    if name not in ADAPTERS:
        raise ValueError(f"no scorer adapter for model family {name!r}; known: {sorted(ADAPTERS)}")
    return import_object(ADAPTERS[name])


def load_scorer(model_cfg, cache_dir: str | Path):
    from medexp.config.schemas import ModelBackend
    from medexp.kernel.registry import import_object

    backend = ModelBackend(model_cfg.backend)
    if backend is ModelBackend.transformers:
        scorer = scorer_class(model_cfg.family)
    else:
        scorer = import_object(BACKENDS[backend.value])
    return scorer(model_cfg, model_location(model_cfg, cache_dir))


__all__ = [
    "ADAPTERS", "BACKENDS", "BLACK_BOX_FAMILIES", "BUILT_SOURCES", "FILE_DIGESTS", "FILE_SOURCES",
    "checkpoint_fingerprint",
    "load_scorer", "model_location", "scorer_class", "weights_fingerprint",
]
