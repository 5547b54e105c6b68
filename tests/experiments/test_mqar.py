"""MQAR rows (gptlab.experiments.mqar): distinct keys, every answer the value its key was
paired with, targets only on answers, seeded, Zoology's pairs per length; accuracy."""

from __future__ import annotations

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.experiments.mqar import accuracy, mqar_batch, pairs_for


@pytest.mark.parametrize("length", [16, 17, 64])
def test_every_answer_is_the_value_its_key_was_paired_with(length):
    pairs, keys, values = 4, 6, 5
    x, y = mqar_batch(3, length, pairs, keys, values, torch.Generator().manual_seed(1))
    assert x.shape == y.shape == (3, length)
    for row_x, row_y in zip(x.tolist(), y.tolist(), strict=True):
        paired = dict(zip(row_x[0:2 * pairs:2], row_x[1:2 * pairs:2], strict=True))
        assert len(paired) == pairs  # distinct keys
        assert all(0 <= k < keys for k in paired) and all(
            keys <= v < keys + values for v in paired.values())
        answered = [i for i, t in enumerate(row_y) if t >= 0]
        assert answered == list(range(2 * pairs, length, 2))
        for i in answered:
            assert row_x[i] in paired and row_y[i] == paired[row_x[i]]
            if i + 1 < length:
                assert row_x[i + 1] == row_y[i]  # the text goes on with the answer


def test_rows_are_seeded():
    a = mqar_batch(2, 32, 2, 4, 4, torch.Generator().manual_seed(3))
    b = mqar_batch(2, 32, 2, 4, 4, torch.Generator().manual_seed(3))
    assert all(torch.equal(p, q) for p, q in zip(a, b, strict=True))


def test_the_pairs_grow_with_the_length_as_zoologys():
    assert [pairs_for(n) for n in (64, 128, 256)] == [4, 8, 16]


def test_impossible_rows_are_refused_by_name():
    with pytest.raises(UsageError, match="pairs"):
        mqar_batch(1, 32, 5, 4, 4, torch.Generator())
    with pytest.raises(UsageError, match="length 8"):
        mqar_batch(1, 8, 4, 4, 4, torch.Generator())


def test_accuracy_is_the_share_of_answers_right():
    y = torch.tensor([[-1, 2, -1, 0]])
    logits = torch.nn.functional.one_hot(torch.tensor([[1, 2, 1, 1]]), 3).float()
    assert accuracy(logits, y) == 0.5
