"""The medexp_grid sweeper's job list, computed without launching anything."""

from __future__ import annotations

import pytest
from hydra.core.plugins import Plugins

# Hydra's one-time plugin scan re-executes the plugin modules (ours and its BasicSweeper's), which
# redefines their classes: scan first, so the classes imported below are the ones Hydra keeps.
Plugins.instance()

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper import GridError, MedexpGridSweeper, expand_grid

PARSER = OverridesParser.create()


def jobs(grid, *command_line: str) -> list[list[str]]:
    return expand_grid(grid, PARSER.parse_overrides(list(command_line)), PARSER)


def as_sets(job_list: list[list[str]]) -> list[frozenset[str]]:
    return [frozenset(job) for job in job_list]


def test_a_block_is_the_cartesian_product_of_its_keys():
    grid = [{"model": ["a", "b"], "control": ["none", "order_hash"], "detector": "exch_rank"}]
    expected = [
        {"model=a", "control=none", "detector=exch_rank"},
        {"model=a", "control=order_hash", "detector=exch_rank"},
        {"model=b", "control=none", "detector=exch_rank"},
        {"model=b", "control=order_hash", "detector=exch_rank"},
    ]
    assert as_sets(jobs(grid)) == [frozenset(job) for job in expected]


def test_blocks_are_united_and_a_job_from_two_blocks_runs_once():
    grid = [
        {"model": ["a", "b"], "detector": "exch_rank"},
        {"model": ["b", "c"], "detector": ["exch_rank", "loss"]},
    ]
    # 2 + 4 jobs, of which model=b detector=exch_rank appears in both blocks: 5 distinct.
    assert as_sets(jobs(grid)) == [
        frozenset({"model=a", "detector=exch_rank"}),
        frozenset({"model=b", "detector=exch_rank"}),
        frozenset({"model=b", "detector=loss"}),
        frozenset({"model=c", "detector=exch_rank"}),
        frozenset({"model=c", "detector=loss"}),
    ]


def test_duplicate_values_in_a_list_give_one_job():
    assert as_sets(jobs([{"model": ["a", "a", "b"]}])) == [frozenset({"model=a"}), frozenset({"model=b"})]


def test_command_line_sweeps_multiply_every_block_and_fixed_values_join_every_job():
    grid = [{"model": ["a", "b"]}, {"model": "c", "detector": "loss"}]
    result = as_sets(jobs(grid, "seed=0,1", "paths.cache_dir=/tmp/x"))
    assert len(result) == (2 + 1) * 2
    for job in result:
        assert "paths.cache_dir=/tmp/x" in job
    assert frozenset({"model=c", "detector=loss", "seed=1", "paths.cache_dir=/tmp/x"}) in result
    assert frozenset({"model=a", "seed=0", "paths.cache_dir=/tmp/x"}) in result


def test_the_command_line_value_replaces_a_blocks_value_for_the_same_key():
    grid = [{"model": ["a", "b"], "control": "none"}, {"model": "c", "control": "order_hash"}]
    # model=a on the command line narrows both blocks to model=a: two distinct jobs remain.
    assert as_sets(jobs(grid, "model=a")) == [
        frozenset({"model=a", "control=none"}),
        frozenset({"model=a", "control=order_hash"}),
    ]
    # A command-line sweep over a block key replaces the block's sweep.
    assert len(jobs([{"model": ["a", "b", "c"]}], "model=x,y")) == 2


def test_values_are_written_as_on_the_command_line():
    grid = [
        {
            "detector.cohort": "[demo_clean,demo_leaky]",  # a string is verbatim: a list value
            "detector.n_permutations": [500, 1000],
            "force": True,
            "bench.root": None,
            "detector.alpha": 0.05,
        }
    ]
    result = jobs(grid)
    # Values go through Hydra's override parser, which writes booleans as True/False.
    assert result == [
        [
            "detector.cohort=[demo_clean,demo_leaky]",
            "detector.n_permutations=500",
            "force=True",
            "bench.root=null",
            "detector.alpha=0.05",
        ],
        [
            "detector.cohort=[demo_clean,demo_leaky]",
            "detector.n_permutations=1000",
            "force=True",
            "bench.root=null",
            "detector.alpha=0.05",
        ],
    ]
    # A list of list-valued strings sweeps over lists; a comma string sweeps like key=a,b.
    assert jobs([{"detector.cohort": ["[a,b]", "[a,c]"]}]) == [["detector.cohort=[a,b]"], ["detector.cohort=[a,c]"]]
    assert jobs([{"model": "a,b"}]) == [["model=a"], ["model=b"]]


def test_group_keys_with_a_package_are_distinct_from_the_plain_key():
    grid = [{"embedder@detector.embedder": ["phash", "siglip_b16"]}]
    assert jobs(grid, "embedder@detector.embedder=phash") == [["embedder@detector.embedder=phash"]]


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ([], "non-empty list of blocks"),
        ([{}], r"hydra.sweeper.grid\[0\] must be a non-empty mapping"),
        ([{"model": "a"}, {"model": []}], r"grid\[1\].model is an empty list"),
        ([{"model": {"name": "a"}}], r"grid\[0\].model: \{'name': 'a'\} is not a scalar"),
        ([{"model": ["a", ["b", "c"]]}], r"grid\[0\].model: \['b', 'c'\] is not a scalar"),
        ([{"model": "a]b"}], r"grid\[0\].model: 'a\]b' is not a valid override value"),
        ([{"seed": "interval(0,1)"}], "only discrete sweeps"),
    ],
)
def test_bad_blocks_fail_with_a_message_naming_the_block_and_key(grid, message):
    with pytest.raises(GridError, match=message):
        jobs(grid)


def test_without_a_grid_the_sweeper_is_the_basic_sweeper():
    overrides = PARSER.parse_overrides(["model=a,b", "control=none,order_hash", "seed=3"])
    sweeper = MedexpGridSweeper(max_batch_size=3)
    assert sweeper.split_arguments(overrides, 3) == BasicSweeper.split_arguments(overrides, 3)
    assert [len(batch) for batch in sweeper.split_arguments(overrides, 3)] == [3, 1]


def test_grid_jobs_are_batched_by_max_batch_size():
    sweeper = MedexpGridSweeper(max_batch_size=2, grid=[{"model": ["a", "b", "c"]}])
    overrides = PARSER.parse_overrides(["seed=1"])
    assert sweeper.split_arguments(overrides, 2) == [
        [["model=a", "seed=1"], ["model=b", "seed=1"]],
        [["model=c", "seed=1"]],
    ]
