"""The KV cache (gptlab.model.kv_cache): decoding in pieces through it equals the full
forward pass, for a spread of architectures; it refuses to overflow."""

import pytest
import torch

from gptlab import GPTConfig
from gptlab.model.kv_cache import KVCache, new_kv_cache


def test_kv_cached_decoding_equals_full_recomputation(some_architecture, small_config,
                                                      seeded_model):
    model = seeded_model(small_config(**some_architecture))
    idx = torch.randint(0, 23, (3, 14), generator=torch.Generator().manual_seed(2))
    full, _ = model(idx)
    cache = new_kv_cache(model, batch_size=3)
    pieces = [model(idx[:, a:b], cache=cache)[0] for a, b in ((0, 5), (5, 6), (6, 7), (7, 14))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)
    assert cache.length == 14


def test_kv_cache_refuses_to_overflow():
    cfg = GPTConfig.from_preset("tiny-gpt2")
    cache = KVCache(cfg, batch_size=1, max_len=4)
    k = torch.zeros(1, cfg.n_kv_head, 5, cfg.head_dim)
    with pytest.raises(ValueError, match="4 positions"):
        cache.update(0, k, k)
