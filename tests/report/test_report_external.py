"""The report's external_tables: a published per-item table joined to the per-example tables of
the tracked cells of its benchmark (the tracker is a stand-in serving the cells' artefacts)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
from omegaconf import OmegaConf

from medexp.report.external import write_external_tables


class ArtefactStore:
    """Serves ``per_example.parquet`` of the runs it holds, as ``Tracker.read_table`` does."""

    def __init__(self, tables):
        self.tables = tables

    def read_table(self, run_id, path):
        if run_id not in self.tables:
            raise ValueError(f"run {run_id} has no artefact {path!r}")
        return self.tables[run_id]


def test_a_topk_list_is_joined_with_every_cell_of_its_benchmark(tmp_path):
    topk = tmp_path / "StanfordAIMI__CheXagent-8b__pathvqa.json"
    topk.write_text(json.dumps([{"example_id": "pathvqa::test::002892", "delta": 42.9},
                                {"example_id": "pathvqa::test::000007", "delta": 40.1}], indent=2))
    cells = [SimpleNamespace(key="model=a,bench=pathvqa,detector=mink_tail,control=none", bench="pathvqa", run_id="r1"),
             SimpleNamespace(key="model=a,bench=slake,detector=mink_tail,control=none", bench="slake", run_id="r2"),
             SimpleNamespace(key="model=b,bench=pathvqa,detector=exch,control=none", bench="pathvqa", run_id="r3")]
    store = ArtefactStore({
        "r1": pd.DataFrame({"example_id": ["pathvqa::test::2892", "pathvqa::test::5"], "delta": [41.0, 2.0]}),
        "r2": pd.DataFrame({"example_id": ["slake::test::1"], "delta": [9.0]}),
    })
    tables = OmegaConf.create([{"path": str(topk), "bench": "pathvqa", "id_column": "example_id", "name": None}])
    written = write_external_tables(tables, store, cells, tmp_path / "report")
    assert written == ["external/StanfordAIMI__CheXagent-8b__pathvqa.csv"]
    frame = pd.read_csv(tmp_path / "report" / written[0])
    assert list(frame.columns) == ["cell_key", "run_id", "example_id", "external_id", "delta", "cell.delta"]
    assert frame["run_id"].tolist() == ["r1", "r1"]  # r3 logged no per-example table, r2 is another benchmark
    assert frame["example_id"].tolist() == ["pathvqa::test::2892", "pathvqa::test::7"]
    assert frame["cell.delta"].tolist()[0] == 41.0 and pd.isna(frame["cell.delta"].tolist()[1])
