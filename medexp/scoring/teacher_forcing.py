"""Teacher-forced log-probabilities and Min-K%++ z values from a batch of logits."""

from __future__ import annotations

import torch


def answer_logit_mask(answer_mask: torch.Tensor) -> torch.Tensor:
    """The positions whose logits predict an answer token: ``logits[b, t]`` predicts token ``t + 1``.

    ``answer_mask[b, t]`` marks answer tokens of row b (prompt and padding positions are False,
    like labels of -100). Only these positions need a projection onto the vocabulary (see
    :func:`kept_positions` for how a model is asked for them).
    """
    keep = torch.zeros_like(answer_mask)
    keep[:, :-1] = answer_mask[:, 1:]
    return keep


def kept_positions(keep: torch.Tensor) -> torch.Tensor:
    """The sequence positions any row of ``keep`` needs, ascending: a 1-D ``logits_to_keep``.

    A boolean (batch, length) ``logits_to_keep`` is only understood by recent transformers
    (``slice_logits_to_keep``); every 4.x/5.x model takes a 1-D tensor of positions, kept for every
    row, so that is what is passed, and :func:`kept_rows` picks each row's own positions after."""
    return keep.any(dim=0).nonzero().squeeze(1)


def kept_rows(logits: torch.Tensor, keep: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The logits of ``keep``'s positions, one row each in row-major order, from a forward given
    ``logits_to_keep=positions`` (or one that ignored it and returned every position)."""
    if logits.shape[1] == positions.numel():
        return logits[keep[:, positions]]
    return logits[keep]


def answer_token_scores(answer_logits: torch.Tensor, input_ids: torch.Tensor, answer_mask: torch.Tensor):
    """Per-token log p and Min-K%++ z of the tokens selected by ``answer_mask``.

    ``answer_logits`` are the logits at the positions of :func:`answer_logit_mask` (answer tokens x
    vocabulary, row-major). Returns two lists (one entry per row) of float64 tensors:
    log p(x_t | x_<t) and z_t = (log p(x_t) - mu_t) / sigma_t with mu_t and sigma_t^2 the mean and
    variance of log p over the full vocabulary under p.
    """
    target_mask = answer_mask[:, 1:]
    token_logprob, z = label_scores(answer_logits, input_ids[:, 1:][target_mask])
    counts = target_mask.sum(dim=1).tolist()
    return list(token_logprob.split(counts)), list(z.split(counts))


def label_scores(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(target) and its Min-K%++ z under the softmax of each row of ``logits`` (float64).

    ``logits`` is (rows, outcomes): a vocabulary for a token, the classes for an image classifier.
    z = (log p(target) - mu) / sigma, mu and sigma^2 the mean and variance of log p under p.
    """
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    logprob = log_probs.gather(-1, targets[:, None]).squeeze(-1)
    probs = log_probs.exp()
    mu = (probs * log_probs).sum(-1)
    variance = (probs * log_probs.square()).sum(-1) - mu.square()
    return logprob, (logprob - mu) / variance.clamp_min(1e-12).sqrt()


def sequence_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, target_mask: torch.Tensor) -> torch.Tensor:
    """Sum of log p(x_t | x_<t) over positions where ``target_mask[b, t]`` (t >= 1) is True."""
    # cross_entropy avoids materialising a second (batch, length, vocab) tensor.
    shifted = logits[:, :-1].float()
    token_logprob = -torch.nn.functional.cross_entropy(
        shifted.reshape(-1, shifted.shape[-1]), input_ids[:, 1:].reshape(-1), reduction="none"
    ).view(input_ids.shape[0], -1)
    return (token_logprob.double() * target_mask[:, 1:]).sum(dim=1)
