"""image_nn configuration: backbone and corpus switch from the command line; bad values fail early."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from medexp.config import compose, conf_dir
from medexp.config.schemas import CorpusConfig, ImageNNConfig, OpenClipEmbedderConfig, PHashEmbedderConfig
from tests.conftest import run_medexp


def _options(group: str) -> list[str]:
    return sorted(path.stem for path in (conf_dir() / group).glob("*.yaml"))


def test_default_image_nn_is_offline_phash_on_the_demo_corpus():
    detector = compose(["detector=image_nn"]).detector
    assert OmegaConf.get_type(detector) is ImageNNConfig
    assert OmegaConf.get_type(detector.embedder) is PHashEmbedderConfig
    assert OmegaConf.get_type(detector.corpus) is CorpusConfig
    assert (detector.name, detector.family, detector.tau_alpha, detector.calibration_size) == (
        "image_nn-phash-demo", "image_nn", 0.01, 5000
    )
    assert detector.index.kind.value == "exact" and detector.sweep_alphas[0] == 0.001 and detector.sweep_alphas[-1] == 0.1


@pytest.mark.parametrize("embedder", _options("embedder"))
@pytest.mark.parametrize("corpus", _options("corpus"))
def test_every_embedder_and_corpus_composes_and_names_the_cell(embedder, corpus):
    cfg = compose(["detector=image_nn", f"embedder@detector.embedder={embedder}", f"corpus@detector.corpus={corpus}"])
    detector = cfg.detector
    # bench_split names itself after the split it reads (the default bench's train split), a corpus
    # replicate after its seed
    corpus_name = {"bench_split": f"{cfg.bench.name}_train", "demo_replicate": "demo_s10"}.get(corpus, corpus)
    assert (detector.embedder.name, detector.corpus.name) == (embedder, corpus_name)
    assert detector.name == f"image_nn-{embedder}-{corpus_name}"  # distinct cells per backbone and corpus
    OmegaConf.to_container(cfg, resolve=True)
    if embedder.startswith("siglip"):
        assert OmegaConf.get_type(detector.embedder) is OpenClipEmbedderConfig


def test_pmc_oa_corpus_reuses_the_pmc_oa_benchmark_config():
    source = compose(["detector=image_nn", "corpus@detector.corpus=pmc_oa"]).detector.corpus.source
    bench = compose(["bench=pmc_oa"]).bench
    assert OmegaConf.to_container(source) == OmegaConf.to_container(bench)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["detector.index.kind=flat"], "expected one of [exact, bf16, ivf, hnsw]"),
        (["detector.embedder.hash_size=big"], "detector.embedder.hash_size"),
        (["embedder@detector.embedder=siglip_b16", "detector.embedder.hash_size=8"], "hash_size"),
        (["embedder=siglip_b16"], "embedder@detector.embedder"),
        (["corpus@detector.corpus=nope"], "Available options in 'corpus'"),
    ],
)
def test_bad_image_nn_overrides_fail_at_composition(overrides, message):
    result = run_medexp("detector=image_nn", *overrides, "--cfg", "job")
    assert result.returncode != 0
    assert message in result.stderr + result.stdout


def test_unset_corpus_location_names_the_override(tmp_path):
    from medexp.images.audit import load_corpus

    corpus = compose(["detector=image_nn", "corpus@detector.corpus=pmc_oa", "detector.corpus.source.hub_id=null"]).detector.corpus
    with pytest.raises(ValueError, match="set detector.corpus.source.root=/path/to/pmc_oa"):
        load_corpus(corpus, tmp_path)
