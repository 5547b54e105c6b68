"""Evaluation (gptlab.inference.evaluate) against transformers running Hugging Face's
sliding-window perplexity recipe ("Perplexity of fixed-length models") on the same weights,
the window arithmetic, and the per-character and per-byte figures. The `gptlab eval`
command: tests/cli/test_eval.py."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch

from gptlab.convert import hf
from gptlab.data.tokenizer import CharTokenizer
from gptlab.errors import UsageError
from gptlab.inference.evaluate import score_ids, score_positions, score_text, windows
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model.positional import ContextWarning

pytestmark = pytest.mark.usefixtures("one_thread")


@torch.no_grad()
def hf_guide_nll(model, ids: torch.Tensor, max_length: int, stride: int) -> tuple[float, int]:
    """The guide's loop: labels -100 outside each window's new tokens, transformers' own
    shifted mean loss times the number of tokens it averaged over. (The guide counts those
    as the valid labels minus one per window; but in every window after the first, the
    label the shift drops is already -100, so that undercounts by one per window. Here the
    count is what the model really averaged over: the valid labels after the shift.)"""
    seq_len = ids.size(1)
    nll_sum, n_tokens, prev_end = 0.0, 0, 0
    for begin in range(0, seq_len, stride):
        end = min(begin + max_length, seq_len)
        trg_len = end - prev_end
        input_ids = ids[:, begin:end]
        target_ids = input_ids.clone()
        target_ids[:, :-trg_len] = -100
        loss = model(input_ids, labels=target_ids).loss
        num_valid = (target_ids[:, 1:] != -100).sum().item()  # after transformers' shift
        nll_sum += loss.double().item() * num_valid
        n_tokens += num_valid
        prev_end = end
        if end == seq_len:
            break
    return nll_sum, n_tokens


@pytest.fixture(scope="module")
def models(random_hf_model):
    theirs = random_hf_model("gpt2-tied-3heads")  # 64 positions, widened weights
    return theirs, hf.from_hf(theirs)


@pytest.mark.oracle
@pytest.mark.parametrize("context, stride", [(64, 64), (64, 32), (64, 17), (32, 1), (20, 20)])
def test_equals_the_hugging_face_recipe(models, context, stride):
    theirs, ours = models
    ids = torch.randint(0, 101, (1, 300), generator=torch.Generator().manual_seed(1))
    expected, count = hf_guide_nll(theirs, ids, context, stride)
    nll, scored = score_ids(ours, ids[0], context=context, stride=stride, batch_size=3)
    assert scored == count
    assert nll == pytest.approx(expected, rel=1e-5)


def test_every_token_after_the_first_is_scored_once():
    for n, context, stride in [(300, 64, 32), (300, 64, 1), (65, 64, 10), (7, 64, 32)]:
        seen = []
        for begin, end, first in windows(n, context, stride):
            assert end - begin <= context
            seen += range(begin + first, end)
        assert seen == list(range(1, n))  # each once, in order
    # At stride = context, each window's first token is not scored (as in the guide).
    seen = [t for b, e, f in windows(200, 64, 64) for t in range(b + f, e)]
    assert 64 not in seen and 128 not in seen and len(seen) == 199 - 3


def test_score_text_figures():
    class Uniform(torch.nn.Module):
        """Every one of V tokens equally likely: loss ln V, bits per token log2 V."""
        config = type("C", (), {"block_size": 16})()

        def __init__(self, vocab: int):
            super().__init__()
            self.vocab, self.w = vocab, torch.nn.Parameter(torch.zeros(1))

        def forward(self, idx):
            return torch.zeros(*idx.shape, self.vocab) + self.w, None

    tokenizer = CharTokenizer.from_text("abcdefghé")
    text = "abcdefgh" * 20 + "é"  # 161 characters, 162 bytes
    score = score_text(Uniform(tokenizer.vocab_size), tokenizer, text, context=16, stride=8)
    assert (score.scored, score.tokens, score.chars, score.bytes) == (160, 161, 161, 162)
    assert score.loss == pytest.approx(math.log(9))
    assert score.bits_per_token == pytest.approx(math.log2(9))
    assert score.perplexity == pytest.approx(9)
    assert score.bits_per_char == pytest.approx(math.log2(9))  # one token per character
    assert score.bits_per_byte == pytest.approx(math.log2(9) * 161 / 162)



def small(pos_encoding: str) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=11, block_size=16, n_layer=1, n_head=2, n_embd=16,
                         pos_encoding=pos_encoding)).eval()


@pytest.mark.parametrize("context, stride", [(16, 16), (16, 4), (48, 48), (48, 1)])
def test_by_position_sums_are_the_overall_score(context, stride):
    """The by-position detail holds every scored token once: its sums are score_ids's,
    and buckets or spans weighted by their tokens give the mean loss back."""
    model, ids = small("alibi"), torch.randint(0, 11, (300,), generator=torch.Generator()
                                                .manual_seed(1))
    with pytest.warns(ContextWarning) if context > 16 else contextlib.nullcontext():
        positions = score_positions(model, ids, context, stride)
        nll, scored = score_ids(model, ids, context, stride)
    assert sum(positions.scored) == scored == 299 - (len(windows(300, context, stride)) - 1
                                                       if stride == context else 0)
    assert math.fsum(positions.nll) == pytest.approx(nll, rel=1e-12)
    assert positions.scored[0] == 0  # nothing predicts a window's first token
    starts = [s for s in (0, 16, 32) if s < context]  # the trained positions, then beyond
    for parts in (positions.buckets(5), positions.spans(starts)):
        assert sum(p["tokens"] for p in parts) == scored
        mean = math.fsum(p["loss"] * p["tokens"] for p in parts if p["tokens"]) / scored
        assert mean == pytest.approx(nll / scored, rel=1e-12)
    if stride == context:  # non-overlapping: every position after the first about as often
        assert min(positions.scored[1:]) >= max(positions.scored[1:]) - 1
    else:  # sliding: after the first window, only the last `stride` positions are scored
        assert sum(positions.scored[1: context - stride]) <= context - stride - 1


def test_a_longer_context_warns_and_learned_positions_refuse():
    ids = torch.arange(100) % 11
    with pytest.warns(ContextWarning, match="never saw positions 16..63"):
        score_positions(small("rope"), ids, context=64)
    with pytest.raises(UsageError, match="no row for position 16"):
        score_positions(small("learned"), ids, context=64)
    with pytest.raises(UsageError, match="spans must start at 0"):
        score_positions(small("rope"), ids, context=16).spans([4, 8])
