"""Tiny random-weight checkpoints of the real transformers classes of each adapter family.

Each builder trains a small byte-level BPE tokenizer with the family's special tokens, builds the
family's real processor (image processor with small sizes, a chat template that keeps the real
one's structure and end tokens) and the real model class from a config with tiny sizes, and
saves both with ``save_pretrained``; the adapters load them back through ``from_pretrained``.

With ``published=True`` a builder uses the family's published processor settings and chat
template instead (``medexp/models/published/<family>``, sources in its SOURCES.md): the prompt
and the number of image tokens are then those of the real checkpoint, and only the vocabulary
(trained here, carrying the real special tokens) and the model's widths are small.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PIL import Image

from medexp.benchmarks.base import Example
from medexp.demo.scans import ScanSpec, png_bytes, render_scan
from medexp.models.published import published_settings

VOCAB_SIZE = 400
TEXT_HIDDEN = 32

# (question, answer, scan, image width x height): answers of very different token lengths, images
# of different sizes and aspect ratios so that dynamic-resolution processors (Qwen2.5-VL, anyres
# LLaVA-OneVision, InternVL crops) give each example its own number of image tokens.
IMAGE_QA = [
    ("What modality is this scan?", "CT", ScanSpec("CT", "brain", seed=1), (32, 32)),
    ("Is there a lesion?", "yes", ScanSpec("MRI", "liver", lesion=True, lesion_side="left", lesion_count=1, seed=2),
     (48, 32)),
    ("Which organ is shown?", "the left kidney, seen from the front", ScanSpec("X-Ray", "kidney", seed=3), (32, 56)),
    ("How many lesions are visible in the upper part of the organ?", "two",
     ScanSpec("Ultrasound", "lung", lesion=True, lesion_side="upper", lesion_count=2, seed=4), (40, 40)),
    ("Where is the lesion?", "on the right side of the heart",
     ScanSpec("CT", "heart", lesion=True, lesion_side="right", lesion_count=1, seed=5), (64, 32)),
]
TEXT_QA = [
    ("Which modality uses sound waves?", "ultrasound"),
    ("Name the organ that filters blood.", "the kidney filters blood"),
    ("Is a CT scan an X-ray technique?", "yes"),
]
LONG_TEXT = "".join(f"Question: {q}\nAnswer: {a}\n" for q, a, _, _ in IMAGE_QA)


def with_published_specials(special_tokens: list[str], settings: dict) -> list[str]:
    """The tokenizer's special tokens plus any the published settings name, so the tiny vocabulary
    carries every token the real template and processor write."""
    named = [token for token in settings.get("special_tokens", {}).values() if token not in special_tokens]
    return special_tokens + named


def published_processing(family: str, special_tokens: list[str], image_keys: tuple[str, ...]):
    """(published settings, special tokens with the published ones added, chat template, the
    image processor's keyword arguments named ``image_keys`` from the published
    preprocessor_config) of a chat-template family."""
    settings = published_settings(family)
    image_config = settings["preprocessor_config"]
    return (settings, with_published_specials(special_tokens, settings), settings["chat_template"],
            {key: image_config[key] for key in image_keys})


def write_examples(root: Path) -> tuple[list[Example], list[Example]]:
    """The image examples (scans written as PNG files under ``root``) and the text-only ones."""
    root.mkdir(parents=True, exist_ok=True)
    images = []
    for i, (question, answer, spec, size) in enumerate(IMAGE_QA):
        path = root / f"scan{i}.png"
        path.write_bytes(png_bytes(render_scan(spec, size=64).resize(size, Image.BILINEAR)))
        images.append(Example(f"tiny::test::img{i}", i, path, question, answer))
    texts = [Example(f"tiny::test::txt{i}", len(IMAGE_QA) + i, None, q, a) for i, (q, a) in enumerate(TEXT_QA)]
    return images, texts


def _corpus() -> list[str]:
    lines = [q for q, *_ in IMAGE_QA + TEXT_QA] + [a for _, a, *_ in IMAGE_QA + TEXT_QA]
    return lines + [LONG_TEXT, "system user assistant model You are a helpful assistant."]


def train_tokenizer(special_tokens: list[str], *, add_bos: str | None = None, **named_tokens):
    """A byte-level BPE over the test corpus wrapped as a fast tokenizer.

    ``named_tokens`` are the tokenizer's named special tokens (pad_token, bos_token, ...) and
    its ``extra_special_tokens`` (image_token, ...), which processors read as attributes.
    ``add_bos`` makes the tokenizer prepend that token by default, as Gemma's does.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(), trainer)
    if add_bos is not None:
        bpe.post_processor = processors.TemplateProcessing(
            single=f"{add_bos} $A", pair=f"{add_bos} $A $B", special_tokens=[(add_bos, bpe.token_to_id(add_bos))]
        )
    named = {key: value for key, value in named_tokens.items() if key != "extra_special_tokens"}
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, extra_special_tokens=named_tokens.get("extra_special_tokens", {}), **named
    )


def _qwen2_text_config(tokenizer, hidden: int = TEXT_HIDDEN, layers: int = 2):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )


def _siglip_vision_config(image_size: int, patch_size: int):
    from transformers import SiglipVisionConfig

    return SiglipVisionConfig(
        image_size=image_size,
        patch_size=patch_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
    )


# ------------------------------------------------------------------------ Qwen2.5-VL

QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]


def build_qwen2_5_vl(out_dir: Path, max_side: int = 64, text_hidden: int = TEXT_HIDDEN, text_layers: int = 2,
                     published: bool = False):
    """``max_side``: images are resized to at most max_side^2 pixels, (max_side / 8)^2 image tokens
    (the perf suite uses 128: 256 tokens, as a real checkpoint gives a SLAKE scan); ``text_hidden``
    and ``text_layers`` size the language model. ``published``: Qwen2.5-VL-7B-Instruct's image
    processor (14-pixel patches merged 2x2, 3136..12845056 pixels) and chat template."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    specials, chat_template = QWEN_SPECIALS, QWEN_CHAT_TEMPLATE
    # 4-pixel patches merged 2x2: an image of h x w pixels gives (h/8) x (w/8) image tokens.
    sizes = {"patch_size": 4, "merge_size": 2, "temporal_patch_size": 2, "min_pixels": 16 * 16,
             "max_pixels": max_side**2}
    window_size = 16
    if published:
        settings = published_settings("qwen2_5_vl")
        specials, chat_template = with_published_specials(specials, settings), settings["chat_template"]
        config = settings["preprocessor_config"]
        sizes = {key: config[key] for key in (*sizes, "image_mean", "image_std")}
        # The vision tower's attention windows must hold whole merged patches: 4 of 28 px.
        window_size = 4 * sizes["patch_size"] * sizes["merge_size"]
    sizes["size"] = {"shortest_edge": sizes["min_pixels"], "longest_edge": sizes["max_pixels"]}
    tokenizer = train_tokenizer(specials, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"})
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(**sizes),
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(**sizes),
        chat_template=chat_template,
    )
    text = _qwen2_text_config(tokenizer, text_hidden, text_layers).to_dict()
    # mrope sections split the rotary half of a head (hidden / 4 heads / 2) over time, height, width.
    half = text_hidden // 8
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0,
                               "mrope_section": [half - 2 * (half // 4), half // 4, half // 4]}
    config = Qwen2_5_VLConfig(
        text_config=text,
        vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4,
                       "out_hidden_size": text_hidden, "patch_size": sizes["patch_size"],
                       "spatial_merge_size": sizes["merge_size"], "temporal_patch_size": sizes["temporal_patch_size"],
                       "window_size": window_size, "fullatt_block_indexes": [1]},
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
    )
    return _save(Qwen2_5_VLForConditionalGeneration(config), processor, out_dir)


# ------------------------------------------------------------------------ LLaVA-OneVision

LLAVA_OV_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n{% endif %}{% endfor %}"
    "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_llava_onevision(out_dir: Path, published: bool = False):
    """``published``: llava-onevision-qwen2-7b-ov-hf's processing: 384 px tiles of 14 px SigLIP
    patches (729 tokens each), the any-resolution grid up to 6 x 6 tiles, anyres_max_9."""
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>"]
    chat_template, image_kwargs = LLAVA_OV_CHAT_TEMPLATE, {}
    side, patch = 16, 4  # base tile 16 px of 4 px patches: 16 tokens per tile
    pinpoints = [[16, 16], [16, 32], [32, 16], [32, 32]]  # anyres grid of up to 2 x 2 tiles
    aspect_ratio = "anyres_max_9"
    if published:
        settings, specials, chat_template, image_kwargs = published_processing(
            "llava_onevision", specials, ("image_mean", "image_std", "resample", "do_pad"))
        processor_config = settings["processor_config"]
        side, patch = settings["vision_config"]["image_size"], settings["vision_config"]["patch_size"]
        pinpoints = settings["preprocessor_config"]["image_grid_pinpoints"]
        aspect_ratio = processor_config["vision_aspect_ratio"]
        assert processor_config["num_image_tokens"] == (side // patch) ** 2  # the tower must give what the processor counts
    tokenizer = train_tokenizer(specials, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                extra_special_tokens={"image_token": "<image>", "video_token": "<video>"})
    image_processor = LlavaOnevisionImageProcessor(
        size={"height": side, "width": side}, crop_size={"height": side, "width": side}, image_grid_pinpoints=pinpoints,
        **image_kwargs,
    )
    video_processor = LlavaOnevisionVideoProcessor(size={"height": side, "width": side})
    processor = LlavaOnevisionProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        num_image_tokens=(side // patch) ** 2,
        vision_feature_select_strategy="full",
        chat_template=chat_template,
        vision_aspect_ratio=aspect_ratio,
    )
    config = LlavaOnevisionConfig(
        vision_config=_siglip_vision_config(side, patch),
        text_config=_qwen2_text_config(tokenizer),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=pinpoints,
        vision_aspect_ratio=aspect_ratio,
    )
    return _save(LlavaOnevisionForConditionalGeneration(config), processor, out_dir)


# ------------------------------------------------------------------------ InternVL (hf format)

INTERNVL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<IMG_CONTEXT>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_internvl(out_dir: Path, published: bool = False):
    """``published``: InternVL3-8B-hf's processing: 448 px tiles (1 to 12, plus a thumbnail when
    there are several), 256 tokens per tile, and its chat template."""
    from transformers import (
        GotOcr2ImageProcessor,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
        InternVLVideoProcessor,
    )

    image_tokens = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
                    "video_token": "<video>"}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *image_tokens.values()]
    chat_template, image_kwargs = INTERNVL_CHAT_TEMPLATE, {"crop_to_patches": True, "min_patches": 1, "max_patches": 4}
    side, patch, seq_length = 16, 4, 4  # a 16 px tile is 4 x 4 patches, pixel-shuffled by 0.5 into 4 tokens
    if published:
        settings, specials, chat_template, image_kwargs = published_processing(
            "internvl", specials, ("image_mean", "image_std", "min_patches", "max_patches"))
        side = settings["preprocessor_config"]["size"]["height"]
        seq_length = settings["processor_config"]["image_seq_length"]
        # The processor writes image_seq_length tokens per tile; the tower gives (side / patch)^2 / 4
        # after the 0.5 pixel shuffle, so the patch size follows: 14 px for 448 px tiles and 256 tokens.
        patch = int(side / (4 * seq_length) ** 0.5)
    tokenizer = train_tokenizer(specials, pad_token="<|endoftext|>", eos_token="<|im_end|>", extra_special_tokens=image_tokens)
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size={"height": side, "width": side}, **image_kwargs),
        tokenizer=tokenizer,
        video_processor=InternVLVideoProcessor(size={"height": side, "width": side}),
        image_seq_length=seq_length,
        chat_template=chat_template,
    )
    config = InternVLConfig(
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "image_size": [side, side], "patch_size": [patch, patch]},
        text_config=_qwen2_text_config(tokenizer),
        image_token_id=tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>"),
        downsample_ratio=0.5,
        projector_hidden_act="gelu",
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    return _save(InternVLForConditionalGeneration(config), processor, out_dir)


# ------------------------------------------------------------------------ Gemma3 / MedGemma

GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<start_of_turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<start_of_image>"
    "{% elif part['type'] == 'text' %}{{ part['text'] | trim }}{% endif %}{% endfor %}{% endif %}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def build_gemma3(out_dir: Path, published: bool = False):
    """``published``: MedGemma's (Gemma 3's) processing: one 896 px image of 256 soft tokens
    (pan-and-scan off, as published) and the Gemma 3 chat template."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessor, Gemma3Processor

    image_tokens = {"image_token": "<image_soft_token>", "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>"}
    specials = ["<pad>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", *image_tokens.values()]
    chat_template, image_kwargs = GEMMA_CHAT_TEMPLATE, {}
    side, patch, tokens_per_image = 16, 4, 4  # 4 x 4 patches average-pooled to 2 x 2 soft tokens
    if published:
        settings, specials, chat_template, image_kwargs = published_processing(
            "gemma3", specials, ("image_mean", "image_std", "resample", "do_pan_and_scan"))
        side = settings["preprocessor_config"]["size"]["height"]
        tokens_per_image = settings["processor_config"]["image_seq_length"]
        # The real tower's 64 x 64 patches of 14 px are pooled 4 x 4 into 16 x 16 soft tokens; 56 px
        # patches give the same 16 x 16 without pooling, 16 times fewer patches for a CPU test.
        patch = side // int(tokens_per_image**0.5)
    # Gemma's tokenizer prepends <bos> by default while its chat template writes <bos> too.
    tokenizer = train_tokenizer(specials, add_bos="<bos>", pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                extra_special_tokens=image_tokens)
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessor(size={"height": side, "width": side}, **image_kwargs),
        tokenizer=tokenizer,
        chat_template=chat_template,
        image_seq_length=tokens_per_image,
    )
    config = Gemma3Config(
        text_config={"vocab_size": len(tokenizer), "hidden_size": TEXT_HIDDEN, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                     "sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"],
                     "max_position_embeddings": 4096, "pad_token_id": tokenizer.pad_token_id,
                     "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id},
        vision_config=_siglip_vision_config(side, patch),
        mm_tokens_per_image=tokens_per_image,
        image_token_id=tokenizer.convert_tokens_to_ids("<image_soft_token>"),
        boi_token_id=tokenizer.convert_tokens_to_ids("<start_of_image>"),
        eoi_token_id=tokenizer.convert_tokens_to_ids("<end_of_image>"),
    )
    return _save(Gemma3ForConditionalGeneration(config), processor, out_dir)


# ------------------------------------------------------------------------ LLaVA (the demo models)


def build_llava(out_dir: Path):
    """The offline demo models' architecture and prompt format (medexp.demo.models), which the
    generic adapter scores: a LlavaForConditionalGeneration with a Llama language model."""
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    from medexp.demo.models import CHAT_TEMPLATE, IMAGE_TOKEN, PATCH_SIZE, SPECIAL_TOKENS

    tokenizer = train_tokenizer(SPECIAL_TOKENS, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                extra_special_tokens={"image_token": IMAGE_TOKEN})
    side = 32  # 4 x 4 patches of 8 px: 16 image tokens, as in the demo
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side}),
        tokenizer=tokenizer, patch_size=PATCH_SIZE, vision_feature_select_strategy="default",
        num_additional_image_tokens=1, chat_template=CHAT_TEMPLATE,
    )
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(image_size=side, patch_size=PATCH_SIZE, hidden_size=32, intermediate_size=64,
                                       num_hidden_layers=2, num_attention_heads=4),
        text_config=LlamaConfig(vocab_size=len(tokenizer), hidden_size=TEXT_HIDDEN, intermediate_size=64,
                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id),
        image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    return _save(LlavaForConditionalGeneration(config), processor, out_dir)


# ------------------------------------------------------------------------ shared


def _save(model, processor, out_dir: Path) -> Path:
    import torch

    with torch.no_grad():
        # Default init (std 0.02) gives near-uniform predictions in which context, padding or
        # position mistakes would hide below the test tolerance; larger weights expose them.
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                parameter.normal_(0.0, 0.3)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir


@dataclass(frozen=True)
class TinyFamily:
    family: str  # the ModelFamily value the adapter is registered under
    build: Callable[[Path], Path]


FAMILIES = {
    "qwen2_5_vl": TinyFamily("qwen2_5_vl", build_qwen2_5_vl),
    "llava_onevision": TinyFamily("llava_onevision", build_llava_onevision),
    "internvl": TinyFamily("internvl", build_internvl),
    "gemma3": TinyFamily("gemma3", build_gemma3),
    "llava": TinyFamily("generic", build_llava),  # the demo models' architecture
}

# The same architectures with the published processor settings and chat templates: real image
# sizes make them slower, so they are built only by the tests that pin the published processing.
PUBLISHED_FAMILIES = {
    "qwen2_5_vl_published": TinyFamily("qwen2_5_vl", partial(build_qwen2_5_vl, published=True)),
    "llava_onevision_published": TinyFamily("llava_onevision", partial(build_llava_onevision, published=True)),
    "internvl_published": TinyFamily("internvl", partial(build_internvl, published=True)),
    "gemma3_published": TinyFamily("gemma3", partial(build_gemma3, published=True)),
}


def build(name: str, root: Path) -> Path:
    """Build the tiny checkpoint of a family under ``root`` (seeded, so identical every time)."""
    import torch

    torch.manual_seed(0)
    return {**FAMILIES, **PUBLISHED_FAMILIES}[name].build(root / name)
