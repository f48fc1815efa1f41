"""Every cell of every experiment preset composes and passes the schemas (no cell runs)."""

from __future__ import annotations

from collections import Counter

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.plugins import Plugins
from omegaconf import OmegaConf

from medexp.config import conf_dir

Plugins.instance()  # the plugin scan first, so the sweeper module imported below is Hydra's

from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: E402

from hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper import expand_grid  # noqa: E402
from medexp.kernel.cell import Cell  # noqa: E402
from tests.readme_figures import demo_grid_cells  # noqa: E402

EXPERIMENTS = sorted(path.stem for path in (conf_dir() / "experiment").glob("*.yaml"))
# Composing a cell takes about 0.3 s: the replicate preset's 280 cells and the atlas's 720 are
# checked by the test_demo_replicates_* and test_detector_atlas_* tests below, which compose one
# replicate seed (the atlas: one dose per recipe) and derive the others.
REPLICATES = "demo_replicates"
ATLAS = "detector_atlas"


def _jobs(experiment: str) -> list[list[str]]:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        base = compose("config", [f"experiment={experiment}"], return_hydra_config=True)
        grid = OmegaConf.to_container(base.hydra.sweeper.grid, resolve=True)
        assert base.hydra.mode.name == "MULTIRUN", f"{experiment} should launch its grid by itself"
        return expand_grid(grid, [], OverridesParser.create())


def _compose(experiment: str, jobs: list[list[str]]):
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return [compose("config", [f"experiment={experiment}", *job]) for job in jobs]


def _cells(experiment: str):
    return _compose(experiment, _jobs(experiment))


@pytest.mark.parametrize("experiment", [name for name in EXPERIMENTS if name not in (REPLICATES, ATLAS)])
@pytest.mark.extended
def test_every_cell_of_the_preset_composes_with_a_distinct_key(experiment):
    cells = _cells(experiment)
    keys = Counter(Cell.from_config(cfg).key for cfg in cells)
    assert cells and max(keys.values()) == 1, [key for key, n in keys.items() if n > 1]


@pytest.mark.extended
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
    assert len(cells) == demo_grid_cells()  # the README's count
    assert {cfg.bench.name for cfg in cells} == {"demo", "synthetic"}
    assert {cfg.model.source for cfg in cells if cfg.model.name != "none"} == {"demo", "synthetic"}
    for cfg in cells:
        assert not getattr(cfg.control, "baselines", None) or all(name.startswith("demo") for name in cfg.control.baselines)


MODEL_SEED, CORPUS_SEED = "model.demo.seed", "detector.corpus.source.demo_corpus.seed"


def _replicate_seed(job: list[str]) -> tuple[str, int]:
    (override,) = [item for item in job if item.split("=", 1)[0] in (MODEL_SEED, CORPUS_SEED)]
    key, value = override.split("=", 1)
    return key, int(value)


@pytest.fixture(scope="module")
def replicate_jobs():
    """The preset's jobs by replicate seed, and the composed cells of seed 10 by job."""
    by_seed: dict[int, list[list[str]]] = {}
    for job in _jobs(REPLICATES):
        by_seed.setdefault(_replicate_seed(job)[1], []).append(job)
    first = by_seed[10]
    return by_seed, dict(zip((frozenset(job) for job in first), _compose(REPLICATES, first)))


def test_demo_replicates_gives_every_replicate_its_own_cell_and_family(replicate_jobs):
    """All 280 cells: those of seed 10 composed, every other seed's derived from its seed-10 twin
    (the jobs differ only in the seed value, which the names and families interpolate)."""
    by_seed, composed = replicate_jobs
    assert sorted(by_seed) == list(range(10, 20)) and sum(map(len, by_seed.values())) == 280
    first = by_seed[10]
    cells = []
    for seed, seed_jobs in by_seed.items():
        assert len(seed_jobs) == len(first) == 28  # 13 cells per model x 2 models + 2 image cells
        for job in seed_jobs:
            key, _ = _replicate_seed(job)
            twin = frozenset(f"{key}=10" if item == f"{key}={seed}" else item for item in job)
            cfg = composed[twin].copy()
            OmegaConf.update(cfg, key, seed)
            cells.append(cfg)
    keys = Counter(Cell.from_config(cfg).key for cfg in cells)
    assert max(keys.values()) == 1, [key for key, n in keys.items() if n > 1]
    names = Counter(cfg.model.name for cfg in cells)
    assert names["demo_clean_s13"] == names["demo_leaky_e30_s13"] == 13 and names["none"] == 20
    detectors = {cfg.detector.name for cfg in cells if cfg.model.name == "none"}
    assert detectors == {f"image_nn-phash-demo_s{seed}" for seed in range(10, 20)}
    # Each training seed is one replicate of demo_grid's families (its clean and its leaky model);
    # a corpus seed's image cells are theirs.
    families = Counter(cfg.family for cfg in cells)
    assert families["exch/none/replicate_s13"] == families["loss/external_baseline_demo/replicate_s13"] == 2
    assert families["image_nn/none/replicate_s13"] == families["image_nn/negative_demo_ood/replicate_s13"] == 1
    negative = [cfg for cfg in cells if cfg.control.name == "negative_demo_ood"]
    assert all(cfg.control.images.demo_corpus.seed == cfg.detector.corpus.source.demo_corpus.seed for cfg in negative)


def test_demo_replicates_costs_20_models_against_the_fixed_demo_cohort(replicate_jobs):
    from medexp.config import model_config

    cells = list(replicate_jobs[1].values())
    trained = {(cfg.model.demo.seed, cfg.model.demo.leak_epochs) for cfg in cells if cfg.model.name != "none"}
    assert trained == {(10, 0), (10, 30)}  # per seed; 20 models over the ten seeds
    assert Counter(cfg.detector.name for cfg in cells if cfg.model.name != "none") == {
        "exch": 4, "exch_rank": 10, "mink_tail": 4, "topk_jaccard": 4, "loss": 4}
    cohorts = {tuple(cfg.detector.cohort) for cfg in cells if "cohort" in cfg.detector}
    assert cohorts == {("demo_clean", "demo_clean_b", "demo_clean_c", "demo_leaky", "demo_leaky_b")}
    # no replicate meets its twin (same training seed) in the cohort or as the external baseline
    references = {*cohorts.pop(), *(name for cfg in cells for name in cfg.control.get("baselines", []))}
    reference_seeds = {model_config(name).demo.seed for name in references}
    assert reference_seeds == {0, 1, 2} and reference_seeds.isdisjoint(range(10, 20))
    # demo_clean itself is unchanged: seed 0, its own name
    assert (model_config("demo_clean").name, model_config("demo_clean").demo.seed) == ("demo_clean", 0)


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
        assert {k: v for k, v in source.items() if bench[k] != v} == {"split": split, "expected_by_split": None}
        assert (cfg.model.name, cfg.detector.name) == ("none", f"image_nn-phash-slake_{split}")
    assert OmegaConf.to_container(slake[0].bench.overlap_splits) == ["train", "validate"]


def test_detector_atlas_sweeps_six_doses_over_ten_seeds_for_every_model_reading_detector():
    """The atlas's 960 jobs: per seed, six doses of each recipe; the cells of seed 10 at doses 0
    and 30 composed (every other job differs from one of them in seed and dose only, which the
    names and families interpolate)."""
    jobs = _jobs(ATLAS)
    assert len(jobs) == 960

    def settings(job):
        values = dict(item.split("=", 1) for item in job)
        return values["model"], int(values["model.demo.seed"]), int(values.get("model.demo.leak_epochs", 0)), values["detector"]

    table = Counter((model, dose) for model, _, dose, _ in map(settings, jobs))
    text_side = {"exch", "exch_rank", "loss", "mink_tail", "topk_jaccard", "dataset_inference", "codec", "membership"}
    answering = {"option_order", "text_only", "slot_guess", "perturbation_gap"}
    probe_forms = {"none_option", "renumbered_options", "open_ended", "source_naming_demo"}
    assert table == {("demo_clean_replicate", 0): 80, ("demo_clean_mc", 0): 40, ("demo_clean_probes", 0): 40,
                     **{("demo_leaky_replicate", dose): 80 for dose in (1, 5, 10, 20, 30)},
                     **{("demo_leaky_mc", dose): 40 for dose in (1, 5, 10, 20, 30)},
                     **{("demo_leaky_probes", dose): 40 for dose in (1, 5, 10, 20, 30)}}
    detectors = {(model.removeprefix("demo_clean_").removeprefix("demo_leaky_"), detector)
                 for model, _, _, detector in map(settings, jobs)}
    assert detectors == {*(("replicate", name) for name in text_side), *(("mc", name) for name in answering),
                         *(("probes", name) for name in probe_forms)}
    assert {seed for _, seed, _, _ in map(settings, jobs)} == set(range(10, 20))
    first = [job for job in jobs if settings(job)[1] == 10 and settings(job)[2] in (0, 30)]
    cells = _compose(ATLAS, first)
    keys = Counter(Cell.from_config(cfg).key for cfg in cells)
    assert len(cells) == 32 and max(keys.values()) == 1
    names = {cfg.model.name for cfg in cells}
    assert names == {"demo_clean_s10", "demo_leaky_e30_s10", "demo_clean_mc_s10", "demo_leaky_mc_e30_s10",
                     "demo_clean_probes_s10", "demo_leaky_probes_e30_s10"}
    # Bonferroni over one seed's doses: a family per detector and training seed
    assert {cfg.family for cfg in cells if cfg.detector.name == "loss"} == {"loss/none/atlas_s10"}
    # the cohort detectors keep the fixed demo cohort, whose training seeds no replicate shares;
    # membership's independent reference is one of its clean models, for clean and leaky alike
    cohorts = {tuple(cfg.detector.cohort) for cfg in cells if "cohort" in cfg.detector}
    assert cohorts == {("demo_clean", "demo_clean_b", "demo_clean_c", "demo_leaky", "demo_leaky_b")}
    pairs = [OmegaConf.to_container(cfg.detector.pairs) for cfg in cells if cfg.detector.name == "membership"]
    assert pairs == [[{"candidate": None, "independent": "demo_clean_c"}]] * 2
