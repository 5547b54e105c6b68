"""Attention under tensor parallel, in one process: a rank's attention holds the rows of q,
k and v for its share of the heads (a kv head with its group of query heads) and the
matching columns of the output projection, and is told how many heads it computes
(local_heads, set by gptlab.distributed.parallelize); no module's n_head changes. The
ranks' partial outputs add up to the whole layer's, as the all-reduce after it adds them."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from gptlab.model.attention import CausalSelfAttention
from gptlab.model.config import GPTConfig


def rank_share(attn: CausalSelfAttention, rank: int, tp: int) -> CausalSelfAttention:
    """What rank `rank` of `tp` holds after ColwiseParallel on q, k, v and RowwiseParallel
    on proj: its rows of each of q, k, v and its columns of proj (no bias: added once)."""
    hs, nh, nkv = attn.head_dim, attn.n_head, attn.n_kv_head
    q, k, v = attn.qkv.weight.split([nh * hs, nkv * hs, nkv * hs])
    mine = [part.chunk(tp)[rank] for part in (q, k, v)]
    share = copy.deepcopy(attn)
    share.qkv = nn.Linear(q.shape[1], sum(m.shape[0] for m in mine), bias=False)
    share.proj = nn.Linear(nh * hs // tp, attn.proj.out_features, bias=False)
    with torch.no_grad():
        share.qkv.weight.copy_(torch.cat(mine))
        share.proj.weight.copy_(attn.proj.weight.chunk(tp, dim=1)[rank])
    share.local_heads = (nh // tp, nkv // tp)
    return share


@pytest.mark.parametrize("n_head, n_kv_head, tp", [(4, 2, 2), (4, 4, 2), (6, 3, 3), (4, 1, 1)])
def test_ranks_with_their_share_of_heads_add_up_to_the_whole(n_head, n_kv_head, tp):
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=n_head,
                       n_kv_head=n_kv_head, n_embd=n_head * 4, bias=False)
    torch.manual_seed(0)
    attn = CausalSelfAttention(config).eval()
    x = torch.randn(2, 8, config.n_embd)
    shares = [rank_share(attn, rank, tp) for rank in range(tp)]
    total = sum(share(x) for share in shares)
    torch.testing.assert_close(total, attn(x), atol=1e-6, rtol=1e-5)
    seen = []
    shares[0].heads.register_forward_hook(lambda mod, inp, out: seen.append(out.shape))
    shares[0](x)
    assert seen == [(2, n_head // tp, 8, 4)]  # (B, nh on this rank, T, hs)
    assert all((s.n_head, s.n_kv_head) == (n_head, n_kv_head) for s in shares)
