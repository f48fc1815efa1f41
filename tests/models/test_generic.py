"""The generic adapter (any image-text-to-text checkpoint) and what every adapter shares:
architecture check, batching by a token budget, device maps, and load errors (gated repos)."""

from __future__ import annotations

import numpy as np
import pytest

from medexp.models.hf import HFScorer, batches
from tests.manual_scoring import assert_rows_close, chat_answer_scores, rows
from tests.models.conftest import make_scorer
from tests.models.tiny import LONG_TEXT

FAMILIES = ["qwen2_5_vl", "llava_onevision", "internvl", "gemma3"]


@pytest.mark.parametrize("family", FAMILIES)
def test_generic_adapter_loads_and_scores_every_family_checkpoint(tiny_checkpoint, tiny_examples, family):
    directory = tiny_checkpoint(family)
    generic = make_scorer(directory, "generic")
    dedicated = make_scorer(directory, family)
    assert type(generic) is HFScorer
    assert type(generic.model) is type(dedicated.model)  # AutoModelForImageTextToText resolves the class
    mixed = [*tiny_examples[0][:3], tiny_examples[1][0]]
    for a, b in zip(rows(generic.score_examples(mixed)), rows(dedicated.score_examples(mixed))):
        assert_rows_close(a, b, atol=0)
    _, logprobs, _ = chat_answer_scores(generic, mixed[2])
    np.testing.assert_allclose(rows(generic.score_examples([mixed[2]]))[0]["token_logprobs"], logprobs, atol=1e-5)


def test_family_refuses_a_checkpoint_of_another_architecture(tiny_checkpoint):
    with pytest.raises(ValueError, match=r"is a 'qwen2_5_vl' checkpoint, but family 'gemma3' loads \['gemma3'\]"):
        make_scorer(tiny_checkpoint("qwen2_5_vl"), "gemma3")


# ---------------------------------------------------------------------------- token budget


@pytest.mark.parametrize(
    "lengths,budget,expected",
    [
        ([3, 5, 2, 8, 1, 1, 1], 10, [[0, 1], [2], [3], [4, 5, 6]]),  # 2 x 5 fits, 3 x 5 does not
        ([4, 4, 4, 4], 16, [[0, 1, 2, 3]]),  # exactly the budget
        ([4, 4, 4, 4], 15, [[0, 1, 2], [3]]),
        ([2, 12, 1], 10, [[0], [1], [2]]),  # longer than the budget: alone
        ([1, 1, 9], 9, [[0, 1], [2]]),  # a long row widens the batch: 3 x 9 > 9
        ([], 10, []),
    ],
)
def test_token_budget_batches_by_hand(lengths, budget, expected, caplog):
    made = list(batches(range(len(lengths)), 1, budget, lengths.__getitem__, "m"))
    assert [batch for batch, _ in made] == expected
    # each batch comes with the item that starts the next one: what a streaming caller keeps
    assert [following for _, following in made] == [batch[0] for batch in expected[1:]] + [None] * bool(expected)
    oversized = sum(length > budget for length in lengths)
    assert (f"model=m: {oversized} inputs are longer than token_budget={budget}" in caplog.text) == bool(oversized)


def test_batches_without_a_budget_are_batch_size_rows_and_read_no_length():
    def length(item):
        raise AssertionError("a length was computed without a token budget")

    made = list(batches(iter(range(7)), 3, None, length, "m"))
    assert made == [([0, 1, 2], 3), ([3, 4, 5], 6), ([6], None)]


@pytest.mark.parametrize("family", ["qwen2_5_vl", "llava_onevision"])
def test_token_budget_gives_identical_scores_within_the_budget(tiny_checkpoint, tiny_examples, monkeypatch, family):
    directory = tiny_checkpoint(family)
    examples = [tiny_examples[1][0], *tiny_examples[0], tiny_examples[1][1], tiny_examples[1][2]]
    reference = rows(make_scorer(directory, family, batch_size=1).score_examples(examples))
    probe = make_scorer(directory, family)
    lengths = [probe._input_length(probe._prepare(ex)) for ex in examples]
    budget = 2 * max(lengths) + 1  # room for two rows of the longest input, more of short ones
    scorer = make_scorer(directory, family, batch_size=1, token_budget=budget)
    shapes = []
    original = scorer.answer_logits
    monkeypatch.setattr(scorer, "answer_logits", lambda inputs, mask: shapes.append(inputs["input_ids"].shape)
                        or original(inputs, mask))
    budgeted = rows(scorer.score_examples(examples))
    assert [r["example_id"] for r in budgeted] == [ex.example_id for ex in examples]
    for a, b in zip(budgeted, reference):
        assert_rows_close(a, b)
    assert all(n_rows * width <= budget for n_rows, width in shapes)
    assert max(n_rows for n_rows, _ in shapes) > 1  # batch_size=1 is ignored: the budget decides
    assert sum(n_rows for n_rows, _ in shapes) == len(examples)


def test_token_budget_batches_text_windows(tiny_checkpoint, monkeypatch):
    directory = tiny_checkpoint("qwen2_5_vl")
    texts = [LONG_TEXT, "Answer: no\n", LONG_TEXT[:90], "x"]
    reference = make_scorer(directory, "qwen2_5_vl").score_texts(texts, context_length=24, stride=8, batch_size=1)
    scorer = make_scorer(directory, "qwen2_5_vl", token_budget=60)
    shapes = []
    original = scorer.text_logits
    monkeypatch.setattr(scorer, "text_logits", lambda ids, mask: shapes.append(ids.shape) or original(ids, mask))
    budgeted = scorer.score_texts(texts, context_length=24, stride=8, batch_size=1)
    np.testing.assert_allclose(budgeted, reference, rtol=0, atol=1e-4)
    assert all(n_rows * width <= 60 for n_rows, width in shapes)
    assert max(n_rows for n_rows, _ in shapes) == 2  # 2 x 24-token windows fit, 3 do not


@pytest.mark.parametrize("setting,message", [({"token_budget": 0}, "token_budget must be a positive"),
                                             ({"batch_size": 0}, "batch_size must be >= 1")])
def test_bad_batching_settings_fail_before_loading(setting, message):
    # The location does not exist: the settings are checked first.
    with pytest.raises(ValueError, match=message):
        make_scorer("/nonexistent/checkpoint", "qwen2_5_vl", **setting)


# ---------------------------------------------------------------------------- devices


def test_device_map_loads_through_from_pretrained_and_scores_the_same(tiny_checkpoint, tiny_examples, monkeypatch):
    import transformers

    directory = tiny_checkpoint("internvl")
    plain = make_scorer(directory, "internvl")
    assert plain.device == "cpu"
    model_class = transformers.InternVLForConditionalGeneration
    original, calls = model_class.from_pretrained, []
    monkeypatch.setattr(model_class, "from_pretrained", lambda *a, **k: calls.append(k) or original(*a, **k))
    mapped = make_scorer(directory, "internvl", device_map="cpu")
    assert calls[0]["device_map"] == "cpu"
    assert str(mapped.device) == "cpu"  # where the input embeddings were placed
    examples = tiny_examples[0][:2]
    for a, b in zip(rows(mapped.score_examples(examples)), rows(plain.score_examples(examples))):
        assert_rows_close(a, b, atol=0)


def test_bfloat16_weights_score_close_to_float32(tiny_checkpoint, tiny_examples):
    directory = tiny_checkpoint("gemma3")
    half = make_scorer(directory, "gemma3", dtype="bfloat16")
    full = make_scorer(directory, "gemma3")
    assert next(half.model.parameters()).dtype.is_floating_point and str(next(half.model.parameters()).dtype) == \
        "torch.bfloat16"
    examples = tiny_examples[0][:2]
    a, b = rows(half.score_examples(examples)), rows(full.score_examples(examples))
    for x, y in zip(a, b):
        # bf16 keeps ~3 significant digits: close, not equal, and scored in float64 afterwards.
        np.testing.assert_allclose(x["token_logprobs"], y["token_logprobs"], rtol=0.1, atol=0.5)
        assert x["token_logprobs"] != y["token_logprobs"]


# ---------------------------------------------------------------------------- load errors


def _gated_error():
    import httpx2
    from huggingface_hub.errors import GatedRepoError

    url = "https://huggingface.co/google/medgemma-4b-it/resolve/main/config.json"
    return GatedRepoError("Access to model google/medgemma-4b-it is restricted.",
                          response=httpx2.Response(403, request=httpx2.Request("GET", url)))


def _http_error(status: int):
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    url = "https://huggingface.co/google/medgemma-4b-it/resolve/main/config.json"
    return HfHubHTTPError(f"{status} Client Error", response=httpx2.Response(status, request=httpx2.Request("GET", url)))


def _hub_refuses(monkeypatch, error) -> None:
    """Every hub download raises ``error``, as huggingface_hub does; transformers handles it as for real."""
    from transformers.utils import hub

    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(hub, "hf_hub_download", refuse)
    monkeypatch.setattr(hub, "snapshot_download", refuse)


@pytest.mark.parametrize("make_error", [_gated_error, lambda: _http_error(401), lambda: _http_error(403)])
def test_gated_medgemma_explains_how_to_get_access(monkeypatch, tmp_path, make_error):
    from medexp.config import compose
    from medexp.models import load_scorer

    _hub_refuses(monkeypatch, make_error())
    with pytest.raises(OSError) as caught:
        load_scorer(compose(["model=medgemma"]).model, tmp_path)
    message = str(caught.value)
    assert message.startswith("model=medgemma: 'google/medgemma-4b-it' is a gated or private repository")
    for advice in ("accept the licence on https://huggingface.co/google/medgemma-4b-it", "huggingface-cli login",
                   "HF_TOKEN", "model.pretrained=/local/dir"):
        assert advice in message


@pytest.mark.parametrize("make_error", [lambda: _http_error(500), lambda: OSError("disk full")])
def test_other_load_failures_are_not_called_gated(monkeypatch, make_error):
    _hub_refuses(monkeypatch, make_error())
    with pytest.raises(OSError) as caught:
        make_scorer("org/missing-model", "gemma3")
    message = str(caught.value)
    assert "gated" not in message
    assert message.startswith("model=tiny_gemma3: cannot load 'org/missing-model'")
    assert "model.pretrained=/local/dir" in message
