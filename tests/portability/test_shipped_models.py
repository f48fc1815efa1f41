"""The shipped demo models: listed digests, installed without training, refused when damaged.

The README's figures rest on these weights on every CPU (a pinned build differs between Intel and
AMD, docs/portability.md), so a change of the demo recipe that orphans them, a damaged copy, or a
stale locally trained cache entry must each be caught here rather than print other digits.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from medexp.config import compose
from medexp.demo import models as demo_models
from medexp.demo import rebuild, shipped
from medexp.kernel.hashing import stable_hash

REPO = Path(__file__).resolve().parents[2]


def _settings(name: str) -> dict:
    """The demo settings that name a shipped model (a reference's are its candidate's), less the
    later recipe additions at the value the earlier models were built with."""
    from omegaconf import OmegaConf

    from medexp.config.schemas.model import demo_identity

    reference = shipped.shipped_reference(name)
    return demo_identity(OmegaConf.to_container(compose([f"model={reference[0] if reference else name}"]).model.demo))


def _entry(name: str) -> str:
    """The cache entry the configs give a shipped name today."""
    reference = shipped.shipped_reference(name)
    if reference is None:
        return f"model-{stable_hash([demo_models.BUILDER_VERSION, _settings(name)])}"
    built = {"index": reference[1], "splits": list(shipped.REFERENCE_SPLITS)}
    return f"reference-{stable_hash([demo_models.BUILDER_VERSION, _settings(name), built])}"


def test_every_shipped_model_is_listed_under_its_configs_cache_entry():
    """A changed demo setting or builder version gives another cache entry: the shipped files would
    silently stop being used and every figure would be retrained on the user's CPU."""
    listed = shipped.shipped_digests()["models"]
    assert {listing["model"] for listing in listed.values()} == set(shipped.SHIPPED_NAMES)
    for name in shipped.SHIPPED_NAMES:
        assert listed[_entry(name)]["model"] == name
    assert sorted(path.name for path in shipped.SHIPPED_ROOT.iterdir() if path.is_dir()) == sorted(listed)
    for listing in listed.values():  # each entry names the CPU that trained it (they differ between entries)
        assert {"cpu", "vendor", "family", "model", "isa", "torch", "kernels"} <= set(listing["trained_on"])


def test_the_shipped_references_are_the_membership_cells():
    """The shipped references are those detector=membership_references reads on the demo and
    medexp.train references=8 builds: the same count and the same splits."""
    from omegaconf import OmegaConf

    from medexp.config import conf_dir

    cell = compose(["model=demo_leaky", "detector=membership_references"])
    assert shipped.SHIPPED_REFERENCES == {"demo_leaky": int(cell.detector.trained_references)}
    assert shipped.REFERENCE_SPLITS == (str(cell.bench.split), str(cell.detector.nonmember_split))
    assert tuple(OmegaConf.load(conf_dir() / "train" / "train.yaml").reference_splits) == shipped.REFERENCE_SPLITS


def test_the_shipped_references_leaked_from_the_candidates_shipped_clean_base():
    """One recipe for the candidate and its references: each reference (and each shipped leak that
    lists its base) started from the shipped clean model of the candidate's settings."""
    listed = shipped.shipped_digests()["models"]
    with_base = {listing["model"]: listing["base_weights_sha256"] for listing in listed.values()
                 if "base_weights_sha256" in listing}
    references = set(shipped.SHIPPED_NAMES) - set(shipped.SHIPPED_MODELS)
    assert references <= set(with_base)
    for name, base in with_base.items():
        clean = {**_settings(name), "leak_epochs": 0}
        assert base == listed[f"model-{stable_hash([demo_models.BUILDER_VERSION, clean])}"]["files"]["model.safetensors"], name


def test_shipped_files_are_the_listed_bytes():
    for entry, listing in shipped.shipped_digests()["models"].items():
        directory = shipped.SHIPPED_ROOT / entry
        on_disk = {path.name for path in directory.iterdir()} - {"medexp_demo.json"}
        assert on_disk == set(listing["files"]), entry
        for name, digest in listing["files"].items():
            assert shipped.file_sha256(directory / name) == digest, f"{entry}/{name}"
        record = json.loads((directory / "medexp_demo.json").read_text())
        assert record["settings"] == _settings(listing["model"])


def test_docs_name_the_shipped_weights():
    """docs/portability.md lists the quick-start and answering models' weights digests: the text a user checks."""
    text = (REPO / "docs" / "portability.md").read_text()
    for name in ("demo_clean", "demo_leaky", "demo_clean_mc", "demo_leaky_mc"):
        digest = shipped.shipped_entry(_entry(name))["files"]["model.safetensors"]
        assert f"`{digest[:16]}" in text, name


@pytest.fixture()
def no_training(monkeypatch):
    """Fail the test if anything trains: an install must only copy."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("a shipped model was trained instead of installed")

    monkeypatch.setattr("medexp.kernel.portable.run_pinned", refuse)


def test_install_copies_verified_weights_without_training(tmp_path, no_training):
    directory = demo_models.demo_model_dir(compose(["model=demo_leaky"]).model.demo, tmp_path)
    listing = shipped.shipped_entry(directory.name)
    assert directory.name == _entry("demo_leaky")
    for name, digest in listing["files"].items():
        assert shipped.file_sha256(directory / name) == digest
    record = demo_models.read_build_report(directory)
    assert record["shipped"] == {"entry": directory.name, "weights_sha256": listing["files"]["model.safetensors"]}
    assert record["phase"] == "leak"
    # the leaky model needs no clean base when it ships: nothing else was installed or trained
    assert [path.name for path in (tmp_path / "demo").glob("model-*") if path.is_dir()] == [directory.name]


@pytest.mark.extended
def test_the_membership_references_install_without_training(tmp_path, no_training):
    """A membership_references cell on the demo (and medexp.train references=8) copies the shipped
    references, with the ids each trained on, instead of leaking on this CPU."""
    directories = [demo_models.demo_reference_dir(compose(["model=demo_leaky"]).model.demo, index,
                                                  shipped.REFERENCE_SPLITS, tmp_path)
                   for index in range(shipped.SHIPPED_REFERENCES["demo_leaky"])]
    halves = []
    for index, directory in enumerate(directories):
        assert directory.name == _entry(shipped.reference_name("demo_leaky", index))
        record = demo_models.read_build_report(directory)
        assert record["shipped"]["entry"] == directory.name and record["reference"]["index"] == index
        halves.append(set(record["leaked_example_ids"]))
    assert all(len(half) == 400 for half in halves)
    assert halves[0].isdisjoint(halves[1]) and halves[2].isdisjoint(halves[3])  # complementary pairs
    # nothing but the references: their clean base is neither installed nor trained
    assert not list((tmp_path / "demo").glob("model-*"))


def test_a_stale_local_build_is_replaced_by_the_shipped_weights(tmp_path, no_training):
    demo_cfg = compose(["model=demo_clean"]).model.demo
    directory = demo_models.demo_model_dir(demo_cfg, tmp_path)
    (directory / "model.safetensors").write_bytes(b"weights trained on another CPU")
    again = demo_models.demo_model_dir(demo_cfg, tmp_path)
    assert again == directory
    assert shipped.matches_shipped(again, shipped.shipped_entry(again.name))


@pytest.fixture()
def shipped_copy(tmp_path, monkeypatch):
    """A writable copy of the shipped models, used in place of the package's."""
    copy = tmp_path / "shipped"
    shutil.copytree(shipped.SHIPPED_ROOT, copy)
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", copy)
    monkeypatch.setattr(shipped, "DIGESTS_FILE", copy / "SHA256SUMS.json")
    return copy


def test_an_update_replaces_only_the_rebuilt_models(tmp_path, shipped_copy, demo_cache, monkeypatch):
    """``rebuild --update demo_clean`` on another CPU rewrites demo_clean's files and listing, with
    that CPU, and keeps every other shipped model and the CPU it was trained on."""
    monkeypatch.setattr(rebuild, "SHIPPED_ROOT", shipped_copy)
    monkeypatch.setattr(rebuild, "DIGESTS_FILE", shipped_copy / "SHA256SUMS.json")
    generate = rebuild.demo_benchmark_root
    monkeypatch.setattr(rebuild, "demo_benchmark_root", lambda bench, _cache: generate(bench, demo_cache))
    entry = _entry("demo_clean")
    built = tmp_path / "cache" / "demo" / entry
    shutil.copytree(shipped_copy / entry, built)
    (built / "model.safetensors").write_bytes(b"weights trained on another CPU")
    before = shipped.shipped_digests()["models"]
    rebuild._update({"demo_clean": built})
    after = shipped.shipped_digests()["models"]
    assert after[entry]["files"]["model.safetensors"] == shipped.file_sha256(built / "model.safetensors")
    assert after[entry]["bench_sha256"] == before[entry]["bench_sha256"]
    assert after[entry]["trained_on"]["cpu"] == shipped.cpu_description()["cpu"]
    assert {key: value for key, value in after.items() if key != entry} == {
        key: value for key, value in before.items() if key != entry}
    assert sorted(path.name for path in shipped_copy.iterdir() if path.is_dir()) == sorted(after)
    assert (shipped_copy / entry / "model.safetensors").read_bytes() == b"weights trained on another CPU"


def test_a_damaged_shipped_file_is_refused_naming_both_digests(tmp_path, shipped_copy, no_training):
    entry = _entry("demo_clean")
    weights = shipped_copy / entry / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    listed = shipped.shipped_entry(entry)["files"]["model.safetensors"]
    with pytest.raises(shipped.ShippedModelMismatch, match=rf"{shipped.file_sha256(weights)}.*lists {listed}"):
        demo_models.demo_model_dir(compose(["model=demo_clean"]).model.demo, tmp_path / "cache")
    assert not (tmp_path / "cache" / "demo" / entry).exists()  # nothing that looks installed


def test_a_different_demo_benchmark_is_refused(tmp_path, shipped_copy, no_training):
    digests = json.loads((shipped_copy / "SHA256SUMS.json").read_text())
    entry = _entry("demo_clean")
    digests["models"][entry]["bench_sha256"] = "0" * 64
    (shipped_copy / "SHA256SUMS.json").write_text(json.dumps(digests))
    with pytest.raises(shipped.ShippedModelMismatch, match="demo benchmark generated here"):
        demo_models.demo_model_dir(compose(["model=demo_clean"]).model.demo, tmp_path / "cache")


def test_other_settings_still_train(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("medexp.kernel.portable.run_pinned", lambda target, **kwargs: calls.append(kwargs) or {"seconds": 0})
    cfg = compose(["model=demo_clean", "model.demo.seed=99"]).model.demo
    demo_models.demo_model_dir(cfg, tmp_path)
    assert len(calls) == 1 and calls[0]["settings"]["seed"] == 99


def test_the_rebuild_check_refuses_unknown_models(capsys):
    with pytest.raises(SystemExit) as exit_info:
        rebuild.main(["demo_vit"])
    assert exit_info.value.code == 2
    assert "not shipped: demo_vit" in capsys.readouterr().err
