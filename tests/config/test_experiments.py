"""Every cell of every experiment preset composes and passes the schemas (no cell runs)."""

from __future__ import annotations

from collections import Counter

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.plugins import Plugins
from omegaconf import OmegaConf

import medexp  # noqa: F401  (registers the schemas)
from medexp.config import conf_dir

Plugins.instance()  # the plugin scan first, so the sweeper module imported below is Hydra's

from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: E402

from hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper import expand_grid  # noqa: E402
from medexp.runner.cell import Cell  # noqa: E402

EXPERIMENTS = sorted(path.stem for path in (conf_dir() / "experiment").glob("*.yaml"))


def _cells(experiment: str):
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        base = compose("config", [f"experiment={experiment}"], return_hydra_config=True)
        grid = OmegaConf.to_container(base.hydra.sweeper.grid, resolve=True)
        assert base.hydra.mode.name == "MULTIRUN", f"{experiment} should launch its grid by itself"
        parser = OverridesParser.create()
        jobs = expand_grid(grid, [], parser)
        return [compose("config", [f"experiment={experiment}", *job]) for job in jobs]


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_cell_of_the_preset_composes_with_a_distinct_key(experiment):
    cells = _cells(experiment)
    keys = Counter(Cell.from_config(cfg).key for cfg in cells)
    assert cells and max(keys.values()) == 1, [key for key, n in keys.items() if n > 1]


def test_controlled_audit_has_the_27_cell_exchangeability_family():
    cells = _cells("controlled_audit")
    release = [cfg for cfg in cells if cfg.detector.name == "exch_rank" and cfg.control.name == "none"]
    assert len(release) == 27 and {cfg.family for cfg in release} == {"exch_rank/none"}
    assert Counter(cfg.bench.name for cfg in release) == {"slake": 7, "pathvqa": 7, "vqa_rad": 7, "omnimedvqa": 6}
    # The cohort detectors use the medical cohort at the audit's thresholds, not the demo's.
    tails = [cfg for cfg in cells if cfg.detector.name == "mink_tail"]
    assert {tuple(cfg.detector.cohort) for cfg in tails} == {("internvl3", "qwen2_5_vl", "chexagent", "llava_onevision")}
    assert {(tuple(cfg.detector.thresholds), cfg.detector.flag_threshold) for cfg in tails} == {((50.0, 100.0), 100.0)}
    baselines = {tuple(cfg.control.baselines) for cfg in cells if cfg.control.name == "external_baseline"}
    assert baselines == {("blip2", "instructblip")}
    images = {cfg.detector.name for cfg in cells if cfg.detector.name.startswith("image_nn")}
    assert images == {"image_nn-siglip_b16-pmc_oa", "image_nn-siglip_so400m-pmc_oa"}


def test_demo_grid_stays_offline():
    cells = _cells("demo_grid")
    assert {cfg.bench.name for cfg in cells} == {"demo", "synthetic"}
    assert {cfg.model.source for cfg in cells if cfg.model.name != "none"} == {"demo", "synthetic"}
    for cfg in cells:
        assert not getattr(cfg.control, "baselines", None) or all(name.startswith("demo") for name in cfg.control.baselines)


def test_split_overlap_checks_the_test_split_against_each_overlap_split_of_the_same_release():
    cells = _cells("split_overlap")  # the default bench: the offline demo, test against train
    assert [(cfg.detector.corpus.source.name, cfg.detector.corpus.source.split) for cfg in cells] == [("demo", "train")]
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cell = ["model=none", "detector=image_nn", "corpus@detector.corpus=bench_split", "embedder@detector.embedder=phash"]
        slake = [compose("config", ["experiment=split_overlap", *cell, "bench=slake", "bench.root=/data/slake",
                                    f"detector.corpus.source.split={split}"]) for split in ("train", "validate")]
    for cfg, split in zip(slake, ("train", "validate")):
        source = OmegaConf.to_container(cfg.detector.corpus.source, resolve=True)
        bench = OmegaConf.to_container(cfg.bench, resolve=True)
        # the corpus is the benchmark's own release: every key but the split and the row count
        assert {k: v for k, v in source.items() if bench[k] != v} == {"split": split, "expected_examples": None}
        assert (cfg.model.name, cfg.detector.name) == ("none", f"image_nn-phash-slake_{split}")
    assert OmegaConf.to_container(slake[0].bench.overlap_splits) == ["train", "validate"]
