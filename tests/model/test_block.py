"""Transformer blocks (gptlab.model.block): pre-norm and post-norm residual wiring."""

import torch

from gptlab.model.block import PostNormBlock, PreNormBlock


def test_pre_and_post_norm_blocks_wire_residuals_as_their_papers_say(layer_config, randomize):
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    pre = randomize(PreNormBlock(layer_config(), layer=0))
    h = x + pre.attn(pre.norm_1(x))
    torch.testing.assert_close(pre(x), h + pre.mlp(pre.norm_2(h)))
    post = randomize(PostNormBlock(layer_config(), layer=0))
    h = post.norm_1(x + post.attn(x))
    torch.testing.assert_close(post(x), post.norm_2(h + post.mlp(h)))
