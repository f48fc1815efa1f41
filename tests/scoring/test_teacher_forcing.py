"""answer_logit_mask / answer_token_scores / sequence_logprobs against plain-Python reference computations."""

from __future__ import annotations

import math

import pytest
import torch

from medexp.scoring.teacher_forcing import answer_logit_mask, answer_token_scores, sequence_logprobs

BATCH, LENGTH, VOCAB = 3, 9, 17


@pytest.fixture
def batch():
    generator = torch.Generator().manual_seed(1234)
    # A wide logit scale keeps the distributions far from uniform, so mistakes show.
    logits = torch.randn(BATCH, LENGTH, VOCAB, generator=generator, dtype=torch.float64) * 3.0
    input_ids = torch.randint(0, VOCAB, (BATCH, LENGTH), generator=generator)
    answer_mask = torch.zeros(BATCH, LENGTH, dtype=torch.bool)
    answer_mask[0, 5:9] = True  # answer at the very end
    answer_mask[1, 3:5] = True  # answer followed by padding
    answer_mask[2, 7:8] = True  # one-token answer
    return logits, input_ids, answer_mask


def _scores(logits: torch.Tensor, input_ids: torch.Tensor, answer_mask: torch.Tensor):
    """answer_token_scores of the logits a model returns for ``logits_to_keep=answer_logit_mask``."""
    return answer_token_scores(logits[answer_logit_mask(answer_mask)], input_ids, answer_mask)


def _manual_position(logits_row: torch.Tensor, target: int) -> tuple[float, float]:
    """log p(target) and Min-K%++ z from one logits vector, with Python floats only."""
    values = [float(v) for v in logits_row]
    top = max(values)
    log_norm = top + math.log(sum(math.exp(v - top) for v in values))
    log_p = [v - log_norm for v in values]
    p = [math.exp(lp) for lp in log_p]
    mu = 0.0
    for pv, lpv in zip(p, log_p):
        mu += pv * lpv
    second = 0.0
    for pv, lpv in zip(p, log_p):
        second += pv * lpv * lpv
    sigma = math.sqrt(second - mu * mu)
    return log_p[target], (log_p[target] - mu) / sigma


def test_answer_token_scores_match_manual_loop(batch):
    logits, input_ids, answer_mask = batch
    logprobs, zs = _scores(logits, input_ids, answer_mask)
    assert len(logprobs) == len(zs) == BATCH
    for row in range(BATCH):
        positions = answer_mask[row].nonzero().flatten().tolist()
        assert len(logprobs[row]) == len(zs[row]) == len(positions)
        assert logprobs[row].dtype == zs[row].dtype == torch.float64
        for k, t in enumerate(positions):
            # logits at t - 1 predict the token at t.
            expected_logp, expected_z = _manual_position(logits[row, t - 1], int(input_ids[row, t]))
            assert logprobs[row][k].item() == pytest.approx(expected_logp, abs=1e-9)
            assert zs[row][k].item() == pytest.approx(expected_z, abs=1e-9)


def test_answer_token_scores_use_shifted_positions(batch):
    """The unshifted gather (logits[t] for token t) gives other numbers: the test can fail."""
    logits, input_ids, answer_mask = batch
    logprobs, _ = _scores(logits, input_ids, answer_mask)
    t = 6
    wrong = torch.log_softmax(logits[0, t], -1)[input_ids[0, t]].item()
    right = torch.log_softmax(logits[0, t - 1], -1)[input_ids[0, t]].item()
    assert logprobs[0][1].item() == pytest.approx(right, abs=1e-9)
    assert abs(wrong - right) > 1e-3


def test_answer_token_scores_vectorised_reference(batch):
    logits, input_ids, answer_mask = batch
    logprobs, zs = _scores(logits, input_ids, answer_mask)
    log_p = torch.log_softmax(logits[:, :-1], -1)
    gathered = log_p.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    p = log_p.exp()
    mu = (p * log_p).sum(-1)
    sigma = ((p * log_p**2).sum(-1) - mu**2).sqrt()
    z = (gathered - mu) / sigma
    mask = answer_mask[:, 1:]
    for row in range(BATCH):
        torch.testing.assert_close(logprobs[row], gathered[row][mask[row]], rtol=0, atol=1e-10)
        torch.testing.assert_close(zs[row], z[row][mask[row]], rtol=0, atol=1e-10)


def test_answer_logit_mask_keeps_exactly_the_predicting_positions(batch):
    _, _, answer_mask = batch
    expected = {(row, t - 1) for row, t in answer_mask.nonzero().tolist()}
    assert {tuple(position) for position in answer_logit_mask(answer_mask).nonzero().tolist()} == expected


def test_answer_token_scores_ignore_padding_and_prompt_logits(batch):
    """Changing logits outside the kept positions leaves the scores unchanged."""
    logits, input_ids, answer_mask = batch
    before = _scores(logits, input_ids, answer_mask)
    altered = logits.clone()
    predicting = answer_logit_mask(answer_mask)
    altered[~predicting] = torch.randn_like(altered[~predicting]) * 5
    after = _scores(altered, input_ids, answer_mask)
    for a, b in zip(before[0] + before[1], after[0] + after[1]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_answer_token_scores_accept_float32_logits(batch):
    logits, input_ids, answer_mask = batch
    ref_lp, ref_z = _scores(logits, input_ids, answer_mask)
    lp, z = _scores(logits.float(), input_ids, answer_mask)
    for a, b in zip(ref_lp + ref_z, lp + z):
        assert b.dtype == torch.float64
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_sequence_logprobs_match_manual_sum(batch):
    logits, input_ids, _ = batch
    target_mask = torch.zeros(BATCH, LENGTH, dtype=torch.bool)
    target_mask[0, 1:] = True
    target_mask[1, 4:7] = True
    target_mask[2, 2:3] = True
    target_mask[2, 8:9] = True
    got = sequence_logprobs(logits, input_ids, target_mask)
    assert got.shape == (BATCH,)
    for row in range(BATCH):
        expected = 0.0
        for t in range(1, LENGTH):
            if target_mask[row, t]:
                expected += _manual_position(logits[row, t - 1], int(input_ids[row, t]))[0]
        assert got[row].item() == pytest.approx(expected, abs=1e-4)


def test_sequence_logprobs_position_zero_is_never_scored(batch):
    logits, input_ids, _ = batch
    mask = torch.zeros(BATCH, LENGTH, dtype=torch.bool)
    mask[:, 0] = True
    assert sequence_logprobs(logits, input_ids, mask).abs().max().item() == 0.0
    mask[:, 1] = True
    assert (sequence_logprobs(logits, input_ids, mask) < 0).all()


def test_kept_rows_from_a_1d_request_equal_the_mask_rows_of_the_full_logits():
    # Older transformers models slice hidden_states[:, positions, :] with a 1-D logits_to_keep only;
    # each row's own positions are then picked from that, in the mask's row-major order.
    import torch

    from medexp.scoring.teacher_forcing import kept_positions, kept_rows

    full = torch.randn(3, 7, 5)
    keep = torch.zeros(3, 7, dtype=torch.bool)
    keep[0, [2, 3]] = True
    keep[1, [5]] = True
    keep[2, [3, 4, 5]] = True
    positions = kept_positions(keep)
    assert positions.tolist() == [2, 3, 4, 5]
    assert torch.equal(kept_rows(full[:, positions, :], keep, positions), full[keep])
    assert torch.equal(kept_rows(full, keep, positions), full[keep])  # a forward that ignored the request
