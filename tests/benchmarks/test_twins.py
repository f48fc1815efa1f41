"""Pairing a benchmark with its perturbed twin: by shared index (TSV) or a source-id meta field
(local), and the errors a broken pairing gives (a twin without its original, two twins for one
original, a pair whose answer did not change, a required twin missing)."""

from __future__ import annotations

import json

import pytest

from medexp.benchmarks import load_benchmark
from medexp.benchmarks.twins import NO_TWIN, TWIN_SKIPPED, load_twin, pair_twins
from medexp.config import compose
from tests.benchmarks.upstream import base64_image, corrupt_bytes, write_vlmevalkit_tsv


def _twin(fields: dict):
    from omegaconf import OmegaConf

    from medexp.config.schemas import TwinConfig

    return OmegaConf.merge(OmegaConf.structured(TwinConfig), fields)


def _tsv_row(index: int, answer: str, seed: int) -> dict:
    return {"index": index, "question": f"Question {index}?", "A": "left", "B": "right", "C": "both",
            "answer": answer, "category": "side", "image": base64_image(seed)}


@pytest.fixture()
def mmstar(tmp_path):
    """Originals 0..5 and twins of 0..4 (5 was dropped by the manual check); every answer changes."""
    root = tmp_path / "data"
    write_vlmevalkit_tsv(root / "MMStar.tsv", [_tsv_row(i, "A", i) for i in range(6)])
    twins = [_tsv_row(i, "B", 100 + i) for i in range(5)]

    def bench(twin_rows=twins, max_skipped_share=0.01, **twin_fields):
        write_vlmevalkit_tsv(root / "MMStar_pert_local.tsv", twin_rows)  # the published twin file's name
        cfg = compose(["bench=mmstar_tsv", f"bench.root={root}", f"paths.cache_dir={tmp_path / 'cache'}",
                       f"bench.max_skipped_share={max_skipped_share}",
                       *(f"bench.twin.{key}={value}" for key, value in twin_fields.items())])
        originals = load_benchmark("mmstar_tsv", cache_dir=tmp_path / "cache", root=root)
        return pair_twins(originals.examples, originals.skipped, load_twin(cfg.bench, tmp_path / "cache"),
                          cfg.bench.twin, bench_name="mmstar_tsv")

    bench.twins = twins
    return bench


def test_pairs_by_index_and_counts_originals_without_a_twin(mmstar):
    pairing = mmstar()
    assert [(o.example_id, t.example_id) for o, t in pairing.pairs] == [
        (f"mmstar_tsv::test::{i}", f"mmstar_tsv_twin::test::{i}") for i in range(5)]
    original, twin = pairing.pairs[0]
    assert (original.answer, twin.answer) == ("left", "right") and original.image != twin.image
    assert pairing.unpaired == [("mmstar_tsv::test::5", f"{NO_TWIN}: no twin names it")]
    assert pairing.unpaired_counts() == {NO_TWIN: 1}


def test_a_required_twin_that_is_missing_is_an_error(mmstar):
    with pytest.raises(ValueError, match=r"1 original\(s\) have no twin, but twin.require_every_original is set: "
                                         r"mmstar_tsv::test::5"):
        mmstar(require_every_original=True)


def test_a_twin_whose_original_does_not_exist_is_an_error(mmstar):
    with pytest.raises(ValueError, match=r"1 twin\(s\) name an original the benchmark does not have .*"
                                         r"mmstar_tsv_twin::test::42 -> 42"):
        mmstar([*mmstar.twins, _tsv_row(42, "B", 7)])


def test_a_pair_whose_answer_did_not_change_is_an_error_naming_both(mmstar):
    rows = [dict(row) for row in mmstar.twins]
    rows[2]["answer"] = "A"
    with pytest.raises(ValueError, match=r"1 pair\(s\) have the same answer, but twin.answers_must_differ .*"
                                         r"mmstar_tsv::test::2 / mmstar_tsv_twin::test::2 \('left'\)"):
        mmstar(rows)
    assert len(mmstar(rows, answers_must_differ=False).pairs) == 5


def test_a_twin_with_a_broken_image_leaves_its_original_unpaired_and_counted(mmstar):
    import base64

    rows = [dict(row) for row in mmstar.twins]
    rows[1]["image"] = base64.b64encode(corrupt_bytes()).decode()
    pairing = mmstar(rows, max_skipped_share=0.5)  # one twin of five: above the default 1%
    assert len(pairing.pairs) == 4
    assert pairing.unpaired_counts() == {TWIN_SKIPPED: 1, NO_TWIN: 1}


def test_pairs_by_a_source_id_field_in_another_bench_config(tmp_path):
    """A local benchmark whose twins live in another split and name their original in meta."""
    root = tmp_path / "bench"
    root.mkdir()
    rows = [{"id": f"q{i}", "question": "Which side?", "answer": "left", "options": ["left", "right"]} for i in range(3)]
    twins = [{"id": f"t{i}", "question": "Which side?", "answer": "right", "options": ["left", "right"],
              "perturbed_from": f"q{i}"} for i in range(3)]
    (root / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (root / "test_perturbed.jsonl").write_text("".join(json.dumps(row) + "\n" for row in twins))
    cfg = compose(["bench=local", f"bench.root={root}"])
    # (OmegaConf cannot fill an unset structured section from the command line: a twin is declared in YAML)
    cfg.bench.twin = _twin({"split": "test_perturbed", "pair_by": "source_id_field", "source_id_field": "perturbed_from"})
    originals = load_benchmark("local", cache_dir=tmp_path, root=root)
    pairing = pair_twins(originals.examples, [], load_twin(cfg.bench, tmp_path), cfg.bench.twin)
    assert [(o.example_id, t.example_id) for o, t in pairing.pairs] == [
        (f"local::test::q{i}", f"local_twin::test_perturbed::t{i}") for i in range(3)]


@pytest.mark.parametrize("twin,message", [
    ({"answers_must_differ": True}, "say where the twins are"),
    ({"split": "x", "pair_by": "source_id_field"}, "pair_by=source_id_field needs .*source_id_field"),
    ({"split": "x", "source_id_field": "src"}, "source_id_field is read only with"),
])
def test_twin_sections_that_cannot_pair_are_refused(tmp_path, twin, message):
    from medexp.benchmarks import check_bench_config

    cfg = compose(["bench=local", f"bench.root={tmp_path}"])
    cfg.bench.twin = _twin(twin)
    with pytest.raises(Exception, match=message):
        check_bench_config(cfg.bench)
