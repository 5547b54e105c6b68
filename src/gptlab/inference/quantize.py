"""Reduced-precision weights for decoding, chosen by a machine probe.

At batch 1 a decoding step reads every weight once for two FLOPs each, so its speed is the
memory bandwidth divided by the bytes of weights: fewer bytes per weight, more tokens per
second, provided the machine has a matmul that streams them at speed. Which one does
differs from CPU to CPU (torch's [out, in] layout read at 14 GB/s on one VM where a
contiguous [in, out] copy read at 26 GB/s; int8 was the fastest format on one machine and
the slowest on another), so `quantize(model, "auto")` times every kernel on the model
itself and keeps the fastest (gptlab.probe caches the timings per machine and shape); a
format asked for by name times only its own kernels (fp32, the default of `gptlab sample`:
its two layouts), and a busy machine, whose timings would decide nothing, times none: the
format's first kernel that runs there is used (fp32: torch's own layout, as trained).

Formats (only the matrices change: embeddings, norms, biases, the residual stream, softmax
and the KV cache stay fp32, and every matmul returns fp32):
- fp32: the weights as trained, in the layout the probe finds faster;
- fp16, bf16: weights in half precision, each matmul's input cast down to match;
- int8: per-output-channel symmetric, w[o, i] ~ scale[o] * q[o, i] with q in [-127, 127]
  and scale[o] = max_i |w[o, i]| / 127, through torch's `_weight_int8pack_mm` (its input
  in bf16 or fp32), or through torch's dynamic quantization (`quantized.linear_dynamic`,
  fbgemm/onednn: the input rounded to int8 per call as well, int8 dot products), whichever
  the probe finds fastest.

Quantized models are for inference: `quantize` swaps each nn.Linear (attention, MLP,
lm_head) for a `DecodeLinear` in place, whose `weight` is the dequantized fp32 matrix it
computes with, so code that reads weights (the lens, attribution) sees the truth.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gptlab import probe
from gptlab.errors import Setting, SettingError, UsageError
from gptlab.inference.formats import FORMATS, WEIGHT_CHOICES
from gptlab.model.gpt import GPT
from gptlab.model.kv_cache import new_kv_cache

# Each format's kernels: "linear" is F.linear on torch's [out, in] layout, "matmul_t" a
# matmul on a contiguous [in, out] copy; int8's kernels differ by the input's dtype.
KERNELS = {
    "fp32": ("fp32/linear", "fp32/matmul_t"),
    "fp16": ("fp16/linear", "fp16/matmul_t"),
    "bf16": ("bf16/linear", "bf16/matmul_t"),
    "int8": ("int8/bf16_input", "int8/fp32_input", "int8/dynamic"),
}
ALL_KERNELS = tuple(k for f in FORMATS for k in KERNELS[f])
HALF = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# _weight_int8pack_mm reads its input dimension in blocks of 16 (other sizes crashed the
# process in torch 2.13), so the int8 matrix and each input are zero-padded to a multiple.
INT8_BLOCK = 16


class DecodeLinear(nn.Module):
    """y = x W^T + b with W stored as `kernel` says ("fp32/linear", ..., "int8/bf16_input");
    x and y stay in x's dtype."""

    def __init__(self, linear: nn.Linear, kernel: str) -> None:
        super().__init__()
        fmt, variant = kernel.split("/")
        self.kernel, self.fmt = kernel, fmt
        self.out_features, self.in_features = linear.weight.shape
        w = linear.weight.detach().float()
        bias = None if linear.bias is None else linear.bias.detach().float().clone()
        self.register_buffer("bias", bias)
        self.dynamic = variant == "dynamic"
        if self.dynamic:
            # torch's dynamic quantization (fbgemm / onednn): the input is quantized to int8
            # per call too, and the product runs on int8 dot products.
            q, scale = int8_per_channel(w)
            with warnings.catch_warnings():  # quantized tensors are deprecated in torch 2.13;
                warnings.simplefilter("ignore")  # where they are gone, the probe skips this
                qweight = torch.quantize_per_channel(
                    w, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0, torch.qint8)
                self.packed = torch.ops.quantized.linear_prepack(qweight, bias)
            self.register_buffer("q", q)  # what `weight` reads; the product uses packed
            self.register_buffer("scale", scale)
        elif fmt == "int8":
            self.input_dtype = torch.bfloat16 if variant == "bf16_input" else torch.float32
            q, scale = int8_per_channel(w, self.input_dtype)
            self.pad = (-self.in_features) % INT8_BLOCK
            self.register_buffer("q", F.pad(q, (0, self.pad)).contiguous())
            self.register_buffer("scale", scale)
        else:
            stored = w.to(HALF[fmt])
            self.transposed = variant == "matmul_t"
            self.register_buffer("w", stored.t().contiguous() if self.transposed else stored)

    def forward(self, x: Tensor) -> Tensor:
        if self.dynamic:
            return torch.ops.quantized.linear_dynamic(x.float(), self.packed, True).to(x.dtype)
        if self.fmt == "int8":
            flat = x.reshape(-1, self.in_features).to(self.input_dtype)
            if self.pad:
                flat = F.pad(flat, (0, self.pad))
            y = torch._weight_int8pack_mm(flat, self.q, self.scale)
            y = y.reshape(*x.shape[:-1], self.out_features)
        elif self.transposed:
            y = x.to(self.w.dtype) @ self.w
        elif self.w.dtype == x.dtype:
            return F.linear(x, self.w, self.bias)  # exactly nn.Linear
        else:
            y = F.linear(x.to(self.w.dtype), self.w)
        if self.bias is not None and self.bias.dtype == x.dtype:
            return self.bias + y  # type promotion casts y up in the same kernel
        return y.to(x.dtype) if self.bias is None else y.to(x.dtype) + self.bias

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        # Its buffers are not a model's weights: saving them would write a file that no
        # loader reads back as the model. Save the model before it is quantized.
        raise UsageError("a model quantized for decoding (gptlab.inference.quantize) cannot be "
                         "saved or copied by state_dict: save the model before quantizing it")

    @property
    def weight(self) -> Tensor:
        """The (out, in) fp32 matrix this layer computes with."""
        if self.fmt == "int8":
            return self.q[:, : self.in_features].float() * self.scale.float()[:, None]
        return (self.w.t() if self.transposed else self.w).float()

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, kernel={self.kernel}")


def int8_per_channel(w: Tensor, scale_dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """(q int8 (out, in), scale (out,) in scale_dtype) with w ~ scale[:, None] * q.

    The scale is rounded up into scale_dtype before q is computed, so q is rounded against
    the scale actually stored (no per-row bias from a bf16 scale) and never clips."""
    scale = w.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / 127
    if scale_dtype != torch.float32:
        scale = (scale * (1 + 2.0 ** -7)).to(scale_dtype)  # >= the fp32 scale after rounding
    q = torch.round(w / scale.float()[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


@dataclass(frozen=True)
class Choice:
    """What quantize picked: the kernel, the probe's ms per token for each kernel (None:
    not available here, or not timed), and how the timings were measured (cached, just now,
    or not at all: measured.timed False)."""

    kernel: str
    ms_per_token: dict[str, float | None]
    measured: probe.Measured

    @property
    def cached(self) -> bool:
        return self.measured.cached

    @property
    def reason(self) -> str:
        """One line: the choice and the timings that made it."""
        where = self.measured.describe()
        if not self.measured.timed:
            fmt = self.kernel.split("/")[0]
            return f"weights {self.kernel} ({where}: the first {fmt} kernel that runs here)"
        times = {k: v for k, v in self.ms_per_token.items() if v is not None}
        fp32 = min((times[k] for k in KERNELS["fp32"] if k in times), default=math.nan)
        ours = times[self.kernel]
        others = ", ".join(f"{k} {v:.2f}" for k, v in sorted(times.items(), key=lambda kv: kv[1])
                           if k != self.kernel) or "none timed"
        return (f"weights {self.kernel}: {ours:.2f} ms per token, {fp32 / ours:.2f}x the "
                f"fastest fp32 ({where}, batch 1; the others in ms: {others})")


def quantize(model: nn.Module, weights: str = "auto") -> Choice:
    """Swap model's linear layers for DecodeLinear in `weights` (one of WEIGHT_CHOICES), in
    place, with the kernel the probe finds fastest on this machine ("auto": of every
    format; a format by name: of its own kernels, the only ones timed unless every kernel's
    timings are cached). On a busy machine with nothing cached nothing is timed (see
    gptlab.probe): auto keeps fp32, and the format's first kernel that runs is used. A
    probe that runs is announced (gptlab.probe.announced). The model is for inference
    afterwards; returns the Choice."""
    if weights not in WEIGHT_CHOICES:
        raise SettingError(Setting("weights"),
                           f" must be one of {', '.join(WEIGHT_CHOICES)}, got {weights!r}")
    if any(isinstance(m, DecodeLinear) for m in model.modules()):
        raise UsageError("this model's weights are quantized already; load it again to "
                         "choose other weights")
    key = _probe_key(model)
    found = probe.lookup("decode", key)  # every kernel's timings answer any format
    if found is None:
        kernels = ALL_KERNELS if weights == "auto" else KERNELS[weights]
        found = probe.cached(
            "decode", key if weights == "auto" else f"{key}; {weights} kernels only",
            lambda: probe_kernels(_probe_model(model), kernels=kernels),
            what=f"{len(kernels)} decoding kernels ({', '.join(kernels)})")
    timings, measured = found
    # auto trades precision for speed only on timings that can be trusted; else fp32
    formats = (FORMATS if measured.trusted else ("fp32",)) if weights == "auto" else (weights,)
    allowed = [k for f in formats for k in KERNELS[f]]
    if measured.timed:
        usable = {k: timings[k] for k in allowed if timings.get(k) is not None}
        kernel = min(usable, key=usable.get) if usable else None
    else:
        kernel = first_that_runs(_probe_model(model), allowed)
    if kernel is None:
        raise UsageError(f"{weights} weights are not available with this torch on "
                         f"{_device_of(model)}")
    _swap(model, kernel)
    return Choice(kernel, {k: timings.get(k) for k in ALL_KERNELS}, measured)


def linear_layers(model: nn.Module) -> list[tuple[nn.Module, str, nn.Linear]]:
    """(parent, attribute, layer) for every nn.Linear below model."""
    return [(parent, name, child) for parent in model.modules()
            for name, child in parent.named_children() if isinstance(child, nn.Linear)]


def _swap(model: nn.Module, kernel: str) -> list[tuple[nn.Module, str, nn.Module]]:
    """Replace every nn.Linear by a DecodeLinear(kernel); returns what to put back."""
    replaced = []
    for parent, name, layer in linear_layers(model):
        setattr(parent, name, DecodeLinear(layer, kernel))
        replaced.append((parent, name, layer))
    return replaced


def _restore(replaced: list[tuple[nn.Module, str, nn.Module]]) -> None:
    for parent, name, layer in replaced:
        setattr(parent, name, layer)


@torch.inference_mode()
def probe_kernels(model: nn.Module, budget_s: float = 0.3,
                  kernels: tuple[str, ...] = ALL_KERNELS) -> dict[str, float | None]:
    """ms per batch-1 decoding step (one token after a 16-token cached prefix) for each of
    `kernels`, the model's own weights swapped in one kernel at a time and put back. A
    kernel this torch or device lacks gets None."""
    return _each_kernel(model, kernels,
                        lambda step: probe.budgeted_ms(step, budget_s, max_reps=30))


@torch.inference_mode()
def first_that_runs(model: nn.Module, kernels: list[str]) -> str | None:
    """The first of `kernels` that decodes one step of model here (None: none does); the
    model is put back as it was."""
    ran = _each_kernel(model, kernels, lambda step: step() or 0.0, first=True)
    return next((k for k in kernels if ran.get(k) is not None), None)


def _each_kernel(model: nn.Module, kernels, run, first: bool = False
                 ) -> dict[str, float | None]:
    """{kernel: run(step)} with `step` one decoding step of model in that kernel, or None
    where the kernel fails here (not in this torch, not for this device); first: stop at
    the first that runs."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    prefix = max(1, min(16, model.config.block_size - 1))
    cache = new_kv_cache(model, 1, prefix + 1)
    model(torch.zeros(1, prefix, dtype=torch.long, device=device), cache=cache)
    token = torch.zeros(1, 1, dtype=torch.long, device=device)

    def step() -> None:
        cache.length = prefix  # decode the same position again: the cost stays flat
        model(token, cache=cache)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    out: dict[str, float | None] = {}
    try:
        for kernel in kernels:
            replaced = []
            try:
                replaced = _swap(model, kernel)
                out[kernel] = run(step)
            except (RuntimeError, NotImplementedError, AttributeError):
                out[kernel] = None  # not in this torch, or not for this device
            finally:
                _restore(replaced)
            if first and out[kernel] is not None:
                break
    finally:
        model.train(was_training)
    return out


# A model larger than this is probed through a stand-in with fewer blocks (same shapes,
# random weights), so that the probe never holds two copies of a big model's weights.
PROBE_BYTES = 1 << 30


def _probe_model(model: nn.Module) -> nn.Module:
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if weight_bytes <= PROBE_BYTES:
        return model
    per_block = sum(p.numel() * p.element_size() for p in model.blocks[0].parameters())
    rest = weight_bytes - per_block * len(model.blocks)
    n_layer = max(1, min(len(model.blocks), (PROBE_BYTES - rest) // max(per_block, 1)))
    config = type(model.config).from_dict({**model.config.to_dict(), "n_layer": int(n_layer)})
    with torch.device(_device_of(model)):
        return GPT(config)


def _probe_key(model: nn.Module) -> str:
    return f"{probe.machine_key(_device_of(model))}; {probe.config_key(model.config)}"


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device
