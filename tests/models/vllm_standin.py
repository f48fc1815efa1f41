"""A stand-in for vLLM's offline engine, for testing the vLLM scorer where vLLM cannot be installed.

It follows vLLM's documented types: ``LLM.generate(prompts, sampling_params, use_tqdm=...)`` takes
TokensPrompt dicts (``prompt_token_ids``, optional ``multi_modal_data={"image": PIL}``) and returns
one ``RequestOutput`` per prompt, whose ``prompt_token_ids`` are the prompt with each image
placeholder expanded and whose ``prompt_logprobs`` hold ``None`` for the first position and then,
per position, ``{token_id: Logprob(logprob, rank, decoded_token)}`` for the prompt's own token
(plus the top ``k`` when ``prompt_logprobs=k > 0``). The log-probs come from a tiny transformers
model run on the whole prompt, so they can be compared with the transformers scorer's.

The placeholder is expanded as vLLM does for a token prompt, by the checkpoint's own processor:
the token ids are decoded back to text (a round trip the stand-in checks) and processed with the image.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from medexp.models.vllm_scorer import Engine

# Processor outputs aligned with the input ids (image tokens marked), widened over generated tokens.
PER_TOKEN_KEYS = {"token_type_ids", "mm_token_type_ids"}


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    prompt_logprobs: list[dict[int, Logprob] | None] | None
    outputs: list[CompletionOutput]
    finished: bool = True


@dataclass
class SamplingParams:
    max_tokens: int | None = 16
    temperature: float = 1.0
    prompt_logprobs: int | None = None


@dataclass
class StandInLLM:
    """``vllm.LLM`` over a tiny checkpoint directory, greedy only."""

    location: str
    requests: list[dict] = field(default_factory=list)

    def __post_init__(self):
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.processor = AutoProcessor.from_pretrained(self.location)
        self.tokenizer = self.processor.tokenizer
        self.model = AutoModelForImageTextToText.from_pretrained(self.location).eval()

    def generate(self, prompts, sampling_params: SamplingParams, use_tqdm: bool = True) -> list[RequestOutput]:
        assert sampling_params.temperature == 0.0, "the stand-in decodes greedily only"
        self.requests.extend(prompts)
        return [self._request(str(index), prompt, sampling_params) for index, prompt in enumerate(prompts)]

    def _request(self, request_id: str, prompt: dict, params: SamplingParams) -> RequestOutput:
        inputs = self._inputs(list(prompt["prompt_token_ids"]), prompt.get("multi_modal_data", {}).get("image"))
        ids = inputs["input_ids"][0].tolist()
        log_probs = self._log_probs(inputs)
        prompt_logprobs = None
        if params.prompt_logprobs is not None:
            prompt_logprobs = [None] + [self._position(log_probs[t - 1], ids[t], params.prompt_logprobs)
                                        for t in range(1, len(ids))]
        generated, cumulative = [], 0.0
        for step in range(params.max_tokens):
            token = int(log_probs[-1].argmax())
            generated.append(token)
            cumulative += float(log_probs[-1][token])
            if step + 1 == params.max_tokens:
                break
            width = len(ids) + len(generated)
            inputs = {**inputs, "input_ids": torch.tensor([ids + generated]),
                      "attention_mask": torch.ones((1, width), dtype=torch.long)}
            for key in PER_TOKEN_KEYS & inputs.keys():  # generated tokens are text: type 0
                inputs[key] = torch.nn.functional.pad(inputs[key], (0, width - inputs[key].shape[1]))
            log_probs = self._log_probs(inputs)
        text = self.tokenizer.decode(generated, skip_special_tokens=True)
        completion = CompletionOutput(0, text, generated, cumulative, None, "length")
        return RequestOutput(request_id, None, ids, prompt_logprobs, [completion])

    def _inputs(self, token_ids: list[int], image) -> dict:
        if image is None:
            return {"input_ids": torch.tensor([token_ids]),
                    "attention_mask": torch.ones((1, len(token_ids)), dtype=torch.long)}
        text = self.tokenizer.decode(token_ids, skip_special_tokens=False)
        assert self.tokenizer(text, add_special_tokens=False)["input_ids"] == token_ids, "ids do not round-trip"
        return dict(self.processor(text=[text], images=[[image]], add_special_tokens=False, return_tensors="pt"))

    def _log_probs(self, inputs: dict) -> torch.Tensor:
        with torch.inference_mode():
            return torch.log_softmax(self.model(**inputs).logits[0].double(), dim=-1)

    def _position(self, log_probs: torch.Tensor, token: int, top: int) -> dict[int, Logprob]:
        def entry(token_id: int) -> Logprob:
            value = log_probs[token_id]
            return Logprob(float(value), int((log_probs > value).sum()) + 1, self.tokenizer.decode([token_id]))

        chosen = {int(t): entry(int(t)) for t in log_probs.topk(top).indices} if top > 0 else {}
        return {token: entry(token), **chosen}


def standin_engine(model_cfg, location: str) -> Engine:
    """The scorer's engine factory, with the stand-in in place of vLLM."""
    return Engine(StandInLLM(location), SamplingParams)
