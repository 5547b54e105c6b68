"""QK-norm followed by RoPE as one autograd function: apply_rope(unit_rms(x), cos, sin),
computed in float32 at least, with its gradient written out.

Why one function: on a CPU the two steps are memory-bound passes over q and k, and torch's
autograd runs each op of each step forward and back (about 19 passes per layer, casts and
the gradient's concatenation included). Written as one, forward is a norm, a scale and
the rotation (5 passes), backward the transposed rotation and the norm's gradient (6): the
1.70 speedrun's step 54-56 -> 51.5 ms under bf16 autocast. q and k are first copied once
into a contiguous float32 tensor and rotated half by half, without roll's copy: forward +
backward of one layer 1.32-1.44 -> 1.17-1.27 ms (B=24, bf16 autocast, 2 threads). The
numbers equal the two steps' to float32 rounding (tests/model/test_qk_norm.py, with
gradcheck in float64).
"""

from __future__ import annotations

import torch
from torch import Tensor

from gptlab.model.layers import UNIT_RMS_EPS
from gptlab.model.positional import signed_sin


class _NormedRope(torch.autograd.Function):
    """y = R(u), u = x / sqrt(mean(x^2) + eps) per row, R the rotation x cos + roll(x, d/2)
    (-sin, sin). Backward: du = R^T(dy) = dy cos + roll(dy (-sin, sin), d/2) (a roll by
    half the row is its own inverse), then the norm's dx = (du - u mean(du u)) / rms."""

    @staticmethod
    def forward(ctx, x: Tensor, cos: Tensor, ssin: Tensor, dtype: torch.dtype) -> Tensor:
        work = torch.promote_types(x.dtype, torch.float32)  # float64 stays float64
        d = x.shape[-1]
        # One contiguous copy in the working dtype first: on a CPU an op that reads a bf16
        # view of the fused projection and writes float32 costs twice a plain one.
        u = x.to(work, memory_format=torch.contiguous_format, copy=True)
        inv_rms = torch.rsqrt(torch.linalg.vecdot(u, u).unsqueeze_(-1).div_(d)
                              .add_(UNIT_RMS_EPS))
        u.mul_(inv_rms)
        y = _rotate(u, cos.to(work), ssin.to(work), transposed=False)
        ctx.save_for_backward(u, inv_rms, cos, ssin)
        ctx.input_dtype = x.dtype
        return y.to(dtype)

    @staticmethod
    def backward(ctx, dy: Tensor) -> tuple[Tensor, None, None, None]:
        u, inv_rms, cos, ssin = ctx.saved_tensors
        d = u.shape[-1]
        du = _rotate(dy.to(u.dtype), cos.to(u.dtype), ssin.to(u.dtype), transposed=True)
        dot = torch.linalg.vecdot(du, u, dim=-1).unsqueeze(-1)  # sum(du u) per row
        du.mul_(inv_rms)
        dx = torch.empty(u.shape, dtype=ctx.input_dtype, device=u.device)
        # the cast to x's dtype is the last op's output, not a pass of its own
        torch.addcmul(du, u, dot.mul_(inv_rms).div_(-d), out=dx)
        return dx, None, None, None  # the tables are functions of positions, not learned


def _rotate(v: Tensor, cos: Tensor, ssin: Tensor, transposed: bool) -> Tensor:
    """v cos + roll(v, d/2) ssin (transposed: v cos + roll(v ssin, d/2), the rotation's
    transpose), written half by half into one new tensor: no roll's copy of v, and two
    multiplies and two fused multiply-adds of half rows each."""
    h = v.shape[-1] // 2
    out = torch.empty_like(v)
    for mine, other in ((slice(None, h), slice(h, None)), (slice(h, None), slice(None, h))):
        # roll by h puts the other half's values here; the sign table is read where they
        # land (forward) or where they come from (transposed)
        torch.mul(v[..., mine], cos[..., mine], out=out[..., mine])
        out[..., mine].addcmul_(v[..., other], ssin[..., other if transposed else mine])
    return out


def normed_rope(x: Tensor, cos: Tensor, sin: Tensor, dtype: torch.dtype | None = None
                ) -> Tensor:
    """apply_rope(unit_rms(x), cos, sin) in one autograd function: x (..., T, H, hs) or any
    shape cos and sin broadcast against; returned in `dtype` (default x's), computed in
    float32 at least. cos and sin are constants (their gradient is not computed)."""
    if cos.requires_grad or sin.requires_grad:
        raise ValueError("normed_rope takes RoPE's tables as constants; they require grad")
    return _NormedRope.apply(x, cos, signed_sin(sin), x.dtype if dtype is None else dtype)
