"""Build a tiny demo benchmark and model into a fresh cache and print their digests as JSON.

Run by test_portable_build.py in subprocesses whose environment simulates another CPU, so the
kernel settings take effect before numpy and torch are imported.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from omegaconf import OmegaConf

import medexp  # noqa: F401  (registers the schemas)
from medexp.config.schemas import DemoBenchConfig, DemoModelConfig
from medexp.demo.cache import demo_benchmark_root
from medexp.demo.models import demo_model_dir

OVERRIDES = ["model.demo.train_epochs=1", "model.demo.hidden_size=32", "model.demo.leak_epochs=1",
             "model.demo.bench.n_test=24", "model.demo.bench.n_train=48", "model.demo.bench.n_heldout=8"]
TINY = DemoModelConfig(train_epochs=1, hidden_size=32, leak_epochs=1,
                       bench=DemoBenchConfig(n_test=24, n_train=48, n_heldout=8))


def weights_digest(model_dir: Path) -> str:
    from safetensors.torch import load_file

    weights = load_file(model_dir / "model.safetensors")
    digest = hashlib.sha256()
    for name in sorted(weights):
        digest.update(name.encode())
        digest.update(weights[name].numpy().tobytes())
    return digest.hexdigest()


def scores(model_dir: Path, cache: Path) -> list[float]:
    """Teacher-forced gold log-likelihoods of the first test examples, scored on the host's kernels."""
    import torch

    from medexp.benchmarks.local import load_local
    from medexp.config import compose
    from medexp.models import load_scorer

    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    cfg = compose(["model=demo_leaky", *OVERRIDES])
    examples = load_local("demo", demo_benchmark_root(cfg.model.demo.bench, cache), "test").examples[:8]
    return load_scorer(cfg.model, cache).score_examples(examples)["sum_logprob"].tolist()


def main() -> None:
    import torch

    cache = Path(sys.argv[1])
    settings = OmegaConf.structured(TINY)
    bench = demo_benchmark_root(settings.bench, cache)
    model = demo_model_dir(settings, cache)
    print(json.dumps({
        "aten_capability": torch.backends.cpu.get_cpu_capability(),
        "benchmark": json.loads((bench / "manifest.json").read_text())["sha256"],
        "weights": weights_digest(model),
        "clean_weights": weights_digest(demo_model_dir(OmegaConf.merge(settings, {"leak_epochs": 0}), cache)),
        "scores": scores(model, cache),
    }))


if __name__ == "__main__":
    main()
