"""What a cell reads, loaded once, and the hash of its content.

A tracked cell is reused only when its config fingerprint and this content hash both match
(DESIGN.md, "Integrity"): an edited benchmark file, a replaced image, a re-trained checkpoint in
the same directory or a changed reference corpus means recomputation, without ``force``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medexp.benchmarks.base import Benchmark
from medexp.evaluators.flag_sources import FlagTable


@dataclass(frozen=True)
class CellInputs:
    benchmark: Benchmark  # the examples the detector sees (the bench, or a negative control's image set)
    corpus: Benchmark | None  # the reference image corpus of a detector that reads one (Input.corpus)
    bench_hash: str  # content hash of the benchmark (ids, text, options, image bytes)
    inputs_hash: str  # bench_hash, the corpus's and twin's content, the flags, the judge and the weights of every model the cell reads
    twin: Benchmark | None = None  # the benchmark's perturbed twin, for a detector that reads one (Input.twin)
    flags: FlagTable | None = None  # the flags of the detector's flag source, for a detector that reads them (Input.flags)
    judge: str | None = None  # the judge of a detector that reads answers (Input.answers): "<name> <settings digest>"


def load_inputs(cfg, cache_dir: str | Path) -> CellInputs:
    """Load the cell's benchmark (and corpus or twin) and hash everything its result depends on."""
    from omegaconf import OmegaConf

    from medexp.benchmarks.content import content_hash
    from medexp.controls import control_benchmark
    from medexp.detectors import declaration_for
    from medexp.detectors.declaration import Input
    from medexp.evaluators import cell_reads_pixels
    from medexp.kernel.hashing import stable_hash

    # Rows are skipped for the fields this detector reads (an image detector needs no answers); a
    # cell of records of scores reads no pixels, so the bench may load from its annotations alone.
    benchmark = control_benchmark(cfg, cache_dir, OmegaConf.get_type(cfg.detector).example_fields,
                                  pixels=cell_reads_pixels(cfg))
    bench_hash = content_hash(benchmark.examples, cache_dir)
    reads = declaration_for(cfg.detector).inputs
    corpus = None
    parts = {"benchmark": bench_hash}
    if Input.corpus in reads:
        from medexp.images.audit import load_corpus

        corpus = load_corpus(cfg.detector.corpus, cache_dir)
        parts["corpus"] = content_hash(corpus.examples, cache_dir)
    twin = None
    if Input.twin in reads:
        from medexp.benchmarks.twins import load_twin

        twin = load_twin(cfg.bench, cache_dir)
        parts["twin"] = content_hash(twin.examples, cache_dir)
    flags = None
    if Input.flags in reads:  # read or computed now: changed flags are another computation, never a reuse
        from medexp.evaluators.flag_sources import load_flags

        flags = load_flags(cfg, benchmark, cache_dir)
        parts["flags"] = flags.content_hash
    judge = None
    if Input.answers in reads:  # a cell judged another way is another computation
        settings = OmegaConf.to_container(cfg.judge, resolve=True, enum_to_str=True)
        parts["judge"] = stable_hash(settings, length=16)
        judge = f"{cfg.judge.name} {parts['judge']}"
    parts["weights"] = model_weights(cfg, cache_dir)
    return CellInputs(benchmark, corpus, bench_hash, stable_hash(parts, length=32), twin, flags, judge)


def model_weights(cfg, cache_dir: str | Path) -> dict[str, str | None]:
    """Fingerprints of the local checkpoints of the cell's model, its cohort, its reference models and its baselines."""
    from medexp.evaluators import cell_model_configs
    from medexp.models import weights_fingerprint

    # Under control=synthetic the cohort is the calibration model's members, which have no weights:
    # the cohort's demo models are never read, so they are neither built nor fingerprinted.
    configs = cell_model_configs(cfg)
    return {name: weights_fingerprint(model_cfg, cache_dir) for name, model_cfg in sorted(configs.items())}
