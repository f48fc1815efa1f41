"""Flag sources feeding overlap_gap cells on a small SLAKE release read from its annotations: the
release's own split overlap by image name (no pixel read), its counts logged, changed flags
computed again and never reused, and sources that cannot be read or are declared wrongly refused
with their name."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from medexp.config import compose
from tests.records.conftest import N_IMAGES, PER_IMAGE, audit_document

SPLIT = ["detector=overlap_gap", "flags@detector.flags=split_overlap", "detector.n_permutations=200",
         "detector.n_resamples=100"]


def _train_rows(images_and_languages) -> list[dict]:
    """SLAKE train rows naming the test images ``xmlab<i>/source.jpg`` (and one image of its own)."""
    rows = [{"qid": 9000 + n, "img_name": f"xmlab{image}/source.jpg", "q_lang": language, "question": "Q?",
             "answer": "A"} for n, (image, language) in enumerate(images_and_languages)]
    return rows + [{"qid": 9999, "img_name": "xmlab77/source.jpg", "q_lang": "en", "question": "Q?", "answer": "A"}]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One tracking store for the module (creating one costs seconds); each test's cells differ by their
    bench.root (part of a cell's settings), so none reuses another test's run."""
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"


@pytest.fixture()
def cell(tmp_path, slake_root, audit_file, store):
    record = ["model=scores", "model.name=model_a", f"model.scores.path={audit_file}", "model.scores.model=Model-A"]

    def make(*overrides):
        return compose([f"tracking.uri={store}", f"paths.cache_dir={tmp_path / 'cache'}", "bench=slake",
                        f"bench.root={slake_root}", *record, *overrides])

    return make


def _hand_gap(flagged_images: set[int]) -> float:
    """Model-A's mean log-prob on the questions of the flagged images minus the rest, from the record file."""
    scores = {int(r["example_id"].rsplit("::", 1)[1]): r["mean_logprob"]["Model-A"] for r in audit_document()["records"]}
    image = {100 + i * PER_IMAGE + k: i for i in range(N_IMAGES) for k in range(PER_IMAGE)}
    flags = np.array([image[qid] in flagged_images for qid in scores])
    values = np.array(list(scores.values()))
    return float(values[flags].mean() - values[~flags].mean())


def test_the_releases_split_overlap_flags_test_images_train_names_in_any_language_without_pixels(slake_root, cell):
    from medexp.runner.cell_run import run_cell

    # image 1 has English train questions, image 3 only Chinese ones: both are train images
    (slake_root / "train.json").write_text(json.dumps(_train_rows([(1, "en"), (1, "en"), (3, "zh")])))
    outcome = run_cell(cell(*SPLIT))
    assert outcome.status == "FINISHED", outcome.error
    metrics = outcome.metrics
    assert outcome.cell_key == "model=model_a,bench=slake,detector=overlap_gap-split_train,control=none"
    assert (metrics["flags_n_images"], metrics["flags_n_images_flagged"]) == (4, 2)
    assert (metrics["flags_n_questions"], metrics["flags_n_questions_flagged"]) == (12, 6)
    assert metrics["flags_split_images.train"] == 3 and metrics["bench_annotations_only"] == 1.0
    assert metrics["gap"] == pytest.approx(_hand_gap({1, 3}), abs=1e-12)
    assert metrics["underpowered"] == 1.0  # two flagged against two unflagged images: no power to speak of


def test_changed_flags_are_computed_again_never_reused(tmp_path, slake_root, cell):
    from medexp.runner.cell_run import run_cell
    from medexp.runner.inputs import load_inputs

    train = slake_root / "train.json"
    train.write_text(json.dumps(_train_rows([(1, "en"), (3, "zh")])))
    cfg = cell(*SPLIT)
    first = run_cell(cfg)
    assert first.status == "FINISHED", first.error
    assert run_cell(cfg).status == "CACHED"  # the same flags: the tracked run stands
    before = load_inputs(cfg, tmp_path / "cache").inputs_hash
    train.write_text(json.dumps(_train_rows([(1, "en")])))  # image 3 leaves the train split; nothing else changes
    assert load_inputs(cfg, tmp_path / "cache").inputs_hash != before
    second = run_cell(cfg)
    assert second.status == "FINISHED" and second.run_id != first.run_id, second.error
    assert (second.metrics["flags_n_images_flagged"], second.metrics["flags_n_questions_flagged"]) == (1, 3)
    assert second.metrics["gap"] == pytest.approx(_hand_gap({1}), abs=1e-12)
    assert run_cell(cfg).status == "CACHED"


def test_the_records_own_flag_column_is_a_source_too(cell):
    from medexp.runner.cell_run import run_cell

    outcome = run_cell(cell("detector=overlap_gap", "detector.n_permutations=200", "detector.n_resamples=100"))
    assert outcome.status == "FINISHED", outcome.error
    assert outcome.cell_key == "model=model_a,bench=slake,detector=overlap_gap,control=none"  # the historical key
    assert (outcome.metrics["flags_n_images_flagged"], outcome.metrics["flags_n_questions_flagged"]) == (1, 3)
    assert outcome.metrics["gap"] == pytest.approx(_hand_gap({0}), abs=1e-12)


@pytest.mark.parametrize("overrides, message", [
    (["flags@detector.flags=split_overlap", "detector.flags.splits=[test]"],
     "flag source split_test: detector.flags.splits names test, the cell's own split"),
    (["detector.flags.column=overlap"], "flag source record_overlap: column 'overlap' is not a field of model=model_a's "
                                        "record"),
    (["detector.flags.model=qwen2_5_vl"], "flag source record_flagged_of_qwen2_5_vl reads column 'flagged' of a record of scores, "
                                          "but model=qwen2_5_vl is not one"),
])
def test_a_flag_source_that_cannot_be_read_stops_the_cells_inputs_naming_it(tmp_path, cell, overrides, message):
    from medexp.evaluators.flag_sources import FlagSourceError
    from medexp.runner.inputs import load_inputs

    with pytest.raises(FlagSourceError, match=message):
        load_inputs(cell("detector=overlap_gap", *overrides), tmp_path / "cache")


def test_a_flag_source_that_cannot_be_read_fails_the_cell_naming_it(cell):
    from medexp.runner.cell_run import run_cell

    outcome = run_cell(cell("detector=overlap_gap", "flags@detector.flags=split_overlap",
                            "detector.flags.splits=[validate]"))
    assert outcome.status == "FAILED"
    assert re.search("flag source split_validate \\(detector.flags, kind split_overlap\\) could not be read: "
                     ".*validate.json", outcome.error), outcome.error


@pytest.mark.parametrize("overrides, message", [
    (["flags@detector.flags=split_overlap", "detector.flags.splits=null"],
     "flag source split_ \\(kind split_overlap\\) needs detector.flags.splits"),
    (["flags@detector.flags=split_overlap", "detector.flags.column=flagged"],
     "detector.flags.column is read by another kind of flag source; flag source split_train is of kind split_overlap"),
    (["flags@detector.flags=split_overlap", "detector.flags.splits=[train,'a=b']"],
     "detector.flags.splits: 'a=b' joins the cell key's detector name"),
    (["flags@detector.flags=split_overlap", "detector.flags.splits=[train,train]"],
     "detector.flags.splits repeats a split"),
])
def test_a_flag_source_declared_wrongly_is_refused_before_any_work(cell, overrides, message):
    from medexp.config.ranges import validate

    with pytest.raises(ValueError, match=message):
        validate(cell("detector=overlap_gap", *overrides))


def test_an_unknown_kind_of_flag_source_is_refused_with_the_kinds(cell):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException) as refused:
        cell("detector=overlap_gap", "detector.flags.kind=pixels")
    assert "Invalid value 'pixels', expected one of [column, split_overlap, image_nn]" in str(refused.value.__cause__)


def test_split_overlap_by_path_flags_only_the_file_another_split_uses(tmp_path):
    """A local release without an image-name field: the image path names it, so the train file the test
    split uses itself is flagged, and byte copies under other names are left to image_nn."""
    from medexp.benchmarks import load_benchmark_from_config
    from medexp.evaluators.flag_sources import load_flags
    from tests.images.split_fixture import write_split_benchmark

    write_split_benchmark(tmp_path / "bench")
    cfg = compose(["bench=local", f"bench.root={tmp_path / 'bench'}", "detector=overlap_gap",
                   "flags@detector.flags=split_overlap", "detector.flags.splits=[train,valid]"])
    benchmark = load_benchmark_from_config(cfg.bench, tmp_path / "cache")
    flags = load_flags(cfg, benchmark, tmp_path / "cache")
    metrics = flags.metrics()
    assert (metrics["flags_n_images"], metrics["flags_n_images_flagged"], metrics["flags_n_questions_flagged"]) == (6, 1, 1)
    (flagged,) = flags.table.loc[flags.table["flagged"], "image"]
    assert flagged.endswith("images/train_7.png")
    assert (metrics["flags_n_images_flagged.train"], metrics["flags_n_images_flagged.valid"]) == (1, 0)


def _report_cells(store: str, output_dir):
    """Build the report over the store (no claims) and read back its cells table."""
    import pandas as pd

    from medexp.report.build import build_report

    report = build_report(compose([f"tracking.uri={store}", f"output_dir={output_dir}", "figures=false"],
                                  config_name="report"), [])
    return pd.read_csv(report.output_dir / "cells.csv")


def test_two_flag_configurations_are_two_cells_and_the_report_lists_both(tmp_path, slake_root, audit_file, cell):
    """Two split_overlap cells naming other splits, two record_column cells naming other records: four
    keys, four results, none replacing another in the report."""
    from medexp.runner.cell_run import run_cell

    (slake_root / "train.json").write_text(json.dumps(_train_rows([(1, "en")])))
    (slake_root / "validate.json").write_text(json.dumps(_train_rows([(2, "en")])))
    other = audit_document()
    for record in other["records"]:  # another record: image 3 flagged instead of image 0
        record["flagged"] = record["example_id"].rsplit("::", 1)[1] in {str(100 + 3 * PER_IMAGE + k) for k in range(PER_IMAGE)}
    other_file = tmp_path / "other_record.json"
    other_file.write_text(json.dumps(other))
    quick = ["detector=overlap_gap", "detector.n_permutations=200", "detector.n_resamples=100"]
    configurations = {
        "split_train": [*quick, "flags@detector.flags=split_overlap", "detector.flags.splits=[train]"],
        "split_both": [*quick, "flags@detector.flags=split_overlap", "detector.flags.splits=[validate,train]"],
        "own_record": quick,
        "other_record": [*quick, f"detector.flags.model='scores scores.path={other_file} scores.model=Model-A'"],
    }
    outcomes = {name: run_cell(cell(*overrides)) for name, overrides in configurations.items()}
    assert all(outcome.status == "FINISHED" for outcome in outcomes.values()), {n: o.error for n, o in outcomes.items()}
    keys = {name: outcome.cell_key for name, outcome in outcomes.items()}
    assert len(set(keys.values())) == 4, keys
    assert keys["split_both"] == "model=model_a,bench=slake,detector=overlap_gap-split_train+validate,control=none"
    assert keys["other_record"].startswith("model=model_a,bench=slake,detector=overlap_gap-record_flagged_of_scores_")
    flagged = {name: outcome.metrics["flags_n_images_flagged"] for name, outcome in outcomes.items()}
    assert flagged == {"split_train": 1, "split_both": 2, "own_record": 1, "other_record": 1}
    assert outcomes["split_both"].metrics["gap"] == pytest.approx(_hand_gap({1, 2}), abs=1e-12)
    assert outcomes["other_record"].metrics["gap"] == pytest.approx(_hand_gap({3}), abs=1e-12)

    cells = _report_cells(cell().tracking.uri, tmp_path / "report").set_index("run_id")
    for name, outcome in outcomes.items():
        assert cells.loc[outcome.run_id, "cell_key"] == keys[name]
        assert cells.loc[outcome.run_id, "status"] == "FINISHED"
