"""blind_image drops images (and gets its own score-cache entry); negative image sets load with the bench loaders."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from medexp.config.schemas import BenchConfig
from medexp.controls import apply_control, control_benchmark
from medexp.controls.images import without_images
from medexp.scoring import example_scores
from tests.controls.helpers import FakeScorer, examples, fake_context

IDS = ["bench::0", "bench::1", "bench::2"]
ROWS = {example_id: (2, [0.0, 1.0]) for example_id in IDS}


def test_without_images_keeps_everything_but_the_image():
    released = examples(IDS)
    blind = without_images(released)
    assert [ex.image for ex in blind] == [None, None, None]
    assert [(ex.example_id, ex.position, ex.question, ex.answer) for ex in blind] == [
        (ex.example_id, ex.position, ex.question, ex.answer) for ex in released]
    assert all(ex.image is not None for ex in released)  # the benchmark's examples are untouched


def test_blind_scores_are_cached_apart_from_the_imaged_ones(tmp_path):
    scorer = FakeScorer(ROWS)
    released = examples(IDS)
    ctx = fake_context({"name": "blind_image", "kind": "blind_image"}, released, scorer, tmp_path)
    blind = apply_control(ctx.cfg.control, ctx.examples)
    imaged_table = example_scores(ctx.scorer, ctx.model_key, released, tmp_path)
    blind_table = example_scores(ctx.scorer, ctx.model_key, blind, tmp_path)
    # The scorer saw images the first time and none the second: -1 per token, -5 more with an image.
    assert [ex.image is None for ex in scorer.calls[1]] == [True] * 3
    assert imaged_table["sum_logprob"].tolist() == [-7.0] * 3
    assert blind_table["sum_logprob"].tolist() == [-2.0] * 3
    entries = sorted(path for path in (tmp_path / "scores").iterdir() if path.is_dir())
    assert len(entries) == 2  # one cache entry each
    # Reading again computes nothing: each table comes from its own entry.
    assert example_scores(ctx.scorer, ctx.model_key, blind, tmp_path)["sum_logprob"].tolist() == [-2.0] * 3
    assert len(scorer.calls) == 2


@pytest.mark.parametrize(("control", "imaged"), [("none", True), ("order_hash", True), ("blind_image", False)])
def test_nonmembers_lose_their_images_as_the_members_do(tmp_path, control, imaged):
    """membership, dataset_inference and codec compare the cell's split with another split: under
    blind_image both sides are scored without images, and orders leave the non-members as released."""
    from PIL import Image

    from medexp.evaluators.context import CellContext

    for split, ids in (("test", ["t0", "t1"]), ("heldout", ["h0", "h1", "h2"])):
        rows = []
        for example_id in ids:
            Image.new("RGB", (8, 8), (len(rows) * 60, 10, 10)).save(tmp_path / f"{example_id}.png")
            rows.append(f'{{"id": "{example_id}", "image": "{example_id}.png", "question": "q", "answer": "a"}}')
        (tmp_path / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    cfg = OmegaConf.create({"bench": _bench("local", tmp_path), "control": {"name": control, "kind": control}})
    ctx = CellContext(cfg=cfg, seed=0, benchmark=None, examples=[], cache_dir=tmp_path / "cache")
    nonmembers = ctx.nonmember_examples("heldout")
    assert [ex.example_id.split("::")[-1] for ex in nonmembers] == ["h0", "h1", "h2"]
    assert [ex.image is not None for ex in nonmembers] == [imaged] * 3


def _bench(name, root):
    """A ``format: local`` bench config as the bench schema composes it."""
    return OmegaConf.structured(BenchConfig(name=name, root=str(root)))


def test_control_benchmark_loads_the_negative_image_set_instead_of_the_bench(tmp_path):
    """The cell's bench is not even read: here it points at a folder that does not exist."""
    images_dir = tmp_path / "ood"
    images_dir.mkdir()
    from PIL import Image

    rows = []
    for index in range(3):
        Image.new("RGB", (8, 8), (index * 60, 10, 10)).save(images_dir / f"{index}.png")
        rows.append(f'{{"id": "p{index}", "image": "{index}.png", "question": "", "answer": "style"}}')
    (images_dir / "test.jsonl").write_text("\n".join(rows) + "\n")
    cfg = OmegaConf.create({
        "bench": _bench("missing", tmp_path / "nowhere"),
        "control": {"name": "negative_paintings", "kind": "negative_images", "images": _bench("paintings", images_dir)},
    })
    benchmark = control_benchmark(cfg, tmp_path)
    assert benchmark.name == "paintings"
    assert [ex.image.name for ex in benchmark.examples] == ["0.png", "1.png", "2.png"]


def test_a_negative_image_set_without_images_is_an_error(tmp_path):
    (tmp_path / "test.jsonl").write_text('{"id": "t0", "question": "q", "answer": "a"}\n')
    cfg = OmegaConf.create({"control": {"name": "negative_text", "kind": "negative_images",
                                        "images": _bench("text_only", tmp_path)}})
    with pytest.raises(ValueError, match="control=negative_text: the image set 'text_only' has no images"):
        control_benchmark(cfg, tmp_path)
