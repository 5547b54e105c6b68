"""RoPE's inverse frequencies, and the rules that stretch them past the training length:
Position Interpolation ("linear"), NTK-aware base change ("ntk", static), dynamic NTK
("dynamic": the base grows with the sequence's length, as transformers' `dynamic` rope),
YaRN ("yarn") and Llama 3.1's ("llama3"), each as transformers' `ROPE_INIT_FUNCTIONS`
computes it (the tests check them bit for bit; static "ntk" has no entry there and is
checked against its formula).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor


def rope_inverse_frequencies(
    head_dim: int, base: float, scaling: dict[str, Any] | None = None,
    seq_len: int | None = None,
) -> tuple[Tensor, float]:
    """theta_i = base^(-2i/d) for i < d/2, adjusted by a long-context scaling rule.

    Returns (inv_freq (head_dim/2,) float32, attention_factor). The factor multiplies cos
    and sin (YaRN's temperature correction); it is 1.0 for every other rule. Arithmetic
    follows Hugging Face's `rope_utils` step for step so converted models match exactly.
    seq_len: the length of the sequence being run, which only "dynamic" reads.
    """
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim
    kind = scaling["type"] if scaling else None
    factor = float(scaling["factor"]) if scaling else 1.0
    if kind == "ntk":
        # NTK-aware scaling (bloc97, 2023): raise the base so the lowest frequency stretches
        # by `factor` while the highest barely moves.
        base = base * factor ** (head_dim / (head_dim - 2))
    if kind == "dynamic":
        base = dynamic_ntk_base(head_dim, base, scaling, seq_len)
    wavelength_scale = base**exponents  # 1 / theta_i
    inv_freq = 1.0 / wavelength_scale
    if kind == "linear":
        # Position interpolation (Chen et al. 2023): positions m become m / factor.
        return inv_freq / factor, 1.0
    if kind == "yarn":
        return _yarn(wavelength_scale, head_dim, base, factor, scaling)
    if kind == "llama3":
        return _llama3(inv_freq, factor, scaling), 1.0
    return inv_freq, 1.0


def dynamic_ntk_base(head_dim: int, base: float, scaling: dict[str, Any],
                     seq_len: int | None) -> float:
    """Dynamic NTK (emozilla, 2023, as transformers' `_compute_dynamic_ntk_parameters`):
    up to the training length L the base is unchanged; at a longer length s it becomes
    base * (factor * s / L - (factor - 1))^(d / (d - 2)), so the stretch grows with s."""
    original = scaling["original_max_position_embeddings"]
    factor = scaling["factor"]
    seq_len = original if seq_len is None else max(seq_len, original)
    return base * ((factor * seq_len / original) - (factor - 1)) ** (head_dim / (head_dim - 2))


def _yarn(
    wavelength_scale: Tensor, head_dim: int, base: float, factor: float, scaling: dict[str, Any]
) -> tuple[Tensor, float]:
    """YaRN (Peng et al. 2023): interpolate low frequencies, keep high ones, ramp between."""
    original = scaling["original_max_position_embeddings"]
    beta_fast = scaling.get("beta_fast") or 32.0
    beta_slow = scaling.get("beta_slow") or 1.0

    def temperature(mscale: float = 1.0) -> float:  # the paper's sqrt(1/t) = 0.1 ln(s) + 1
        return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1 else 1.0

    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
        if mscale and mscale_all_dim:  # DeepSeek's variant
            attention_factor = temperature(mscale) / temperature(mscale_all_dim)
        else:
            attention_factor = temperature()

    def dim_for_rotations(rotations: float) -> float:
        # The dimension whose wavelength fits `rotations` times into the original context.
        return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_for_rotations(beta_fast), dim_for_rotations(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = (torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)
    extrapolation_weight = 1 - ramp.clamp(0, 1)
    extrapolated, interpolated = 1.0 / wavelength_scale, 1.0 / (factor * wavelength_scale)
    return (
        interpolated * (1 - extrapolation_weight) + extrapolated * extrapolation_weight,
        float(attention_factor),
    )


def _llama3(inv_freq: Tensor, factor: float, scaling: dict[str, Any]) -> Tensor:
    """Llama 3.1's rule: long wavelengths divided by factor, short kept, smooth between."""
    low_freq_factor = scaling.get("low_freq_factor", 1.0)
    high_freq_factor = scaling.get("high_freq_factor", 4.0)
    original = scaling["original_max_position_embeddings"]
    low_freq_wavelen = original / low_freq_factor
    high_freq_wavelen = original / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)
