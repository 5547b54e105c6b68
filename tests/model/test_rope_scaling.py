"""Long-context RoPE rules (gptlab.model.rope_scaling): NTK's raised base, and every rule's
inverse frequencies against Hugging Face's own code."""

import pytest
import torch

from gptlab.model.rope_scaling import rope_inverse_frequencies


def test_ntk_scaling_raises_the_base():
    inv_freq, _ = rope_inverse_frequencies(16, 10000.0, {"type": "ntk", "factor": 8.0})
    expected, _ = rope_inverse_frequencies(16, 10000.0 * 8.0 ** (16 / 14))
    torch.testing.assert_close(inv_freq, expected)
    assert inv_freq[0].item() == 1.0  # the fastest pair is unchanged
    assert inv_freq[-1].item() == pytest.approx(
        rope_inverse_frequencies(16, 10000.0)[0][-1].item() / 8.0, rel=1e-5)


HF_SCALINGS = [
    ("default", None),
    ("linear", {"type": "linear", "factor": 3.0}),
    ("yarn", {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}),
    ("yarn", {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096,
              "beta_fast": 16, "beta_slow": 2}),
    ("yarn", {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096,
              "mscale": 1.0, "mscale_all_dim": 0.707}),  # DeepSeek's temperature ratio
    ("llama3", {"type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
]


@pytest.mark.oracle
@pytest.mark.parametrize("hf_type,scaling", HF_SCALINGS)
def test_rope_scaling_matches_hugging_face(hf_type, scaling):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = {"rope_type": hf_type, "rope_theta": 500000.0}
    if scaling:
        params.update({k: v for k, v in scaling.items() if k != "type"})
    hf_config = LlamaConfig(hidden_size=256, num_attention_heads=2, max_position_embeddings=32768,
                            rope_parameters=params)
    if hf_type == "default":
        head_dim = 128
        expected = 1.0 / 500000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim)
        expected_factor = 1.0
    else:
        expected, expected_factor = ROPE_INIT_FUNCTIONS[hf_type](hf_config, "cpu")
    ours, factor = rope_inverse_frequencies(128, 500000.0, scaling)
    torch.testing.assert_close(ours, expected, rtol=0, atol=0)
    assert factor == pytest.approx(expected_factor, rel=1e-12)
