"""``python -m medexp.inspect``, ``medexp.load_benchmark`` and the CLI composing each benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf.errors import ValidationError

import medexp
from medexp.benchmarks.base import Example
from medexp.inspect import MAX_LISTED_VALUES, strata
from tests.benchmarks.upstream import write_slake
from tests.conftest import REPO, run_medexp


def run_inspect(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEDEXP_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "medexp.inspect", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_inspect_prints_counts_and_strata_as_json(tmp_path):
    root = write_slake(tmp_path / "slake")
    (root / "imgs" / "xmlab7" / "source.jpg").unlink()  # one English question loses its image
    result = run_inspect("bench=slake", f"bench.root={root}", cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["name"] == "slake" and summary["split"] == "test" and summary["format"] == "slake"
    assert summary["version"] == 1
    assert (summary["n_examples"], summary["n_with_image"], summary["n_skipped"]) == (4, 4, 1)
    assert summary["skipped"] == {"missing image": 1}
    assert summary["expected_examples"] == 1061 and summary["matches_expected"] is False
    assert summary["strata"]["answer_type"] == {"OPEN": 3, "CLOSED": 1}
    assert summary["strata"]["modality"] == {"CT": 2, "X-Ray": 2}
    assert summary["strata"]["img_name"] == {"xmlab102/source.jpg": 2, "xmlab160/source.jpg": 2}
    assert "expects 1061" in result.stderr  # the mismatch warning is logged


def test_inspect_expected_count_match(tmp_path):
    root = write_slake(tmp_path / "slake")
    result = run_inspect("bench=slake", f"bench.root={root}", "bench.expected_examples=5", cache=tmp_path / "cache")
    summary = json.loads(result.stdout)
    assert summary["n_examples"] == 5 and summary["matches_expected"] is True and summary["skipped"] == {}


@pytest.mark.parametrize("args,message", [
    (["bench=slake"], "hf download BoKelvin/SLAKE --repo-type dataset"),
    (["bench=nope"], "Could not find 'bench/nope'"),
    (["bench=slake", "bench.max_examples=many"], "bench.max_examples"),
    (["bench.root=/tmp"], "name the benchmark with bench=<name>"),
])
def test_inspect_errors_exit_non_zero_with_a_message(tmp_path, args, message):
    result = run_inspect(*args, cache=tmp_path / "cache")
    assert result.returncode != 0
    assert result.stdout == ""
    assert message in result.stderr


def test_inspect_usage():
    from medexp.inspect import main

    assert main(["--help"]) == 0
    assert main([]) == 2


def test_strata_lists_few_values_and_counts_many():
    examples = [Example(f"x::t::{i}", i, None, "q", "a", meta={"side": "left" if i % 3 else "right",
                                                              "case": f"case{i}", "size": i % 2, "flags": [i % 2]})
                for i in range(MAX_LISTED_VALUES + 1)]
    counts = strata(examples)
    assert counts["side"] == {"left": 20, "right": 11}
    assert list(counts["side"]) == ["left", "right"]  # most common first
    assert counts["case"] == {"n_distinct": MAX_LISTED_VALUES + 1}
    assert counts["size"] == {"0": 16, "1": 15}
    assert counts["flags"] == {"[0]": 16, "[1]": 15}


def test_load_benchmark_api(tmp_path):
    root = write_slake(tmp_path / "slake")
    bench = medexp.load_benchmark("slake", root=root, split="test", cache_dir=tmp_path / "cache")
    frame = bench.frame()
    assert list(frame.columns)[:4] == ["example_id", "position", "question", "answer"]
    assert {"answer_type", "content_type", "modality", "location", "base_type", "img_name"} <= set(frame.columns)
    assert frame["example_id"].tolist() == [f"slake::test::{qid}" for qid in (11934, 12035, 12001, 11950, 11800)]
    assert frame["position"].tolist() == [0, 1, 2, 3, 4]
    assert frame["answer_type"].tolist() == ["OPEN", "CLOSED", "OPEN", "CLOSED", "OPEN"]
    capped = medexp.load_benchmark("slake", root=str(root), max_examples=2, cache_dir=tmp_path / "cache")
    assert capped.examples == bench.examples[:2]


def test_load_benchmark_rejects_bad_overrides(tmp_path):
    with pytest.raises(ValueError, match="unknown bench field 'rooot'"):
        medexp.load_benchmark("slake", rooot="/x")
    with pytest.raises(ValidationError, match="max_examples"):
        medexp.load_benchmark("slake", max_examples="many")


def test_import_medexp_stays_light():
    probe = (
        "import sys, medexp, medexp.inspect; assert callable(medexp.load_benchmark);"
        "heavy = [m for m in ('torch', 'transformers', 'mlflow', 'open_clip', 'faiss', 'pandas', 'pyarrow',"
        " 'numpy', 'PIL', 'huggingface_hub', 'datasets') if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name,fmt,hub_id", [
    ("slake", "slake", "BoKelvin/SLAKE"),
    ("pathvqa", "hf_parquet", "flaviagiammarino/path-vqa"),
    ("vqa_rad", "vqa_rad", "flaviagiammarino/vqa-rad"),
    ("omnimedvqa", "omnimedvqa", "foreverbeliever/OmniMedVQA"),
])
def test_cli_composes_each_benchmark(name, fmt, hub_id):
    result = run_medexp(f"bench={name}", "--cfg", "job", timeout=300)
    assert result.returncode == 0, result.stderr
    bench = yaml.safe_load(result.stdout)["bench"]
    assert (bench["name"], bench["format"], bench["hub_id"]) == (name, fmt, hub_id)
    assert bench["expected_examples"] == {"slake": 1061, "pathvqa": 6719, "vqa_rad": 451, "omnimedvqa": 4999}[name]
