"""The losses a model must beat (gptlab.experiments.baselines): the bigram table's loss is
the conditional entropy of the next token given the current one, recomputed here from
counted pairs; properties that must hold (a deterministic text costs nothing, independent
tokens cost their entropy, the table never costs more than the unigram entropy)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from gptlab.experiments.baselines import bigram_loss, text_baselines, uniform_loss


def _reference(ids: list[int]) -> float:
    """-1/n sum over the n pairs of log P(next | current), P from the pairs' own counts."""
    pairs = Counter(zip(ids, ids[1:], strict=False))
    firsts = Counter(ids[:-1])
    n = len(ids) - 1
    return -sum(count * math.log(count / firsts[a]) for (a, _), count in pairs.items()) / n


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_bigram_loss_is_the_tables_loss_on_its_own_text(seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 7, 500)
    ids[::3] = 2  # some structure: every third token is known
    assert bigram_loss(ids) == pytest.approx(_reference(ids.tolist()), rel=1e-12)


def test_a_text_the_current_token_decides_costs_nothing():
    assert bigram_loss([0, 1, 2] * 50) == pytest.approx(0.0, abs=1e-12)


def test_independent_tokens_cost_their_entropy_and_the_table_never_more():
    ids = np.random.default_rng(0).integers(0, 5, 200_000)
    assert bigram_loss(ids) == pytest.approx(math.log(5), abs=2e-3)
    assert uniform_loss(5) == math.log(5)
    text = np.random.default_rng(1).choice(4, 5000, p=[0.7, 0.1, 0.1, 0.1])
    counts = np.bincount(text) / len(text)
    assert bigram_loss(text) <= -(counts * np.log(counts)).sum() + 1e-12


def test_the_baselines_of_a_split_and_bad_input():
    assert text_baselines([0, 1, 0, 1], 3) == {"uniform": math.log(3), "bigram": 0.0}
    for bad in ([1], [[0, 1], [1, 0]]):
        with pytest.raises(ValueError, match="at least 2"):
            bigram_loss(bad)
