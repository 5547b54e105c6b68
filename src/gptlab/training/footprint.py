"""What a training run will need, estimated before it starts: memory against what the machine
has (refused above it, warned near it), and the work of one step.

Memory is a lower bound, so that a refusal is never wrong: the weights, their gradients and
AdamW's two moments (gptlab.model.params' 16 bytes a parameter in fp32; 12 with Muon, whose
matrices keep one momentum, counted for every parameter to stay a lower bound), plus the
activations kept for the backward pass, 34 bytes per token per layer per unit of width at
16 bits (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", without the attention-score term a fused attention does not store; twice that in
fp32), plus the logits and their gradient (fp32). The attention's other buffers, the
allocator's slack and the evaluation's batches come on top.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from gptlab.errors import Setting, SettingError
from gptlab.model.config import GPTConfig
from gptlab.model.params import ADAMW_FP32_BYTES_PER_PARAM, accounting, human_bytes
from gptlab.training.config import TrainConfig

ACTIVATION_BYTES_16BIT = 34  # per token, layer and unit of width (Korthikanti et al., eq. 2)
MUON_BYTES_PER_PARAM = 12  # weight 4 + grad 4 + momentum 4 (AdamW's rest has two moments)
WARN_SHARE = 0.5  # of the available memory, from which a run is told it is large


@dataclass(frozen=True)
class Footprint:
    """Bytes a training step needs at least, by part, and its FLOPs (forward + backward)."""

    state: int  # weights, gradients and AdamW moments
    activations: int  # kept for the backward pass, and the logits
    flops_per_step: int

    @property
    def total(self) -> int:
        return self.state + self.activations

    def describe(self) -> str:
        return (f"about {human_bytes(self.total)} (weights, gradients and optimizer state "
                f"{human_bytes(self.state)}, activations {human_bytes(self.activations)}) "
                f"and {self.flops_per_step / 1e12:,.1f} TFLOPs a step")


def estimate(model: GPTConfig, train: TrainConfig, fp32: bool) -> Footprint:
    """The footprint of one micro-batch (batch_size rows of block_size tokens) of `model`
    trained as `train` says; fp32: activations in float32 (no autocast)."""
    acc = accounting(model)
    tokens = train.batch_size * model.block_size
    per_layer = ACTIVATION_BYTES_16BIT * model.n_embd * tokens * (2 if fp32 else 1)
    logits = 2 * tokens * model.vocab_size * 4  # the logits and their gradient, fp32
    steps_tokens = tokens * train.gradient_accumulation_steps
    muon = train.speed.optimizer == "muon"
    per_param = MUON_BYTES_PER_PARAM if muon else ADAMW_FP32_BYTES_PER_PARAM
    return Footprint(state=acc.total * per_param,
                     activations=model.n_layer * per_layer + logits,
                     flops_per_step=acc.flops_train_per_token * steps_tokens)


def check_fits(footprint: Footprint, available: int | None, where: str) -> str | None:
    """A UsageError when the footprint exceeds `available` bytes (None: unknown, nothing
    checked); a warning line when it takes more than WARN_SHARE of it; else None."""
    if available is None:
        return None
    if footprint.total > available:
        raise SettingError(f"this run needs {footprint.describe()}, more than the "
                           f"{human_bytes(available)} available on {where}: use a smaller ",
                           Setting("block_size"), " or ", Setting("batch_size"), " (more ",
                           Setting("gradient_accumulation_steps"),
                           " keeps the batch) or a smaller model")
    if footprint.total > WARN_SHARE * available:
        return (f"warning: this run needs {footprint.describe()}, over half the "
                f"{human_bytes(available)} available on {where}")
    return None


def available_memory(device_type: str) -> int | None:
    """Bytes free on the accelerator (device_type cuda), else the machine's available
    memory: psutil's figure if it is installed, else /proc/meminfo's MemAvailable, else
    free pages (os.sysconf); None where none says."""
    if device_type == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return int(free)
    if device_type != "cpu":
        return None  # mps, xpu: no portable figure
    try:
        import psutil  # optional: not a dependency of gptlab
    except ImportError:
        return _meminfo_available() or _sysconf_available()
    return int(psutil.virtual_memory().available)


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _sysconf_available() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
