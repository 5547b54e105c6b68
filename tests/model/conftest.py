"""Shared by the model's tests: a small config and weights large enough that every path of
the network moves the logits."""

import itertools

import pytest
import torch

from gptlab import GPT, GPTConfig
from gptlab.model.positional import RotaryEmbedding, apply_rope

# Every combination of the architecture switches that change the forward pass.
ARCHITECTURES = list(itertools.product(
    ["learned", "sinusoidal", "rope", "alibi", "none"],
    ["layernorm", "rmsnorm"],
    ["gelu", "gelu_tanh", "swiglu"],
    ["pre", "post"],
))


def _switches(request) -> dict:
    pos, norm, mlp, where = request.param
    return dict(pos_encoding=pos, norm=norm, mlp=mlp, norm_position=where)


@pytest.fixture(params=ARCHITECTURES, ids="-".join)
def architecture(request) -> dict:
    """Each architecture, as GPTConfig fields."""
    return _switches(request)


@pytest.fixture(params=ARCHITECTURES[::5], ids="-".join)
def some_architecture(request) -> dict:
    """Every fifth architecture: a spread of them for the slower checks."""
    return _switches(request)


@pytest.fixture(scope="session")
def small_config():
    """small_config(**overrides) -> GPTConfig: vocabulary 23, context 16, 2 layers, 4 query
    and 2 key/value heads of 4 dimensions, FFN width 24."""
    def make(**overrides) -> GPTConfig:
        fields = dict(vocab_size=23, block_size=16, n_layer=2, n_head=4, n_kv_head=2,
                      n_embd=16, ffn_hidden=24)
        return GPTConfig(**{**fields, **overrides})

    return make


@pytest.fixture(scope="session")
def seeded_model():
    """seeded_model(config, seed=0) -> GPT in eval mode, with larger weights than GPT-2's
    init (noise of std 0.3 added), so every path matters."""
    def make(config: GPTConfig, seed: int = 0) -> GPT:
        torch.manual_seed(seed)
        model = GPT(config).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.3)
        return model

    return make


@pytest.fixture(scope="session")
def layer_config():
    """layer_config(**overrides) -> GPTConfig: one layer of width 8 (2 heads), FFN 12: the
    shapes the layer and block formulas are checked at."""
    def make(**overrides) -> GPTConfig:
        fields = dict(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8,
                      ffn_hidden=12)
        return GPTConfig(**{**fields, **overrides})

    return make


@pytest.fixture(scope="session")
def randomize():
    """randomize(module, seed=0) -> the module in float64 eval mode, its weights N(0, 0.25)
    (norm scales around 1)."""
    def make(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if p.ndim == 1 else 0.0))
        return module.double().eval()

    return make


@pytest.fixture(scope="session")
def rope():
    """rope(head_dim=16, base=10000.0, scaling=None) -> RotaryEmbedding of a one-head model."""
    def make(head_dim: int = 16, base: float = 10000.0, scaling: dict | None = None):
        fields = dict(vocab_size=10, block_size=64, n_layer=1, n_head=1, n_embd=head_dim,
                      pos_encoding="rope", rope_base=base, rope_scaling=scaling)
        return RotaryEmbedding(GPTConfig(**fields))

    return make


@pytest.fixture(scope="session")
def rotate():
    """rotate(rotary, x, position): x (head_dim,) rotated as RoPE rotates position's query."""
    def apply(rotary, x: torch.Tensor, position: int) -> torch.Tensor:
        cos, sin = rotary(torch.tensor([position]))
        return apply_rope(x[None], cos, sin)[0]

    return apply
