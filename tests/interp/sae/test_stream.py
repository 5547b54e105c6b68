"""Activations streamed (gptlab.interp.sae.stream): a step's windows are the same whenever
it is read and differ between steps, and its batch is the site's activations at every
position of those windows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.sae import stream
from gptlab.interp.sae.sites import read_site

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_a_steps_batch_is_the_same_whenever_read_and_is_the_sites_activations(
        preset_model):
    model = preset_model("tiny-gpt2", seed=0)
    tokens = np.random.default_rng(0).integers(0, 97, 3000).astype(np.uint16)
    first = stream.window_offsets(len(tokens), 32, 4, seed=5, step=7)
    assert torch.equal(first, stream.window_offsets(len(tokens), 32, 4, seed=5, step=7))
    assert not torch.equal(first, stream.window_offsets(len(tokens), 32, 4, seed=5, step=8))
    assert int(first.max()) <= 3000 - 32
    x, y = stream.batch(model, tokens, "mlp_out", 1, 32, 4, seed=5, step=7)
    windows = torch.stack([torch.as_tensor(tokens[o: o + 32].astype(np.int64))
                           for o in first.tolist()])
    expected, _ = read_site(model, windows, "mlp_out", 1)
    assert x.shape == (4 * 32, 32) and torch.equal(x, expected.reshape(-1, 32))
    assert torch.equal(x, y)
    with pytest.raises(UsageError, match="fewer than one window"):
        stream.window_offsets(10, 32, 4, 0, 0)
