"""Tiny random-weight Q-Former checkpoints (BLIP-2, InstructBLIP, a CheXagent stand-in) and the
checks the three family test files share.

Every checkpoint is an instance of the real transformers class with a tokenizer trained here
(``tokenizers`` BPE / WordPiece), saved with ``save_pretrained`` and loaded back by the adapter
through ``from_pretrained``, exactly like a hub checkpoint.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from medexp.benchmarks.base import Example
from medexp.config import compose
from medexp.config.schemas import ModelConfig
from tests import scan_examples
from tests.manual_scoring import ATOL, answer_scores, assert_rows_close, open_rgb, rows, text_logprob
from tests.models.tiny import published_settings

IMAGE_SIZE = 16
PATCH_SIZE = 8
NUM_QUERY_TOKENS = 4
IMAGE_TOKEN = "<image>"

# The first five scans and two text-only questions: the tokenizers below are trained on them.
QA = scan_examples.QA[:5]
TEXT_ONLY = scan_examples.TEXT_ONLY[:2]
LONG_TEXT = "".join(f"Question: {q}\nAnswer: {a}\n" for q, a, _ in QA)
CORPUS = [text for q, a, _ in QA for text in (q, a, f"Question: {q} Answer: {a}")] + [
    text for q, a in TEXT_ONLY for text in (q, a, f"Question: {q} Answer: {a}")
]


def write_examples(root: Path) -> tuple[list[Example], list[Example]]:
    """(image examples, text-only examples) with scans written under ``root``."""
    return scan_examples.write_examples(root, QA, TEXT_ONLY)


# ---------------------------------------------------------------------------- tokenizers


def bpe_tokenizer(special: list[str], bos: str, vocab_size: int = 420, padding_side: str = "right", **named):
    """Byte-level BPE trained on the test corpus, prepending ``bos`` like the OPT and Llama
    tokenizers; ``named`` maps tokenizer attributes (pad_token, eos_token, ...) to specials.
    The image token is left out: the BLIP processors add ``<image>`` themselves, as they do to
    the hub tokenizers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(CORPUS, trainer)
    bpe.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, bpe.token_to_id(bos))]
    )
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=bos, padding_side=padding_side, **named)


def wordpiece_tokenizer(padding_side: str = "right"):
    """A lower-casing WordPiece tokenizer with [CLS] ... [SEP], standing in for the BERT tokenizer
    of the InstructBLIP Q-Former."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=200, special_tokens=special,
                                                                    show_progress=False))
    wordpiece.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=wordpiece, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]", padding_side=padding_side)


def opt_tokenizer(padding_side: str = "right"):
    """OPT convention: ``</s>`` is both BOS and EOS, ``<pad>`` pads."""
    return bpe_tokenizer(["<pad>", "</s>", "<unk>"], "</s>", padding_side=padding_side,
                         eos_token="</s>", pad_token="<pad>", unk_token="<unk>")


def vicuna_tokenizer(padding_side: str = "right"):
    """Llama convention: ``<s>`` BOS, ``</s>`` EOS, plus a pad token."""
    return bpe_tokenizer(["<unk>", "<s>", "</s>", "<pad>"], "<s>", padding_side=padding_side,
                         eos_token="</s>", pad_token="<pad>", unk_token="<unk>")


# ---------------------------------------------------------------------------- configs


def _vision_and_qformer(vision_cls, qformer_cls, image_size: int = IMAGE_SIZE, **qformer_extra):
    # 16 x 16 patches for a published image size: how many query tokens reach the language model
    # does not depend on the patch grid, and a small grid keeps the tower cheap on a CPU.
    patch_size = PATCH_SIZE if image_size == IMAGE_SIZE else image_size // 16
    vision = vision_cls(image_size=image_size, patch_size=patch_size, hidden_size=32, intermediate_size=64,
                        num_hidden_layers=1, num_attention_heads=2)
    qformer = qformer_cls(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                          encoder_hidden_size=32, **qformer_extra)
    return vision, qformer


def _special_ids(tokenizer) -> dict[str, int]:
    return {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}


def blip2_config(tokenizer, language_model: str = "opt", image_size: int = IMAGE_SIZE,
                 num_query_tokens: int = NUM_QUERY_TOKENS):
    """BLIP-2 over a tiny OPT (blip2-opt-2.7b) or Mistral (the CheXagent stand-in) decoder."""
    from transformers import Blip2Config, Blip2QFormerConfig, Blip2VisionConfig, MistralConfig, OPTConfig

    vision, qformer = _vision_and_qformer(Blip2VisionConfig, Blip2QFormerConfig, image_size)
    if language_model == "opt":
        text = OPTConfig(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=2,
                         word_embed_proj_dim=32, max_position_embeddings=512, **_special_ids(tokenizer))
    else:
        text = MistralConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=2, max_position_embeddings=512, sliding_window=None,
                             **_special_ids(tokenizer))
    return Blip2Config(vision_config=vision.to_dict(), qformer_config=qformer.to_dict(), text_config=text.to_dict(),
                       num_query_tokens=num_query_tokens, image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN))


def instructblip_config(tokenizer, qformer_tokenizer, image_size: int = IMAGE_SIZE,
                        num_query_tokens: int = NUM_QUERY_TOKENS):
    from transformers import InstructBlipConfig, InstructBlipQFormerConfig, InstructBlipVisionConfig, LlamaConfig

    vision, qformer = _vision_and_qformer(InstructBlipVisionConfig, InstructBlipQFormerConfig, image_size,
                                          vocab_size=len(qformer_tokenizer),
                                          pad_token_id=qformer_tokenizer.pad_token_id)
    text = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                       num_key_value_heads=2, max_position_embeddings=512, **_special_ids(tokenizer))
    return InstructBlipConfig(vision_config=vision.to_dict(), qformer_config=qformer.to_dict(),
                              text_config=text.to_dict(), num_query_tokens=num_query_tokens,
                              image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN))


def image_processor(published: dict | None = None):
    """BLIP's image processor: tiny, or with a published ``preprocessor_config``'s size, mean and
    std (BlipImageProcessor for BLIP-2 and CheXagent alike)."""
    from transformers import BlipImageProcessor

    if published is None:
        return BlipImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
                                  image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    return BlipImageProcessor(**{key: published[key] for key in ("size", "image_mean", "image_std", "resample")})


def published_queries(family: str) -> tuple[dict | None, int]:
    """(published preprocessor_config or None, number of query tokens) of a Q-Former family: the
    processor's for BLIP-2 and InstructBLIP, the model config's for CheXagent (its processor is
    remote code that was not found)."""
    settings = published_settings(family)
    queries = settings.get("processor_config", settings.get("config", {}))["num_query_tokens"]
    return settings.get("preprocessor_config"), queries


def sharpen(model) -> None:
    """Default init (std 0.02) gives near-uniform predictions in which context, padding or
    position mistakes would hide below the tolerance; larger weights make them visible."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() >= 2 or name.endswith("query_tokens"):
                parameter.normal_(0.0, 0.3)


def _save(model, processor, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir


# ---------------------------------------------------------------------------- checkpoints


def build_blip2(out_dir: Path, padding_side: str = "right", num_query_tokens: int | None = NUM_QUERY_TOKENS,
                language_model: str = "opt", seed: int = 0, published: str | None = None) -> Path:
    """A tiny ``Blip2ForConditionalGeneration`` and its ``Blip2Processor``.

    ``language_model`` is "opt" (OPT tokenizer conventions, as blip2-opt-2.7b) or "mistral"
    (Llama conventions with ``<s>``, as CheXagent). ``num_query_tokens=None`` writes a processor
    that does not expand image tokens itself (as processors saved before transformers did).
    ``published`` ("blip2" or "chexagent") takes the image size and the number of query tokens
    from that family's published settings (medexp/models/published)."""
    from transformers import Blip2ForConditionalGeneration, Blip2Processor

    torch.manual_seed(seed)
    tokenizer = opt_tokenizer(padding_side) if language_model == "opt" else vicuna_tokenizer(padding_side)
    preprocessor, queries = None, NUM_QUERY_TOKENS if num_query_tokens is None else num_query_tokens
    if published is not None:
        preprocessor, queries = published_queries(published)
    processor = Blip2Processor(image_processor(preprocessor), tokenizer,
                               num_query_tokens=None if num_query_tokens is None else queries)
    size = IMAGE_SIZE if preprocessor is None else preprocessor["size"]["height"]
    model = Blip2ForConditionalGeneration(blip2_config(processor.tokenizer, language_model, size, queries))
    sharpen(model)
    return _save(model, processor, out_dir)


def build_instructblip(out_dir: Path, padding_side: str = "right", qformer_padding_side: str = "right",
                       seed: int = 0, published: bool = False) -> Path:
    """A tiny ``InstructBlipForConditionalGeneration`` (Llama language model, WordPiece Q-Former
    tokenizer) and its ``InstructBlipProcessor``; ``published``: instructblip-vicuna-7b's number
    of query tokens, at BLIP-2's published 224 px (InstructBLIP's own image size was not found)."""
    from transformers import InstructBlipForConditionalGeneration, InstructBlipProcessor

    torch.manual_seed(seed)
    tokenizer = vicuna_tokenizer(padding_side)
    qformer_tokenizer = wordpiece_tokenizer(qformer_padding_side)
    preprocessor, queries = (None, NUM_QUERY_TOKENS)
    if published:
        preprocessor, queries = published_queries("blip2")[0], published_queries("instructblip")[1]
    processor = InstructBlipProcessor(image_processor(preprocessor), tokenizer, qformer_tokenizer,
                                      num_query_tokens=queries)
    size = IMAGE_SIZE if preprocessor is None else preprocessor["size"]["height"]
    model = InstructBlipForConditionalGeneration(instructblip_config(processor.tokenizer, qformer_tokenizer, size,
                                                                     queries))
    sharpen(model)
    return _save(model, processor, out_dir)


REMOTE_MODULE = '''"""Remote-code stand-in for CheXagent: a BLIP-2 that, like BLIP-2 before transformers put
image placeholders into the text, prepends the Q-Former outputs to the prompt embeddings inside
forward, so its logits are NUM_QUERY positions longer than input_ids."""

import torch
from transformers import Blip2Config, Blip2ForConditionalGeneration
from transformers.modeling_outputs import CausalLMOutput


class StandInConfig(Blip2Config):
    model_type = "medexp_chexagent_standin"


class StandInForConditionalGeneration(Blip2ForConditionalGeneration):
    config_class = StandInConfig

    def forward(self, pixel_values, input_ids, attention_mask=None, **kwargs):
        queries = self.get_image_features(pixel_values, return_dict=True).pooler_output
        embeds = self.get_input_embeddings()(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        query_mask = torch.ones(queries.shape[:2], dtype=attention_mask.dtype, device=attention_mask.device)
        outputs = self.language_model(inputs_embeds=torch.cat([queries.to(embeds.dtype), embeds], dim=1),
                                      attention_mask=torch.cat([query_mask, attention_mask], dim=1))
        return CausalLMOutput(logits=outputs.logits)
'''


def build_remote_standin(out_dir: Path, blip2_dir: Path) -> Path:
    """The tiny BLIP-2 of ``blip2_dir`` re-declared as a remote-code checkpoint: config.json names
    a custom model type whose config and model classes live in a module next to the weights and
    are reached through ``auto_map`` (AutoConfig, AutoModelForCausalLM), as on CheXagent's hub page.
    The processor does not expand image tokens (num_query_tokens unset): the model adds the queries."""
    shutil.copytree(blip2_dir, out_dir)
    (out_dir / "modeling_standin.py").write_text(REMOTE_MODULE)
    config_path = out_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["model_type"] = "medexp_chexagent_standin"
    config["architectures"] = ["StandInForConditionalGeneration"]
    config["auto_map"] = {
        "AutoConfig": "modeling_standin.StandInConfig",
        "AutoModelForCausalLM": "modeling_standin.StandInForConditionalGeneration",
    }
    config_path.write_text(json.dumps(config, indent=1))
    processor_path = out_dir / "processor_config.json"
    processor_config = json.loads(processor_path.read_text())
    processor_config["num_query_tokens"] = None
    processor_path.write_text(json.dumps(processor_config, indent=1))
    return out_dir


# ---------------------------------------------------------------------------- shared checks


def make_scorer(scorer_cls, model_dir: Path, batch_size: int = 1, **overrides):
    settings = {"prompt_template": "Question: {question} Answer:", "use_chat_template": False, **overrides}
    cfg = OmegaConf.structured(ModelConfig(name="tiny", batch_size=batch_size, device="cpu", **settings))
    return scorer_cls(cfg, str(model_dir))


def check_model_yaml(family: str, pretrained: str, prompt_template: str, trust_remote_code: bool = False) -> None:
    """conf/model/<family>.yaml selects the family, its hub checkpoint and its prompt, with no chat
    template; remote code runs only where ``trust_remote_code`` says."""
    model = compose([f"model={family}"]).model
    assert (model.family.value, model.pretrained) == (family, pretrained)
    assert model.prompt_template == prompt_template
    assert model.trust_remote_code is trust_remote_code and model.use_chat_template is False


def check_refuses_checkpoint(scorer_cls, model_dir: Path, model_type: str, loads: str) -> None:
    """The adapter refuses a checkpoint of another model type, naming its type and the one it loads."""
    with pytest.raises(ValueError, match=rf"'{model_type}' checkpoint.*\['{loads}'\]"):
        make_scorer(scorer_cls, model_dir)


def manual_answer_scores(model, processor, prompt: str, example: Example, text_only_lm=None):
    """Answer token ids, log p and Min-K%++ z from one unbatched forward pass of the processor's
    encoding of ``prompt + " " + answer`` (``text_only_lm`` scores examples without an image;
    Q-Former inputs, if any, encode the prompt alone)."""
    kwargs = {"return_tensors": "pt"}
    if example.image is not None:
        kwargs["images"] = [open_rgb(example.image)]
    prompt_only = processor(text=[prompt], **kwargs)
    prompt_ids = prompt_only["input_ids"][0]
    full = processor(text=[f"{prompt} {example.answer}"], **kwargs)
    # An InstructBLIP Q-Former reads the instruction, not the answer being scored.
    full.update({key: value for key, value in prompt_only.items() if key.startswith("qformer_")})
    ids = full["input_ids"][0]
    with torch.no_grad():
        if example.image is None:
            logits = text_only_lm(input_ids=full["input_ids"], attention_mask=full["attention_mask"]).logits
        else:
            logits = model(**full).logits
    # The remote-code stand-in returns logits for the queries it prepends too: keep the text's.
    return answer_scores(logits[0, -len(ids):], ids, prompt_ids)


def record_model_inputs(scorer, monkeypatch) -> list[dict]:
    """Every inputs dict the scorer hands to its model (one per processor call)."""
    calls: list[dict] = []
    original = scorer.example_logits

    def recording(inputs):
        calls.append({key: value.clone() if torch.is_tensor(value) else value for key, value in inputs.items()})
        return original(inputs)

    monkeypatch.setattr(scorer, "example_logits", recording)
    return calls


def check_answer_span(scorer, examples: list[Example], monkeypatch) -> None:
    """The prompt is the template alone; the tokens the model receives are the processor's
    encoding of that prompt followed by exactly the gold answer, and the answer span of the
    score row covers those answer tokens and nothing else (no end or padding token)."""
    calls = record_model_inputs(scorer, monkeypatch)
    frame = scorer.score_examples(examples)
    sent = [row for call in calls for row in zip(call["input_ids"], call["attention_mask"])]
    order = [ex for group in ([e for e in examples if e.image is not None], [e for e in examples if e.image is None])
             for ex in group]  # one batch: image rows first, then text-only rows
    assert len(sent) == len(examples)
    for example, (ids, mask) in zip(order, sent):
        prompt = scorer.prompt(example)
        assert prompt == scorer.cfg.prompt_template.format(question=example.question)
        kwargs = {"images": [open_rgb(example.image)]} if example.image is not None else {}
        prompt_ids = scorer.processor(text=[prompt], return_tensors="pt", **kwargs)["input_ids"][0].tolist()
        real = ids[mask.bool()].tolist()
        row = frame.set_index("example_id").loc[example.example_id]
        n_answer = int(row["n_answer_tokens"])
        assert not row["boundary_merged"]
        assert real[: len(prompt_ids)] == prompt_ids
        assert len(real) == len(prompt_ids) + n_answer
        assert scorer.tokenizer.decode(real[len(prompt_ids):]) == " " + example.answer


def check_manual_scores(scorer, example: Example) -> None:
    """Adapter scores of one example equal a manual forward pass (full model with an image,
    language model alone without one)."""
    ids, logprobs, z = manual_answer_scores(scorer.model, scorer.processor, scorer.prompt(example), example,
                                            text_only_lm=scorer.model.language_model)
    row = rows(scorer.score_examples([example]))[0]
    assert scorer.tokenizer.decode(ids) == " " + example.answer
    assert row["n_answer_tokens"] == len(ids) == len(row["token_logprobs"])
    np.testing.assert_allclose(row["token_logprobs"], logprobs, rtol=0, atol=ATOL)
    np.testing.assert_allclose(row["token_minkpp_z"], z, rtol=0, atol=ATOL)
    assert row["sum_logprob"] == pytest.approx(logprobs.sum(), abs=ATOL * len(ids))
    assert row["position"] == example.position


def check_batched_equals_single(make, examples: list[Example], batch_sizes=(2, 3, 16), token_budget=100) -> None:
    """Scores do not change with the batch size or with batching by a token budget, and rows
    keep the input order."""
    single = rows(make(batch_size=1).score_examples(examples))
    assert np.std(np.concatenate([r["token_logprobs"] for r in single])) > 0.5  # not a near-uniform model
    settings = [{"batch_size": size} for size in batch_sizes] + [{"batch_size": 1, "token_budget": token_budget}]
    for setting in settings:
        scorer = make(**setting)
        widths = []
        forward = scorer.example_logits
        scorer.example_logits = lambda inputs: widths.append(len(inputs["input_ids"])) or forward(inputs)
        batched = rows(scorer.score_examples(examples))
        assert max(widths) > 1 or setting["batch_size"] == 1 and "token_budget" not in setting
        assert [r["example_id"] for r in batched] == [ex.example_id for ex in examples]
        for a, b in zip(batched, single):
            assert_rows_close(a, b)


def check_batch_companions(scorer, images: list[Example], texts: list[Example]) -> None:
    """A row's score is the same alone, next to shorter or longer prompts, first or second."""
    x, short, long = images[0], images[1], images[3]
    assert len(scorer.prompt(short)) < len(scorer.prompt(x)) < len(scorer.prompt(long))
    alone = rows(scorer.score_examples([x]))[0]
    for batch in ([x, short], [x, long], [long, x, short], [texts[0], x, texts[1]]):
        row = next(r for r in rows(scorer.score_examples(batch)) if r["example_id"] == x.example_id)
        assert_rows_close(row, alone)
    text_alone = rows(scorer.score_examples([texts[1]]))[0]
    mixed = rows(scorer.score_examples([texts[0], long, texts[1]]))[2]
    assert_rows_close(mixed, text_alone)


def check_image_matters(scorer, images: list[Example]) -> None:
    a = images[0]
    swapped = Example("t::test::swap", 0, images[3].image, a.question, a.answer)
    ra, rb = rows(scorer.score_examples([a, swapped]))
    assert np.max(np.abs(np.subtract(ra["token_logprobs"], rb["token_logprobs"]))) > 1e-3


def check_score_texts(scorer) -> None:
    """Text-only scoring for the exchangeability test runs the language model alone and equals
    a manual pass, with and without a sliding window."""
    texts = [LONG_TEXT, "Question: Is there a lesion? Answer: yes", "short"]
    got = scorer.score_texts(texts, context_length=4096, stride=2048, batch_size=2)
    for value, text in zip(got, texts):
        assert value == pytest.approx(text_logprob(scorer.model.language_model, scorer.tokenizer, text), abs=1e-4)
    windowed = scorer.score_texts(texts, context_length=12, stride=5, batch_size=3)
    assert windowed[2] == pytest.approx(got[2], abs=1e-4)  # short enough for one window
    assert abs(windowed[0] - got[0]) > 1e-3  # truncated context changes the long text's total


def record_from_pretrained(monkeypatch) -> list[tuple[str, dict]]:
    """(auto class name, keyword arguments) of every Auto*.from_pretrained call from now on."""
    import transformers

    calls: list[tuple[str, dict]] = []
    for name in ("AutoConfig", "AutoProcessor", "AutoModelForImageTextToText", "AutoModelForCausalLM"):
        auto = getattr(transformers, name)

        def recording(*args, _name=name, _original=auto.from_pretrained, **kwargs):
            calls.append((_name, dict(kwargs)))
            return _original(*args, **kwargs)

        monkeypatch.setattr(auto, "from_pretrained", recording)
    return calls


def check_remote_code_flag(scorer_cls, model_dir: Path, monkeypatch, **overrides) -> list[tuple[str, dict]]:
    """trust_remote_code reaches every from_pretrained call as the config sets it (False by default)."""
    for enabled in (False, True):
        calls = record_from_pretrained(monkeypatch)
        make_scorer(scorer_cls, model_dir, **overrides, **({"trust_remote_code": True} if enabled else {}))
        assert {"AutoProcessor"} <= {name for name, _ in calls}
        assert all(kwargs.get("trust_remote_code") is enabled for _, kwargs in calls), calls
        monkeypatch.undo()
    return calls
