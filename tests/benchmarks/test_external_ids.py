"""Other tools' item ids (bench.external_ids) and joining their per-item tables, on fixtures laid
out like the controlled audit's published top-K files: outputs/tail_enrichment_topk/
<org>__<model>__<bench>.json, a JSON list of {"example_id": ..., "delta": ...} with ids such as
pathvqa::test::002892 and slake_en::test::12748."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from medexp.benchmarks import load_benchmark
from medexp.benchmarks.external_ids import IdScheme, join_table, read_table
from medexp.config import compose
from tests.benchmarks.upstream import pathvqa_release_records, write_pathvqa, write_slake
from tests.conftest import REPO


def _topk_file(path, ids_and_deltas):
    """A top-K file as the audit writes it (json.dump(..., indent=2) of a list of objects)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"example_id": i, "delta": d} for i, d in ids_and_deltas], indent=2))
    return path


def test_schemes_declared_by_the_bench_configs():
    slake = IdScheme.from_config(compose(["bench=slake"]).bench)
    pathvqa = IdScheme.from_config(compose(["bench=pathvqa"]).bench)
    assert slake.external("slake::test::12748") == "slake_en::test::12748"
    assert slake.internal("slake_en::test::12748") == slake.internal("slake::test::12748") == "slake::test::12748"
    assert slake.internal("vqa_rad::test::12748") is None and slake.internal("not an id") is None
    assert pathvqa.external("pathvqa::test::2892") == "pathvqa::test::002892"
    assert pathvqa.internal("pathvqa::test::002892") == "pathvqa::test::2892"
    assert pathvqa.internal("pathvqa::test::000000") == "pathvqa::test::0"
    alias = IdScheme("slake", "slake_en", None, ("slake_english",))
    assert alias.internal("slake_english::validate::5") == "slake::validate::5"
    local = IdScheme.from_config(compose(["bench=local"]).bench)  # no scheme declared: medexp's own ids
    assert local.external("local::test::a") == "local::test::a"


def test_a_published_slake_topk_list_joins_the_benchmark(tmp_path):
    root = write_slake(tmp_path / "slake")
    bench = load_benchmark("slake", cache_dir=tmp_path / "cache", root=root)
    topk = _topk_file(tmp_path / "outputs" / "tail_enrichment_topk" / "StanfordAIMI__CheXagent-8b__slake_en.json",
                      [("slake_en::test::12035", 1696.7), ("slake_en::test::11934", 1668.0), ("slake_en::test::99999", 3.0)])
    joined = join_table(read_table(topk), IdScheme.from_config(compose(["bench=slake"]).bench),
                        [ex.example_id for ex in bench.examples])
    assert [None if pd.isna(i) else i for i in joined.frame["example_id"]] == ["slake::test::12035", "slake::test::11934", None]
    assert list(joined.frame["external_id"]) == ["slake_en::test::12035", "slake_en::test::11934", "slake_en::test::99999"]
    assert list(joined.frame["delta"]) == [1696.7, 1668.0, 3.0]
    assert joined.n_matched == 2 and joined.unmatched == ["slake_en::test::99999"]
    with pytest.raises(ValueError, match="no id column 'item'"):
        join_table(read_table(topk), IdScheme("slake", "slake_en"), id_column="item")


def test_inspect_joins_a_published_pathvqa_list_and_reads_the_release_with_its_dedup_count(tmp_path):
    root = write_pathvqa(tmp_path / "PathVQA", pathvqa_release_records())  # 6,761 questions, 42 repeated
    topk = _topk_file(tmp_path / "StanfordAIMI__CheXagent-8b__pathvqa.json",
                      [("pathvqa::test::002892", 42.87), ("pathvqa::test::000279", 65.79), ("pathvqa::test::006719", 1.0)])
    out = tmp_path / "joined.csv"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEDEXP_CACHE": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-m", "medexp.inspect", "bench=pathvqa", f"bench.root={root}",
                             f"--join={topk}", f"--join-out={out}"], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["layout"], summary["n_examples"], summary["n_deduplicated"]) == ("pathvqa_release", 6719, 42)
    assert summary["matches_expected"] is True and summary["n_skipped"] == 0
    assert summary["findings"][0] == "6719 examples, as the config expects for split test"
    assert "bench.dedup removed 42 row(s)" in summary["findings"][1]
    assert "dedup removed 42 question(s)" in result.stderr
    join = summary["external_join"]
    assert (join["n_rows"], join["n_matched"], join["unmatched"]) == (3, 2, ["pathvqa::test::006719"])
    assert join["scheme"] == {"prefix": "pathvqa", "padding": 6, "aliases": []}
    assert [(row["example_id"], row["position"], row["delta"]) for row in join["rows"]] == [
        ("pathvqa::test::2892", 2892, 42.87), ("pathvqa::test::279", 279, 65.79)]
    assert out.read_text().splitlines()[0] == "example_id,position,external_id,delta"
