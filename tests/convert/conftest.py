"""Shared by the conversion tests."""

import pytest

VOCAB = 101  # the vocabulary of the random Hugging Face models (tests/conftest.py)


@pytest.fixture(scope="session")
def neox_config():
    """neox_config(**fields) -> a one-layer transformers GPTNeoXConfig gptlab can run
    (sequential residual, whole-head RoPE), with `fields` changed."""
    def make(**kwargs):
        import transformers

        return transformers.GPTNeoXConfig(**{
            "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1,
            "intermediate_size": 40, "vocab_size": VOCAB, "max_position_embeddings": 64,
            "use_parallel_residual": False, "rotary_pct": 1.0, **kwargs})

    return make
