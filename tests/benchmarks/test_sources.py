"""Where benchmark files come from (bench.root, the hub, offline errors) and config checks."""

from __future__ import annotations

import logging
import shlex
import shutil

import pytest
from omegaconf import OmegaConf

from medexp.benchmarks import check_bench_config, load_benchmark_from_config
from medexp.benchmarks.hub import BenchmarkUnavailable
from medexp.config import compose
from tests.benchmarks.upstream import image_cells, write_hf_parquet, write_slake

HUB_BENCHMARKS = ["slake", "pathvqa", "vqa_rad", "vqa_rad_train", "omnimedvqa", "wikiart", "tinyimagenet", "pmc_oa"]


@pytest.fixture
def no_network(monkeypatch):
    """Offline mode, and any attempt to reach the hub fails the test."""
    import huggingface_hub

    def forbidden(*args, **kwargs):
        raise AssertionError("the hub was contacted in offline mode")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", forbidden)
    monkeypatch.setattr(huggingface_hub, "HfFileSystem", forbidden)


@pytest.mark.parametrize("name", HUB_BENCHMARKS)
def test_offline_without_a_copy_says_what_to_download_and_where(name, tmp_path, no_network):
    bench = compose([f"bench={name}"]).bench
    with pytest.raises(BenchmarkUnavailable) as info:
        load_benchmark_from_config(bench, tmp_path / "cache")
    message = str(info.value)
    target = tmp_path / "cache" / "benchmarks" / "downloads" / name
    assert f"bench={name}" in message and bench.hub_id in message and "HF_HUB_OFFLINE" in message
    command = next(line.strip() for line in message.splitlines() if line.strip().startswith("hf download"))
    words = shlex.split(command)
    assert words[:5] == ["hf", "download", bench.hub_id, "--repo-type", "dataset"]
    assert words[-2:] == ["--local-dir", str(target)]
    assert "--include" in words
    assert message.rstrip().endswith(f"bench.root={target}")


class FakeHub:
    """snapshot_download over a local folder standing for a hub dataset repo."""

    def __init__(self, repo_dir, snapshot_dir):
        self.repo_dir, self.snapshot_dir, self.calls = repo_dir, snapshot_dir, []

    def __call__(self, repo_id, *, repo_type=None, revision=None, allow_patterns=None, **kwargs):
        from huggingface_hub.utils import filter_repo_objects

        self.calls.append({"repo_id": repo_id, "repo_type": repo_type, "revision": revision})
        files = [path.relative_to(self.repo_dir).as_posix() for path in self.repo_dir.rglob("*") if path.is_file()]
        for name in filter_repo_objects(files, allow_patterns=allow_patterns):  # the hub's own matching
            (self.snapshot_dir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.repo_dir / name, self.snapshot_dir / name)
        return str(self.snapshot_dir)

    def fetched(self):
        return sorted(path.relative_to(self.snapshot_dir).as_posix() for path in self.snapshot_dir.rglob("*") if path.is_file())


@pytest.fixture
def online(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def test_slake_from_the_hub_fetches_the_split_json_and_the_zip(tmp_path, monkeypatch, online):
    import huggingface_hub

    repo = write_slake(tmp_path / "repo", zipped=True)
    (repo / "train.json").write_text("[]")
    (repo / "KG.zip").write_bytes(b"unrelated")
    hub = FakeHub(repo, tmp_path / "snapshot")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", hub)
    bench = load_benchmark_from_config(compose(["bench=slake"]).bench, tmp_path / "cache")
    assert hub.calls == [{"repo_id": "BoKelvin/SLAKE", "repo_type": "dataset", "revision": None}]
    assert hub.fetched() == ["imgs.zip", "test.json"]
    assert len(bench) == 5 and all(ex.image.is_file() for ex in bench.examples)


def test_parquet_from_the_hub_fetches_only_the_split(tmp_path, monkeypatch, online):
    import huggingface_hub

    repo = tmp_path / "repo"
    for split in ("train", "test"):
        write_hf_parquet(repo / "data" / f"{split}-00000-of-00001.parquet",
                         {"image": image_cells([0, 1]), "question": ["q0", "q1"], "answer": ["a0", "a1"]})
    (repo / "README.md").write_text("card")
    hub = FakeHub(repo, tmp_path / "snapshot")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", hub)
    bench = load_benchmark_from_config(compose(["bench=vqa_rad", "bench.revision=v1"]).bench, tmp_path / "cache")
    assert hub.calls[0]["repo_id"] == "flaviagiammarino/vqa-rad" and hub.calls[0]["revision"] == "v1"
    assert hub.fetched() == ["data/test-00000-of-00001.parquet"]
    assert [ex.example_id for ex in bench.examples] == ["vqa_rad::test::0", "vqa_rad::test::1"]


def test_hub_failure_becomes_the_download_advice(tmp_path, monkeypatch, online):
    import huggingface_hub

    def unreachable(*args, **kwargs):
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    with pytest.raises(BenchmarkUnavailable, match="ConnectionError: Name or service not known") as info:
        load_benchmark_from_config(compose(["bench=pathvqa"]).bench, tmp_path / "cache")
    assert "hf download flaviagiammarino/path-vqa --repo-type dataset" in str(info.value)


def test_root_that_is_not_a_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        load_benchmark_from_config(compose(["bench=slake", f"bench.root={tmp_path / 'nope'}"]).bench, tmp_path / "cache")


def test_local_format_needs_a_root(tmp_path):
    with pytest.raises(ValueError, match="set bench.root=/path/to/local"):
        load_benchmark_from_config(compose(["bench=local"]).bench, tmp_path / "cache")


@pytest.mark.parametrize("overrides,message", [
    (["bench=pathvqa", "bench.languages=[en]"], "bench.languages is only read by format(s) ['slake'], not pathvqa"),
    (["bench=slake", "bench.subsample_n=5"], "bench.subsample_n is only read by format(s) ['image_set'], not slake"),
    (["bench=local", "bench.hub_id=x/y"], "bench.hub_id is only read by"),
    (["bench=pathvqa", "bench.format=hf_parquet", "bench.image_dir=imgs", "bench.dedup=null"],
     "bench.image_dir is only read by format(s) ['slake', 'pmc_oa', 'vqa_rad', 'vqa_rad_osf', 'pathvqa'], not hf_parquet"),
    (["bench=pathvqa", "bench.format=hf_parquet"], "bench.dedup is only read by format(s) ['pathvqa'], not hf_parquet"),
    (["bench=vqa_rad", "bench.format=vqa_rad_osf"], "bench.hub_id is only read by"),
    (["bench=slake", "bench.max_examples=0"], "bench.max_examples=0 is out of range: allowed >= 1"),
    (["bench=wikiart", "bench.subsample_n=-3"], "bench.subsample_n=-3 is out of range: allowed >= 1"),
    (["bench=wikiart", "bench.max_examples=10"], "set bench.subsample_n or bench.max_examples, not both"),
])
def test_settings_the_format_does_not_use_are_rejected(overrides, message):
    with pytest.raises(ValueError) as info:
        check_bench_config(compose(overrides).bench)
    assert message in str(info.value)


@pytest.mark.parametrize("name,fmt", [("slake", "slake"), ("pathvqa", "pathvqa"), ("vqa_rad", "vqa_rad"),
                                      ("vqa_rad_train", "vqa_rad"),
                                      ("omnimedvqa", "omnimedvqa"), ("wikiart", "image_set"),
                                      ("tinyimagenet", "image_set"), ("pmc_oa", "pmc_oa"), ("local", "local"), ("demo", "demo"),
                                      ("mmstar_tsv", "vlmevalkit_tsv"), ("realworldqa_tsv", "vlmevalkit_tsv"),
                                      ("medvigil", "medvigil")])
def test_shipped_configs_pass_the_checks(name, fmt):
    assert check_bench_config(compose([f"bench={name}"]).bench) == fmt


def test_expected_count_mismatch_is_logged(tmp_path, caplog):
    root = write_slake(tmp_path / "slake")
    bench_cfg = compose(["bench=slake", f"bench.root={root}"]).bench
    with caplog.at_level(logging.WARNING, logger="medexp.benchmarks"):
        bench = load_benchmark_from_config(bench_cfg, tmp_path / "cache")
    assert len(bench) == 5
    assert "5 examples, but the config expects 1061 for split test" in caplog.text
    caplog.clear()
    OmegaConf.update(bench_cfg, "expected_by_split.test", 5)
    with caplog.at_level(logging.WARNING, logger="medexp.benchmarks"):
        load_benchmark_from_config(bench_cfg, tmp_path / "cache")
    assert "expects" not in caplog.text
