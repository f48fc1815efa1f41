"""A cell is what it computes: every config group and option that can change a cell's result either
changes its key or its settings (tag medexp.settings), and runs of one key with other settings
both stand in the report; a flag source's part of the key comes from the fields its kind reads."""

from __future__ import annotations

import itertools

import pytest

from medexp.config import compose, conf_dir
from medexp.config.schemas import FLAG_SOURCE_FIELDS, FlagSourceKind
from medexp.detectors import declaration_for
from medexp.detectors.declaration import Input
from medexp.kernel.cell import Cell
from medexp.report import CellIndex
from medexp.runner.settings import cell_settings, settings_digest
from medexp.tracking import TrackedRun

# Each config group whose options can change a cell's result, and the overrides under which it is read:
# the four axes anywhere; the judge by a detector that reads answers; the embedder and corpus by the
# image detector; a flag source by an overlap gap.
GROUPS = {
    "model": [],
    "bench": [],
    "detector": [],
    "control": ["detector=image_nn"],  # the replicate negative control reads the image detector's corpus seed
    "judge": ["detector=overlap_gap_answers"],
    "embedder@detector.embedder": ["detector=image_nn"],
    "corpus@detector.corpus": ["detector=image_nn"],
    "flags@detector.flags": ["detector=overlap_gap"],
}
# For each kind of flag source, overrides giving each field it reads (FLAG_SOURCE_FIELDS), and the
# record it may name, other values: each is another flag table, so another cell key.
FLAG_FIELD_VALUES = {
    "split_overlap": {"splits": [f"detector.flags.splits={splits}" for splits in
                                 ("[train]", "[validate]", "[train,validate]", "[train,validate,extra]")]},
    "record_column": {"column": ["detector.flags.column=flagged", "detector.flags.column=overlap"],
                      "model": [f"detector.flags.model={record}" for record in
                                ("null", "qwen2_5_vl_record", "blip2_record", "'scores scores.path=/data/a.json'",
                                 "'scores scores.path=/data/b.json'")]},
    # the default backbone and corpus (phash, demo), each other backbone, each other corpus
    "image_nn_demo": {"image_nn": ["seed=0", *(f"embedder@detector.flags.image_nn.embedder={option}"
                                               for option in ("siglip_b16", "siglip_so400m")),
                                   *(f"corpus@detector.flags.image_nn.corpus={option}"
                                     for option in ("pmc_oa", "bench_split", "demo_replicate"))]},
}
FLAG_KINDS = {"split_overlap": FlagSourceKind.split_overlap, "record_column": FlagSourceKind.column,
              "image_nn_demo": FlagSourceKind.image_nn}


def _options(group: str) -> list[str]:
    return sorted(path.stem for path in (conf_dir() / group.split("@")[0]).glob("*.yaml"))


def _identity(cfg) -> tuple[str, str]:
    return Cell.from_config(cfg).key, settings_digest(cell_settings(cfg))


def _tracked(cfg, run_id: str, start: int) -> TrackedRun:
    """The finished run run_cell would track for ``cfg`` (its identity tags)."""
    cell = Cell.from_config(cfg)
    tags = {"medexp.model": cell.model, "medexp.bench": cell.bench, "medexp.detector": cell.detector,
            "medexp.control": cell.control, "medexp.cell_key": cell.key,
            "medexp.settings": settings_digest(cell_settings(cfg))}
    return TrackedRun(run_id, "FINISHED", {"p_value": 0.5}, tags, {}, start)


@pytest.mark.parametrize("group", list(GROUPS))
def test_no_two_options_of_a_group_that_changes_the_result_are_one_cell(group):
    configs = {option: compose([*GROUPS[group], f"{group}={option}"]) for option in _options(group)}
    identities = {option: _identity(cfg) for option, cfg in configs.items()}
    for (first, a), (second, b) in itertools.combinations(identities.items(), 2):
        if a == b:  # one computation under two file names: every setting the same
            assert cell_settings(configs[first]) == cell_settings(configs[second]), (group, first, second)
    shared = {key: [option for option, identity in identities.items() if identity[0] == key]
              for key in {identity[0] for identity in identities.values()}}
    for key, options in shared.items():
        distinct = {identities[option][1] for option in options}
        if len(distinct) < 2:
            continue
        # one key, other settings: the report keeps a run of each, side by side
        runs = [_tracked(configs[option], f"run_{option}", start) for start, option in enumerate(options)]
        index = CellIndex.from_runs(runs)
        assert {cell.settings for cell in index.finished if cell.key == key} == distinct, (group, key)


def test_the_judge_groups_answering_cells_apart_and_leaves_the_others_one_cell():
    answering = {option: _identity(compose(["detector=overlap_gap_answers", f"judge={option}"]))
                 for option in _options("judge")}
    assert Input.answers in declaration_for(compose(["detector=overlap_gap_answers"]).detector).inputs
    assert len(set(answering.values())) == len(answering)
    assert len({key for key, _ in answering.values()}) == 1  # not an axis: the settings tell them apart
    scoring = {_identity(compose(["detector=exch", f"judge={option}"])) for option in _options("judge")}
    assert Input.answers not in declaration_for(compose(["detector=exch"]).detector).inputs
    assert len(scoring) == 1  # a detector that reads no reply: the judge changes nothing, one cell


def test_the_walk_covers_every_field_each_kind_of_flag_source_reads():
    for option, kind in FLAG_KINDS.items():
        assert set(FLAG_SOURCE_FIELDS[kind]) <= set(FLAG_FIELD_VALUES[option]), option
    assert {kind.value for kind in FLAG_KINDS.values()} == {kind.value for kind in FlagSourceKind}


@pytest.mark.parametrize("option", list(FLAG_FIELD_VALUES))
@pytest.mark.parametrize("detector", ["overlap_gap", "overlap_gap_answers"])
def test_every_value_of_a_flag_sources_fields_is_its_own_cell_key(detector, option):
    """Never a fixed string: each value of a field the source reads is another flag table and another key."""
    for field_name, values in FLAG_FIELD_VALUES[option].items():
        configs = [compose([f"detector={detector}", f"flags@detector.flags={option}", override]) for override in values]
        keys = [Cell.from_config(cfg).key for cfg in configs]
        assert len(set(keys)) == len(keys), (option, field_name, keys)
        assert {cfg.detector.family for cfg in configs} == {cfg.detector.name for cfg in configs}


def test_split_order_is_not_identity_but_the_splits_are():
    def detector(splits: str) -> str:
        return compose(["detector=overlap_gap", "flags@detector.flags=split_overlap",
                        f"detector.flags.splits={splits}"]).detector.name

    assert detector("[validate,train]") == detector("[train,validate]") == "overlap_gap-split_train+validate"
    assert detector("[train]") == "overlap_gap-split_train"  # the key tracked runs of the default already hold


def test_the_records_own_flag_column_keeps_the_historical_key_and_another_record_names_itself():
    def detector(*overrides: str) -> str:
        return compose(["detector=overlap_gap", *overrides]).detector.name

    assert detector() == "overlap_gap"
    assert detector("detector.flags.model=qwen2_5_vl_record") == "overlap_gap-record_flagged_of_qwen2_5_vl_record"
    assert detector("detector.flags.column=overlap") == "overlap_gap-record_overlap"
    # a record given with overrides: its conf name and a digest of them (no path in a key)
    named = detector("detector.flags.model='scores scores.path=/data/a.json'")
    assert named.startswith("overlap_gap-record_flagged_of_scores_") and "/" not in named


def test_a_field_that_cannot_join_a_key_is_refused_before_any_work():
    from medexp.config.ranges import ConfigRangeError, validate

    with pytest.raises(ConfigRangeError, match="detector.flags.splits: 'train,x=1' joins the cell key"):
        validate(compose(["detector=overlap_gap", "flags@detector.flags=split_overlap",
                          "detector.flags.splits=['train,x=1']"]))


def test_the_run_neutral_sections_are_no_setting():
    base = _identity(compose([]))
    assert _identity(compose(["force=true", "paths.cache_dir=/elsewhere", "tracking.experiment=other",
                              "split.tasks=2", "split.task=1"])) == base
    assert _identity(compose(["detector.permutations=999"]))[1] != base[1]
    assert _identity(compose(["seed=7"]))[1] != base[1]
