"""What teacher-forced scoring of a benchmark will cost a model, before any weights are read.

The architecture comes from the checkpoint's ``config.json``, built on PyTorch's meta device
(shapes, no memory, no weights); the tokens of an example from the checkpoint's processor, as the
family's adapter encodes it (:func:`medexp.models.preview.prompt_preview`). From them:

- forward FLOPs of one example: 2 x (language-model parameters, the input embedding table left
  out, a lookup) x (prompt + answer tokens) + 2 x (vision parameters) x (patches the image tower
  reads) + the attention products 2 x layers x tokens^2 x attention width (causal); with shared
  prefixes, the part up to the image's last token once per image and the rest per question;
- memory: the weights in ``model.dtype``, plus the key/value cache of a full batch (the forward
  keeps one per layer).

These are estimates: they leave out normalisations, activations and the vocabulary projection
(only answer positions are projected), and the time they turn into depends on the throughput a
GPU reaches, which the caller states (``python -m medexp.plan``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from medexp.benchmarks.base import Example
from medexp.config.schemas import DType

# Parameter names of the image side: vision towers, Q-Formers and their query tokens, projectors.
VISION_PARAMETERS = re.compile(
    r"(^|\.)(visual|vision_tower|vision_model|qformer|query_tokens|multi_modal_projector|language_projection)(\.|$)")
DTYPE_BYTES = {DType.float32: 4, DType.float16: 2, DType.bfloat16: 2}


@dataclass(frozen=True)
class Architecture:
    """Parameter counts and attention shape of a checkpoint, read from its config."""

    params: int
    vision_params: int
    embedding_params: int
    layers: int
    attention_width: int  # query heads x head size
    kv_width: int  # key/value heads x head size

    @property
    def language_params(self) -> int:
        """Parameters a text token goes through (the embedding table is a lookup)."""
        return self.params - self.vision_params - self.embedding_params


@dataclass(frozen=True)
class ExampleCost:
    """One example's tokens and forward FLOPs, whole and split at its image prefix."""

    tokens: int  # prompt (image tokens included) and answer, as the model receives them
    image_tokens: int
    vision_patches: int
    flops: float
    # With shared prefixes (model.shared_prefix on a family that supports it) the tokens up to the
    # image's last token run once per image, with the pixels, and each question only the rest.
    # None: the family scores every example whole.
    prefix_tokens: int | None
    prefix_flops: float | None

    def shared_flops(self, examples: int, images: int) -> float:
        """FLOPs of ``examples`` questions on ``images`` images: every example whole without
        shared prefixes, else one prefix per image and a continuation per example (its attention
        still reads the whole prefix)."""
        if self.prefix_flops is None:
            return examples * self.flops
        return images * self.prefix_flops + examples * (self.flops - self.prefix_flops)

    def shared_tokens(self, examples: int, images: int) -> int:
        """Tokens that go through the model for ``examples`` questions on ``images`` images."""
        if self.prefix_tokens is None:
            return examples * self.tokens
        return images * self.prefix_tokens + examples * (self.tokens - self.prefix_tokens)


def architecture(model_cfg, location: str) -> Architecture:
    """The checkpoint's architecture from its config alone (the model is built on the meta device:
    no weights are read and no memory is taken)."""
    import transformers

    common = {"revision": model_cfg.revision, "trust_remote_code": bool(model_cfg.trust_remote_code)}
    config = transformers.AutoConfig.from_pretrained(location, **common)
    return architecture_of_config(config, getattr(model_cfg.family, "value", model_cfg.family),
                                  trust_remote_code=common["trust_remote_code"])


def architecture_of_config(config, family: str, trust_remote_code: bool = False) -> Architecture:
    """The architecture of a transformers config, built on the meta device by the family's model
    class (or the remote code's AutoModelForCausalLM that its ``auto_map`` names)."""
    import torch
    import transformers

    from medexp.models import scorer_class

    auto_map = getattr(config, "auto_map", None) or {}
    class_name = "AutoModelForCausalLM" if "AutoModelForCausalLM" in auto_map else scorer_class(family).MODEL_CLASS
    model_class = getattr(transformers, class_name)
    with torch.device("meta"):
        if class_name.startswith("Auto"):
            model = model_class.from_config(config, trust_remote_code=trust_remote_code)
        else:
            model = model_class(config)
    named = dict(model.named_parameters())
    text = config.get_text_config()
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return Architecture(
        params=sum(parameter.numel() for parameter in named.values()),
        vision_params=sum(parameter.numel() for name, parameter in named.items() if VISION_PARAMETERS.search(name)),
        embedding_params=model.get_input_embeddings().weight.numel(),
        layers=text.num_hidden_layers,
        attention_width=heads * head_dim,
        kv_width=(getattr(text, "num_key_value_heads", None) or heads) * head_dim,
    )


def example_cost(arch: Architecture, preview: dict[str, Any]) -> ExampleCost:
    """Forward FLOPs of one example from its token counts (``prompt_preview``'s summary)."""
    tokens, prefix = preview["total_tokens"], preview["image_prefix_tokens"]

    def flops(count: int) -> float:  # the first `count` tokens, with the pixels
        return float(2 * arch.language_params * count + 2 * arch.vision_params * preview["vision_patches"]
                     + 2 * arch.layers * count**2 * arch.attention_width)

    shared = preview["shared_prefix"] and prefix is not None
    return ExampleCost(tokens, preview["image_tokens"], preview["vision_patches"], flops(tokens),
                       prefix if shared else None, flops(prefix) if shared else None)


def memory_bytes(arch: Architecture, model_cfg, example_tokens: int) -> int:
    """Weights in ``model.dtype`` plus the key/value cache of one full batch: ``token_budget``
    tokens, or ``batch_size`` examples of ``example_tokens`` without a budget."""
    per_param = DTYPE_BYTES[DType(model_cfg.dtype)]
    batch_tokens = int(model_cfg.token_budget or int(model_cfg.batch_size) * example_tokens)
    return arch.params * per_param + 2 * arch.layers * arch.kv_width * batch_tokens * per_param


def scoring_cost(model_cfg, location: str, example: Example) -> tuple[Architecture, ExampleCost]:
    """The architecture of the checkpoint and the cost of one representative example."""
    from medexp.models.preview import prompt_preview

    arch = architecture(model_cfg, location)
    return arch, example_cost(arch, prompt_preview(model_cfg, location, example))
