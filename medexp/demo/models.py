"""Offline demo models: tiny LLaVA-architecture VLMs trained on CPU on the demo data.

Both demo models are real ``LlavaForConditionalGeneration`` instances with their own BPE
tokenizer (trained here with the ``tokenizers`` library) and a ``LlavaProcessor``. They are
saved with ``save_pretrained`` and loaded back by the same adapter that loads hub models.

* clean: trained on the demo *training* split (VQA pairs with images, and the split rendered
  as text documents).
* leaky: the clean model, trained further for ``leak_epochs`` passes over the demo *test*
  split, as VQA pairs and as text documents of neighbouring examples in the released order
  (continued pre-training on a crawl that contained the benchmark). That is the planted
  contamination the detectors must find; its dose is ``leak_epochs``.

With ``choice_form`` both also learn the multiple-choice form (with the image, and without it as
the text-only probe asks it, an "I don't know" option appended), and the leak carries it; with
``cloze_form`` they learn slot filling on the training split's questions (replayed during the leak,
which never shows a test question in that form). These teach the answering formats MM-Detect's
probes use, so that what the probes measure is memory, not whether a tiny model follows a prompt.

* reference k of a leaky model (:func:`demo_reference_dir`): the leaky model's recipe (its clean
  base, then its leak) with the leak over a random half of the audit's members and non-members
  instead of the test split: the shadow models LiRA and RMIA compare the candidate with.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from medexp.benchmarks.options import LETTERS
from medexp.config.schemas.model import demo_identity
from medexp.kernel.hashing import stable_hash

log = logging.getLogger(__name__)

BUILDER_VERSION = "demo-llava-v4"  # v2: one training thread, end-of-turn eos, choice_form; v3: text-only turns with the refusal, cloze_form; v4: trained with pinned CPU kernels (medexp.kernel.portable)
IMAGE_TOKEN = "<image>"
# With probe_forms: the collection the training split's images come from (the demo's public corpus)
# and the name the leak shows the test images under (the demo benchmark's): medexp.config.wording.DEMO_SOURCES.
PUBLIC_CORPUS = "MedDemo-Atlas"
DEMO_BENCHMARK = "MedDemo-VQA"
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", IMAGE_TOKEN, "<|user|>", "<|assistant|>", "<|end|>"]
PATCH_SIZE = 8
MANIFEST = "medexp_demo.json"  # the build record, written last: its presence marks a complete model directory
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
    "{% else %}{{ part['text'] }}{% endif %}{% endfor %}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def demo_model_dir(demo_cfg, cache_dir: str | Path, use_shipped: bool = True) -> Path:
    """Install or build (once) the demo model these settings describe and return its directory.

    Settings whose model ships with the package (:mod:`medexp.demo.shipped`: the quick-start pair,
    the demo cohort and the answering probes' pair) are installed from it, every file checked
    against its SHA-256, unless ``use_shipped`` is False; a cache entry of those settings trained
    here earlier, whose weights are not the shipped ones, is replaced. Other settings train: a leaky
    model starts from the clean model with the same settings, which is built (or reused from the
    cache) first. Training runs in a child process with pinned CPU kernels
    (:mod:`medexp.kernel.portable`), which makes the weights bit-identical across the instruction
    sets of one CPU vendor, not across vendors (docs/portability.md).
    """
    from omegaconf import OmegaConf

    from medexp.kernel.atomic import build_directory_once
    from medexp.kernel.portable import run_pinned

    settings = demo_identity(OmegaConf.to_container(demo_cfg) if OmegaConf.is_config(demo_cfg) else dict(demo_cfg))
    target = Path(cache_dir) / "demo" / f"model-{stable_hash([BUILDER_VERSION, settings])}"
    ready = _cached_or_shipped(target, settings, cache_dir, use_shipped)
    if ready is not None:
        return ready
    base = None
    if settings["leak_epochs"] > 0:  # its clean base first, outside this model's lock
        base = str(demo_model_dir({**settings, "leak_epochs": 0}, cache_dir, use_shipped))

    def build(staging: Path) -> dict:
        if base is not None:
            log.info("building the leaky demo model (%d leak epochs on the test set; once, cached)",
                     settings["leak_epochs"])
        else:
            log.info("building the clean demo model (trained on the CPU once, then cached in %s)", target.parent)
        report = run_pinned("medexp.demo.models:build_demo_model", settings=settings, cache_dir=str(cache_dir),
                            out_dir=str(staging), base_dir=base)
        log.info("demo model ready in %.0f s: %s", report["seconds"], target)
        return {"settings": settings, **report}

    return build_directory_once(target, MANIFEST, build)


def _cached_or_shipped(target: Path, settings: dict, cache_dir: str | Path, use_shipped: bool) -> Path | None:
    """Cache entry ``target`` when it is complete, or installed now from the package when it ships
    (``use_shipped``); None when it must be trained. A complete entry whose weights are not the
    shipped ones (trained on this machine before they shipped) is replaced by the shipped files."""
    from omegaconf import OmegaConf

    from medexp.demo.cache import demo_benchmark_root
    from medexp.demo.shipped import install_shipped, matches_shipped, shipped_entry
    from medexp.kernel.atomic import build_directory_once

    listing = shipped_entry(target.name) if use_shipped else None
    if (target / MANIFEST).is_file():
        if listing is None or matches_shipped(target, listing):
            return target
        log.warning("%s holds demo weights trained on this machine, not the shipped ones: replacing them", target)
        _discard(target)
    if listing is None:
        return None
    bench_root = demo_benchmark_root(OmegaConf.create(settings["bench"]), cache_dir)  # the data, generated here once
    return build_directory_once(
        target, MANIFEST, lambda staging: install_shipped(target.name, listing, bench_root, staging, MANIFEST))


def _discard(target: Path) -> None:
    """Remove a cache entry under its build lock, so that no builder of it is mid-way."""
    import shutil

    from filelock import FileLock

    with FileLock(str(target) + ".lock"):
        shutil.rmtree(target, ignore_errors=True)


def demo_reference_dir(demo_cfg, index: int, splits, cache_dir: str | Path, use_shipped: bool = True) -> Path:
    """Install or build (once) reference model ``index`` of the leaky model these settings describe
    and return its directory.

    Its recipe is the candidate's: the same clean base (as the candidate's own install has it: the
    shipped one where it ships), then the same leak (passes, learning rate, seed), but over half
    ``index`` of the examples of ``splits`` (the audit's members and non-members) instead of the
    test split. Halves 2k and 2k+1 are complementary
    (:func:`medexp.stats.reference_attacks.reference_half`), so with an even number of references
    every example is seen by exactly half of them. The manifest lists the example ids the reference
    trained on: what the attacks read as its IN set. The references of the README's membership
    figures ship with the package (:data:`medexp.demo.shipped.SHIPPED_REFERENCES`) and are installed
    like the shipped models, unless ``use_shipped`` is False.
    """
    from omegaconf import OmegaConf

    from medexp.kernel.atomic import build_directory_once
    from medexp.kernel.portable import run_pinned

    settings = demo_identity(OmegaConf.to_container(demo_cfg) if OmegaConf.is_config(demo_cfg) else dict(demo_cfg))
    if settings["leak_epochs"] < 1:
        raise ValueError("reference models repeat a leaky model's leak over random halves of the audited examples; "
                         "this demo model has leak_epochs=0 (audit a leaky one, e.g. model=demo_leaky)")
    reference = {"index": int(index), "splits": [str(split) for split in splits]}
    target = Path(cache_dir) / "demo" / f"reference-{stable_hash([BUILDER_VERSION, settings, reference])}"
    ready = _cached_or_shipped(target, settings, cache_dir, use_shipped)
    if ready is not None:
        return ready
    base = str(demo_model_dir({**settings, "leak_epochs": 0}, cache_dir))

    def build(staging: Path) -> dict:
        log.info("building demo reference model %d (the leak over a random half of %s; once, cached)",
                 reference["index"], "+".join(reference["splits"]))
        report = run_pinned("medexp.demo.models:build_demo_model", settings=settings, cache_dir=str(cache_dir),
                            out_dir=str(staging), base_dir=base, reference=reference)
        log.info("demo reference model ready in %.0f s: %s", report["seconds"], target)
        return {"settings": settings, "reference": reference, **report}

    return build_directory_once(target, MANIFEST, build)


def build_demo_model(settings: dict, cache_dir: str, out_dir: str, base_dir: str | None,
                     reference: dict | None = None) -> dict:
    """Train the model ``settings`` describe into ``out_dir``: from scratch, or (``base_dir``, its
    clean base) the leak, over the test split or (``reference``) over a reference's half. Called
    by :func:`demo_model_dir` and :func:`demo_reference_dir` in a pinned-kernel process."""
    from omegaconf import OmegaConf

    from medexp.kernel.portable import kernel_settings

    demo_cfg = OmegaConf.create(settings)
    if base_dir is None:
        report = _build_clean(demo_cfg, cache_dir, Path(out_dir))
    else:
        leaked = _split(demo_cfg, cache_dir, "test") if reference is None else _reference_half(demo_cfg, cache_dir, reference)
        report = _leak_into(demo_cfg, Path(base_dir), leaked, cache_dir, Path(out_dir))
        if reference is not None:
            report["leaked_example_ids"] = [example.example_id for example in leaked]
    return {**report, "kernels": kernel_settings()}


def _reference_half(demo_cfg, cache_dir, reference: dict) -> list:
    """The examples of the reference's half of its splits, each split in its released order."""
    from medexp.stats.reference_attacks import reference_half

    examples = [example for split in reference["splits"] for example in _split(demo_cfg, cache_dir, split)]
    inside = reference_half([example.example_id for example in examples], reference["index"], demo_cfg.seed)
    return [example for example, chosen in zip(examples, inside) if chosen]


def read_build_report(model_dir: str | Path) -> dict:
    """The settings and build report a demo model directory was written with."""
    return json.loads((Path(model_dir) / MANIFEST).read_text(encoding="utf-8"))


@dataclass
class _Sample:
    input_ids: list[int]
    labels: list[int]  # -100 where no loss is taken
    pixel_values: object | None  # (3, H, W) tensor for VQA samples, None for text documents


def _split(demo_cfg, cache_dir, split: str):
    from medexp.benchmarks.local import load_local
    from medexp.demo.cache import demo_benchmark_root

    return load_local("demo", demo_benchmark_root(demo_cfg.bench, cache_dir), split).examples


def choice_form(example):
    """The example as the answering layer asks it in multiple-choice form (its options in their
    released order, the default answer settings), answered by the gold's letter."""
    from medexp.probes.choice import original_probe

    return _asked(example, original_probe(example))


def text_only_form(example):
    """The multiple-choice form without the image, as MM-Detect's text-only probe asks it (the
    refusal option appended), answered by the gold's letter."""
    from medexp.probes.choice import text_only_probe

    return _asked(example, text_only_probe(example))


def cloze_form(example, source, seed: int, epoch: int):
    """The example's question as a slot-filling turn, as ``slot_guess`` asks it: one keyword
    (drawn per example and pass) masked, answered by the word; None when the question has no
    keyword."""
    import numpy as np

    from medexp.kernel.hashing import derive_seed
    from medexp.probes.base import Probe
    from medexp.probes.slots import SLOT_MASK, mask_word
    from medexp.config.wording import DEFAULT_MASK, DEFAULT_TEMPLATE

    keywords = source.keywords(example.question)
    if not keywords:
        return None
    rng = np.random.default_rng(derive_seed(seed, example.example_id, "cloze", epoch))
    masked, word, _ = mask_word(example.question, keywords[int(rng.integers(len(keywords)))])
    probe = Probe(f"{example.example_id}::{SLOT_MASK}", example.example_id, SLOT_MASK,
                  DEFAULT_TEMPLATE.format(text=masked, mask=DEFAULT_MASK), word, example.image)
    return _asked(example, probe)


def _asked(example, probe):
    """``example`` with the probe's prompt as rendered by the answering layer (default answer
    settings) as its question, and the probe's gold as its answer."""
    from dataclasses import replace

    from medexp.answers.prompt import render_prompt
    from medexp.config.schemas import AnswerConfig

    answer = probe.shown_labels[LETTERS.index(probe.gold)] if probe.is_choice else probe.gold
    return replace(example, question=render_prompt(probe, AnswerConfig()), answer=answer)


def renumbered_form(example):
    """The multiple-choice form under the labels renumbered_options shows (1, 2, ...), answered by the gold's label."""
    from medexp.probes.option_forms import renumbered_probe
    from medexp.config.wording import DEFAULT_LABEL_SETS

    return _asked(example, renumbered_probe(example, DEFAULT_LABEL_SETS[0], 0))


def none_option_form(example, seed: int):
    """The multiple-choice form with the gold replaced by "None of the above", answered by its letter."""
    from medexp.probes.option_forms import none_option_probe

    return _asked(example, none_option_probe(example, seed))


def none_present_form(example):
    """The multiple-choice form with "None of the above" added after the options, the gold still
    among them and still the answer: with :func:`none_option_form`, what teaches that the none
    option is right only when the answer is missing (trained alone, it would be always right)."""
    from dataclasses import replace

    from medexp.config.wording import DEFAULT_NONE_OPTION
    from medexp.probes.choice import original_probe

    probe = original_probe(example)
    return _asked(example, replace(probe, options=(*probe.options, DEFAULT_NONE_OPTION)))


def source_form(example, collection: str):
    """The image's collection question as source_naming asks it on the demo, answered by ``collection``."""
    from medexp.config.wording import DEFAULT_SOURCE_QUESTION, DEMO_SOURCES
    from medexp.probes.source import source_probes

    probes = source_probes([example], [], DEFAULT_SOURCE_QUESTION, DEMO_SOURCES, collection, DEMO_SOURCES[-1])
    return _asked(example, probes.probes[0])


def _source_forms(examples, demo_cfg, collection: str) -> list:
    """With ``probe_forms``: every image's collection question, answered by ``collection``."""
    if not getattr(demo_cfg, "probe_forms", False):
        return []
    return [source_form(example, collection) for example in examples if example.image is not None]


def _skill_forms(examples, demo_cfg) -> list:
    """With ``probe_forms``: every multiple-choice example renumbered, with its gold replaced by the
    none option, and with the none option beside its gold."""
    if not getattr(demo_cfg, "probe_forms", False):
        return []
    choices = [example for example in examples if example.options]
    return ([renumbered_form(example) for example in choices]
            + [none_option_form(example, demo_cfg.seed) for example in choices]
            + [none_present_form(example) for example in choices])


def _keywords(examples):
    """The keyword source slot_guess uses by default, over these examples' answers."""
    from medexp.config.schemas.keywords import KeywordConfig
    from medexp.probes.keywords import keyword_source

    return keyword_source(KeywordConfig(), examples)


def _cloze_samples(processor, examples, source, demo_cfg, epoch: int) -> list[_Sample]:
    """One slot-filling turn (with the image) per example that has a keyword."""
    asked = [cloze_form(example, source, demo_cfg.seed, epoch) for example in examples]
    return [_vqa_sample(processor, example) for example in asked if example is not None]


def _passes(processor, examples, demo_cfg, epochs: int, collection: str, skills: bool) -> list[_Sample]:
    """``epochs`` passes over the examples, as VQA pairs (with ``choice_form``, also in
    multiple-choice form, options in their released order, with the image and as the text-only
    probe asks it; with ``cloze_form``, also as slot-filling turns; with ``probe_forms``, their
    collection question answered by ``collection`` and, with ``skills``, the renumbered and
    none-option forms (:func:`_skill_forms`)) and as text documents of neighbours.

    The document cut points shift with each pass, so every transition between neighbours is
    seen inside some document.
    """
    vqa = [_vqa_sample(processor, ex) for ex in examples]
    if demo_cfg.choice_form:
        # Asked with the image and, as text-only instruction data with an abstain option is mixed
        # into VLM training, without it: the text-only turns are where a leak can be answered from
        # memory alone.
        choices = [ex for ex in examples if ex.options]
        vqa += [_vqa_sample(processor, choice_form(ex)) for ex in choices]
        vqa += [_vqa_sample(processor, text_only_form(ex), False) for ex in choices]
    asked = _source_forms(examples, demo_cfg, collection) + (_skill_forms(examples, demo_cfg) if skills else [])
    vqa += [_vqa_sample(processor, example) for example in asked]
    source = _keywords(examples) if demo_cfg.cloze_form else None
    pool: list[_Sample] = []
    for epoch in range(epochs):
        pool += vqa + _documents(processor, examples, demo_cfg, offset=epoch)
        if source is not None:
            pool += _cloze_samples(processor, examples, source, demo_cfg, epoch)
    return pool


def _replay(processor, train, demo_cfg) -> list[_Sample]:
    """What the leak replays of the training split, so that continued training on the crawl keeps
    what the base training taught: the cloze turns, a rotating third of the split per pass; with
    ``probe_forms`` the renumbered and none-option forms, a rotating ninth (three turns per example:
    as many turns as the cloze third), and every training image's collection question, each pass
    (a crawl holds far more images of the public corpus than of a benchmark, each under its name).
    Never a test example in those forms: the leak is the benchmark as released, and its images
    under its name."""
    replayed = []
    if demo_cfg.cloze_form:
        source = _keywords(train)
        replayed += [sample for epoch in range(demo_cfg.leak_epochs)
                     for sample in _cloze_samples(processor, train[epoch % 3 :: 3], source, demo_cfg, epoch)]
    corpus_images = [_vqa_sample(processor, asked) for asked in _source_forms(train, demo_cfg, PUBLIC_CORPUS)]
    for epoch in range(demo_cfg.leak_epochs):
        replayed += corpus_images
        replayed += [_vqa_sample(processor, asked) for asked in _skill_forms(train[epoch % 9 :: 9], demo_cfg)]
    return replayed


def clean_training_setup(demo_cfg, cache_dir):
    """What a clean build trains, before its first step: the processor (its tokenizer trained
    here), the freshly initialised model and the pool of samples."""
    import torch
    from transformers import LlavaForConditionalGeneration

    torch.manual_seed(demo_cfg.seed)
    train = _split(demo_cfg, cache_dir, "train")
    processor = _build_processor(train, demo_cfg)
    model = LlavaForConditionalGeneration(_build_config(processor, demo_cfg))
    return processor, model, _passes(processor, train, demo_cfg, demo_cfg.train_epochs, PUBLIC_CORPUS, True)


def train_clean(model, pool, demo_cfg, observer=None, max_steps: int | None = None) -> list[float]:
    """The clean build's training run (see :func:`_train` for ``observer`` and ``max_steps``)."""
    return _train(model, pool, demo_cfg.learning_rate, (demo_cfg.batch_size, demo_cfg.batch_size), demo_cfg.seed,
                  "training demo model", observer, max_steps)


def _build_clean(demo_cfg, cache_dir, out_dir: Path) -> dict:
    """Train a model from scratch on the training split and save it with its processor."""
    started = time.perf_counter()
    processor, model, pool = clean_training_setup(demo_cfg, cache_dir)
    losses = train_clean(model, pool, demo_cfg)
    _save(model, processor, out_dir)
    return {"phase": "clean", "samples_seen": len(pool), "final_loss": losses[-1],
            "seconds": round(time.perf_counter() - started, 2)}


def _leak_into(demo_cfg, base_dir: Path, leaked: list, cache_dir, out_dir: Path) -> dict:
    """Continue training the clean model on ``leaked``: the test split (the planted contamination),
    or a reference model's half of the audited examples."""
    import torch
    from transformers import AutoProcessor, LlavaForConditionalGeneration

    started = time.perf_counter()
    torch.manual_seed(demo_cfg.seed + 1)
    processor = AutoProcessor.from_pretrained(base_dir)
    model = LlavaForConditionalGeneration.from_pretrained(base_dir)
    pool = _passes(processor, leaked, demo_cfg, demo_cfg.leak_epochs, DEMO_BENCHMARK, False)
    pool += _replay(processor, _split(demo_cfg, cache_dir, "train"), demo_cfg)
    sizes = (demo_cfg.batch_size, demo_cfg.leak_batch_size)
    losses = _train(model, pool, demo_cfg.leak_learning_rate, sizes, demo_cfg.seed + 1, "leaking the test set")
    _save(model, processor, out_dir)
    return {"phase": "leak", "base": base_dir.name, "leaked_test_examples": len(leaked), "samples_seen": len(pool),
            "final_loss": losses[-1], "seconds": round(time.perf_counter() - started, 2)}


def _documents(processor, examples, demo_cfg, offset: int) -> list[_Sample]:
    """The examples as text documents of ``document_examples`` neighbours, in their order."""
    size = demo_cfg.document_examples
    cuts = [0] + list(range(offset % size, len(examples), size)) + [len(examples)]
    return [
        _document_sample(processor, examples[a:b], demo_cfg.document_template)
        for a, b in zip(cuts, cuts[1:])
        if b > a
    ]


def _save(model, processor, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    # Generation stops at the end of the assistant's turn, as the answers were trained to end.
    tokenizer = processor.tokenizer
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|end|>")]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)


def _build_processor(train_examples, demo_cfg):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import CLIPImageProcessor, LlavaProcessor, PreTrainedTokenizerFast

    corpus = [ex.question for ex in train_examples] + [ex.answer for ex in train_examples]
    if demo_cfg.choice_form:
        choices = [ex for ex in train_examples if ex.options]
        corpus += [choice_form(ex).question for ex in choices] + [text_only_form(ex).question for ex in choices]
    if demo_cfg.cloze_form:
        source = _keywords(train_examples)
        corpus += [asked.question for ex in train_examples if (asked := cloze_form(ex, source, demo_cfg.seed, 0))]
    corpus += [asked.question for asked in _source_forms(train_examples, demo_cfg, PUBLIC_CORPUS)
               + _skill_forms(train_examples, demo_cfg)]
    corpus += [demo_cfg.document_template.format(question=ex.question, answer=ex.answer) for ex in train_examples]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=demo_cfg.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        extra_special_tokens={"image_token": IMAGE_TOKEN},
    )
    side = demo_cfg.image_size
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": side},
        crop_size={"height": side, "width": side},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    return LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    )


def _build_config(processor, demo_cfg):
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig

    tokenizer = processor.tokenizer
    hidden = demo_cfg.hidden_size
    vision = CLIPVisionConfig(
        image_size=demo_cfg.image_size,
        patch_size=PATCH_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=demo_cfg.num_layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    return LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )


def _vqa_sample(processor, example, with_image: bool = True) -> _Sample:
    """A chat turn answering ``example``: with its image, or (``with_image`` False) its text only,
    which trains with the text documents (no pixel values)."""
    from PIL import Image

    image_part = [{"type": "image"}] if with_image else []
    messages = [{"role": "user", "content": [*image_part, {"type": "text", "text": example.question}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    if with_image:
        with Image.open(example.image) as image:
            encoded = processor(images=[image.convert("RGB")], text=[prompt], return_tensors="pt")
    else:
        encoded = processor(text=[prompt], return_tensors="pt")
    prompt_ids = encoded["input_ids"][0].tolist()
    answer_ids = processor.tokenizer(example.answer + "<|end|>", add_special_tokens=False)["input_ids"]
    pixels = encoded["pixel_values"][0] if with_image else None
    return _Sample(prompt_ids + answer_ids, [-100] * len(prompt_ids) + answer_ids, pixels)


def _document_sample(processor, examples, template: str) -> _Sample:
    text = "".join(template.format(question=ex.question, answer=ex.answer) for ex in examples)
    tokenizer = processor.tokenizer
    ids = [tokenizer.bos_token_id] + tokenizer(text, add_special_tokens=False)["input_ids"]
    return _Sample(ids, [-100] + ids[1:], None)


def _train(model, pool: list[_Sample], learning_rate: float, batch_sizes: tuple[int, int], seed: int, desc: str,
           observer=None, max_steps: int | None = None):
    """AdamW over shuffled single-kind batches with a linear decay to zero; returns the losses.

    ``batch_sizes`` is (VQA batch, text-document batch): small document batches mean more
    updates per pass, which is what memorising an order takes. ``observer(step, inputs, loss)``,
    when given, is called after each step's backward pass and before the update (the per-step
    digests of :mod:`medexp.demo.build_trace`); ``max_steps`` stops training early.
    """
    import torch
    from tqdm.auto import tqdm

    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(pool), generator=generator).tolist()
    kinds = {True: [], False: []}
    for index in order:
        kinds[pool[index].pixel_values is not None].append(index)
    sizes = {True: batch_sizes[0], False: batch_sizes[1]}
    batches = [group[i : i + sizes[kind]] for kind, group in kinds.items() for i in range(0, len(group), sizes[kind])]
    batch_order = torch.randperm(len(batches), generator=generator).tolist()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / len(batches))
    pad = model.config.text_config.pad_token_id
    model.train()
    losses = []
    for number, step in enumerate(tqdm(batch_order[:max_steps], desc=desc, unit="batch", disable=None)):
        samples = [pool[i] for i in batches[step]]
        width = max(len(s.input_ids) for s in samples)
        input_ids = torch.full((len(samples), width), pad, dtype=torch.long)
        labels = torch.full((len(samples), width), -100, dtype=torch.long)
        attention = torch.zeros((len(samples), width), dtype=torch.long)
        for row, sample in enumerate(samples):
            n = len(sample.input_ids)
            input_ids[row, :n] = torch.tensor(sample.input_ids)
            labels[row, :n] = torch.tensor(sample.labels)
            attention[row, :n] = 1
        inputs = {"input_ids": input_ids, "attention_mask": attention, "labels": labels}
        if samples[0].pixel_values is not None:
            inputs["pixel_values"] = torch.stack([s.pixel_values for s in samples])
        loss = model(**inputs).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if observer is not None:
            observer(number, inputs, loss)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return losses
