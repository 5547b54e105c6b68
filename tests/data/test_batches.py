"""Batches (gptlab.data.batches): nanoGPT's random windows, reproducible from the
generator's state, reaching the last token."""

import numpy as np
import pytest
import torch

from gptlab.data.batches import get_batch
from gptlab.data.prepared import load_data
from gptlab.errors import UsageError


def test_get_batch_windows(alphabet_data):
    data = load_data(alphabet_data)
    g = torch.Generator().manual_seed(1)
    x, y = get_batch(data.train, 8, 16, g)
    assert x.shape == y.shape == (8, 16) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    # Reference: nanoGPT's per-row gather with the same offsets.
    offsets = torch.randint(len(data.train) - 16, (8,), generator=torch.Generator().manual_seed(1))
    tokens = torch.from_numpy(data.train.astype(np.int64))
    assert torch.equal(x, torch.stack([tokens[i:i + 16] for i in offsets]))
    assert torch.equal(y, torch.stack([tokens[i + 1:i + 17] for i in offsets]))


def test_get_batch_is_reproducible_from_generator_state(alphabet_data):
    data = load_data(alphabet_data)
    g = torch.Generator().manual_seed(123)
    get_batch(data.train, 4, 8, g)
    state = g.get_state()  # what the trainer saves in its checkpoint
    expected = get_batch(data.train, 4, 8, g)
    following = get_batch(data.train, 4, 8, g)
    g2 = torch.Generator()
    g2.set_state(state)
    replay = get_batch(data.train, 4, 8, g2)
    assert torch.equal(replay[0], expected[0]) and torch.equal(replay[1], expected[1])
    assert not torch.equal(expected[0], following[0])


def test_get_batch_reaches_the_last_token():
    tokens = np.arange(5, dtype=np.uint16)
    x, y = get_batch(tokens, 64, 4, torch.Generator().manual_seed(0))
    # Only one window of 4 (+1 target) fits in 5 tokens.
    assert x.tolist() == [[0, 1, 2, 3]] * 64 and y.tolist() == [[1, 2, 3, 4]] * 64
    with pytest.raises(UsageError, match="too few for one block of 5"):
        get_batch(tokens, 1, 5, torch.Generator())
