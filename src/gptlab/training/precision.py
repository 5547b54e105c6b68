"""`--dtype auto` and `--muon-dtype auto` on a CPU: bf16 only where this machine is faster
with it.

A CPU's bf16 matmuls may run at 4x its fp32 rate (native bf16 dot products, AMX) or at
0.01x (no bf16 instructions at all), so auto times the work itself in each dtype, once per
machine and shape (gptlab.probe caches it), and picks bf16 only when it is clearly faster:
a dtype that is slower is never chosen. For `dtype` the work is a few forward + backward
passes of the run's model under autocast; for `muon_dtype` it is Muon's Newton-Schulz
iteration on the model's hidden matrices (bf16 there is what torch.optim.Muon always uses).
The `dtype` probe also times bf16 autocast with attention computed in float32, because on
a CPU torch's fused attention backward in bf16 can cost several times its float32 one
(short contexts, small heads) while the matmuls around it gain 4x: bf16 is then chosen
when either way is clearly faster, and `attention_dtype auto` takes float32 unless bf16
attention is clearly faster. On CUDA auto keeps its rule (bf16 where the GPU has it, else
fp16; Muon in bf16; attention as autocast has it). The environment variable
GPTLAB_AUTO_DTYPE (float32 or bfloat16) says what the autos mean without a probe, for runs
that must not depend on a timing (the test suite sets it).
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from gptlab import probe
from gptlab.errors import UsageError
from gptlab.model.attention import set_float32_attention
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model.params import count_parameters
from gptlab.training.muon import hidden_matrices, orthogonalize

# bf16 must beat fp32 by this factor: it costs precision, so a tie goes to fp32.
MARGIN = 0.9
OVERRIDE = "GPTLAB_AUTO_DTYPE"
PROBE_TOKENS = 1024  # per probe step, at most: the ratio, not the run's batch, is wanted
# The probe's name for bf16 autocast with attention computed in float32
FLOAT32_ATTENTION = "bfloat16+float32-attention"
# hidden_shapes builds a model of at most this many parameters on the CPU, not on meta
REAL_BUILD_MAX = 20_000_000


def resolve_settings(cfg, config: GPTConfig, device: torch.device):
    """(cfg, a TrainConfig, with its dtype, attention's and Muon's made concrete where they
    are 'auto'; the lines saying why)."""
    changes, reasons = {}, []
    if cfg.dtype == "auto":
        changes["dtype"], why = resolve(config, cfg.batch_size, device)
        reasons.append(why)
    if cfg.speed.attention_dtype == "auto":
        changes["attention_dtype"], why = resolve_attention(
            config, cfg.batch_size, device, changes.get("dtype", cfg.dtype))
        reasons += [why] if why else []
    if cfg.speed.optimizer == "muon" and cfg.speed.muon_dtype == "auto":
        changes["muon_dtype"], why = resolve_muon(config, device)
        reasons.append(why)
    if not changes:
        return cfg, reasons
    return type(cfg).from_dict({**cfg.flat(), **changes}), reasons


def resolve_muon(config: GPTConfig, device: torch.device) -> tuple[str, str]:
    """(the Newton-Schulz dtype `muon_dtype auto` means here, one line saying why)."""
    forced = _forced()
    if forced:
        return forced, f"muon_dtype auto: {forced} ({OVERRIDE} says so)"
    if device.type != "cpu":
        return "bfloat16", f"muon_dtype auto: bfloat16 (on {device.type})"
    shapes = hidden_shapes(config)
    key = (f"{probe.machine_key(device)}; Newton-Schulz stacked by shape on "
           f"{probe.config_key(config)}")
    ms, measured = probe.cached("muon_dtype", key, lambda: measure_muon(shapes, device),
                                what="Muon's Newton-Schulz in float32 and bfloat16")
    return _pick("muon_dtype auto", "bfloat16", ms, measured,
                 f"Newton-Schulz for {len(shapes)} matrices")


def resolve(config: GPTConfig, batch_size: int, device: torch.device) -> tuple[str, str]:
    """(the dtype `auto` means for this run, one line saying why)."""
    forced = _forced()
    if forced:
        return forced, f"dtype auto: {forced} ({OVERRIDE} says so)"
    if device.type == "cuda":
        bf16 = torch.cuda.is_bf16_supported()
        return ("bfloat16" if bf16 else "float16"), (
            f"dtype auto: {'bfloat16' if bf16 else 'float16'} (CUDA "
            f"{'with' if bf16 else 'without'} bf16)")
    if device.type != "cpu":
        return "float32", f"dtype auto: float32 (no autocast probe for {device.type})"
    ms, measured = _probe_training(config, batch_size, device)
    fastest = min((m for m in (ms.get("bfloat16"), ms.get(FLOAT32_ATTENTION)) if m is not None),
                  default=None)
    return _pick("dtype auto", "bfloat16 autocast", {**ms, "bfloat16": fastest}, measured,
                 "a forward + backward")


def resolve_attention(config: GPTConfig, batch_size: int, device: torch.device,
                      dtype: str) -> tuple[str, str | None]:
    """(what `attention_dtype auto` means for a run in `dtype`, a line saying why or None
    where there was nothing to decide). On a CPU under bf16 autocast the probe has timed the
    model with attention in bf16 and in float32: float32, the more precise, unless bf16 is
    clearly faster (MARGIN) in a probe that can be trusted."""
    if dtype != "bfloat16" or device.type != "cpu":
        return "autocast", None
    if _forced():
        return "float32", f"attention_dtype auto: float32 ({OVERRIDE} is set)"
    ms, measured = _probe_training(config, batch_size, device)
    if not measured.timed:
        return "float32", f"attention_dtype auto: float32 ({measured.describe()})"
    bf16, fp32 = ms.get("bfloat16"), ms.get(FLOAT32_ATTENTION)
    if bf16 is None or fp32 is None:
        return "float32", "attention_dtype auto: float32 (not timed under autocast here)"
    ratio, where = f"{fp32 / bf16:.2f}x", measured.describe()
    if bf16 < MARGIN * fp32 and measured.trusted:
        return "autocast", (f"attention_dtype auto: autocast, bf16 attention {ratio} float32's "
                            f"on this machine ({bf16:.1f} vs {fp32:.1f} ms, {where})")
    return "float32", (f"attention_dtype auto: float32 (bf16 attention {ratio} float32's on "
                       f"this machine, {where}; bf16 needs {1 / MARGIN:.2f}x)")


def _probe_training(config: GPTConfig, batch_size: int, device: torch.device
                    ) -> tuple[dict, probe.Measured]:
    """The train_dtype probe's ms per step for this model and batch (measure), cached."""
    T = config.block_size
    B = max(1, min(batch_size, PROBE_TOKENS // T))
    key = (f"{probe.machine_key(device)}; {probe.config_key(config)}; B={B} T={T}; "
           f"attention in bf16 or float32")
    return probe.cached("train_dtype", key, lambda: measure(config, B, T, device),
                        what="a forward + backward in float32 and under bfloat16 autocast")


def _forced() -> str | None:
    forced = os.environ.get(OVERRIDE)
    if forced and forced not in ("float32", "bfloat16"):
        raise UsageError(f"{OVERRIDE} must be float32 or bfloat16, got {forced!r}")
    return forced or None


def _pick(what: str, bf16_name: str, ms: dict, measured: probe.Measured, work: str
          ) -> tuple[str, str]:
    """bfloat16 where the probe's ms say it is clearly faster, else float32; and why. A
    probe taken under load or with scattered timings decides nothing: float32 stays (and
    on a busy machine none is taken: gptlab.probe)."""
    where = measured.describe()
    if not measured.timed:
        return "float32", f"{what}: float32 ({where})"
    fp32, bf16 = ms["float32"], ms.get("bfloat16")
    ratio = "not available" if bf16 is None else f"{fp32 / bf16:.2f}x"
    if bf16 is not None and bf16 < MARGIN * fp32 and measured.trusted:
        return "bfloat16", (f"{what}: {bf16_name}, {ratio} float32 on this "
                            f"machine ({work} {bf16:.1f} vs {fp32:.1f} ms, {where})")
    return "float32", (f"{what}: float32 ({bf16_name} {ratio} float32 on this machine, "
                       f"{where}; bf16 needs {1 / MARGIN:.2f}x)")


def hidden_shapes(config: GPTConfig) -> list[tuple[int, int]]:
    """The shapes of the matrices Muon trains in this model
    (gptlab.training.muon.hidden_matrices)."""
    # A small model is built for real (the random streams left as they were): on the meta
    # device its initialisation goes through torch._refs, whose first call imports
    # torch._dynamo, 0.4-0.7 s of a speedrun's start-up; a 0.8M-parameter GPT builds in ms.
    small = count_parameters(config) <= REAL_BUILD_MAX
    with torch.random.fork_rng(devices=[]), torch.device("cpu" if small else "meta"):
        model = GPT(config)
    params = dict(model.named_parameters())
    return [tuple(params[n].shape) for n in hidden_matrices(model)[0]]


def measure_muon(shapes: list[tuple[int, int]], device: torch.device,
                 budget_s: float = 0.3) -> dict[str, float | None]:
    """Median ms of one Newton-Schulz orthogonalisation of every matrix, per dtype, as
    Muon.step runs it: once per shape, on the stack of that shape's matrices."""
    count: dict[tuple[int, int], int] = {}
    for shape in shapes:
        count[shape] = count.get(shape, 0) + 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        stacks = [torch.randn(shape, device=device) if n == 1 else
                  torch.randn((n, *shape), device=device) for shape, n in count.items()]
    out: dict[str, float | None] = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        def step(dtype=dtype) -> None:
            for g in stacks:
                orthogonalize(g, dtype)

        try:
            out[name] = probe.budgeted_ms(step, budget_s, max_reps=20)
        except RuntimeError:
            if dtype == torch.float32:
                raise
            out[name] = None
    return out


def measure(config: GPTConfig, batch_size: int, T: int, device: torch.device,
            budget_s: float = 0.5) -> dict[str, float | None]:
    """Median ms of a forward + backward (no optimizer step) of a throwaway model of this
    config on random tokens: in float32, under bf16 autocast, and under bf16 autocast with
    attention in float32 (FLOAT32_ATTENTION). The caller's random streams are left as
    they were."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        with torch.device(device):
            model = GPT(GPTConfig.from_dict({**config.to_dict(), "dropout": 0.0}))
        idx = torch.randint(config.vocab_size, (batch_size, T + 1), device=device)
    x, y = idx[:, :-1], idx[:, 1:]
    out: dict[str, float | None] = {}
    for name, dtype, float32_attention in (("float32", None, False),
                                           ("bfloat16", torch.bfloat16, False),
                                           (FLOAT32_ATTENTION, torch.bfloat16, True)):
        def step(dtype=dtype) -> None:
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                logits, _ = model(x)
            F.cross_entropy(logits.float().flatten(0, 1), y.flatten()).backward()
            model.zero_grad(set_to_none=True)

        set_float32_attention(model, float32_attention)
        try:
            out[name] = probe.budgeted_ms(step, budget_s, max_reps=20)
        except RuntimeError:
            if dtype is None:
                raise
            out[name] = None  # autocast in this dtype not supported here
    return out


def autocast_dtype(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for a TrainConfig.dtype on a device (None: plain float32)."""
    if name == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if name == "float16" and device.type != "cuda":
        raise UsageError("dtype float16 needs CUDA (a GradScaler); use bfloat16 on CPU")
    return {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]
