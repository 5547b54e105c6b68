"""Attention's dtype under bf16 autocast on a CPU (`--attention-dtype`): torch's fused
scaled_dot_product_attention, forward + backward, in float32, in bf16, and in float32 from
bf16 inputs (the upcast `--attention-dtype float32` does, casts included), at the
speedrun's shape and at longer contexts; then the whole training step (forward, backward,
clipping, Muon + AdamW) of the speedrun's second lap in float32, under bf16 autocast, and
under bf16 autocast with attention in float32. Medians of interleaved repetitions, 2
threads, random inputs (the cost does not depend on them).

    python -m bench.attention_dtype [--reps 15] [--out bench/results]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bench.common import interleaved, median, standalone_main, table
from bench.speedrun import DEFAULT_TEXT
from bench.time_to_quality import encode, tiny_shakespeare
from gptlab.data.batches import TokenBatches
from gptlab.distributed.process import Dist
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.config import recipe
from gptlab.training.trainer import NoCheckpoints, Trainer

PRESET = "shakespeare-char-cpu-speedrun-2"
# (batch, heads, context, head size): the speedrun's, nanoGPT's CPU batch, two heads of 64,
# and longer contexts where bf16's kernel catches up
SHAPES = ((32, 4, 64, 32), (12, 4, 64, 32), (32, 2, 64, 64), (16, 6, 256, 64),
          (4, 12, 1024, 64))
KERNELS = ("float32", "bfloat16", "float32 from bfloat16")


def attention_step(shape: tuple[int, ...], kernel: str):
    """One fused attention forward + backward at `shape` as `kernel` computes it."""
    dtype = torch.float32 if kernel == "float32" else torch.bfloat16
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=gen, dtype=dtype).requires_grad_() for _ in range(3))
    grad = torch.randn(shape, generator=gen, dtype=dtype)

    def step() -> None:
        if kernel == "float32 from bfloat16":
            out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                 is_causal=True).to(dtype)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(grad)

    return step


def training_steps(text_path: Path, steps: int):
    """Contenders: `steps` training steps of the second lap in each precision."""
    train, val, vocab = encode(tiny_shakespeare(text_path))
    config = GPTConfig.from_preset(PRESET, vocab_size=vocab)
    ctx = Dist(device=torch.device("cpu"))
    contenders = {}
    for name, dtype, attention in (("float32", "float32", "autocast"),
                                   ("bf16 autocast", "bfloat16", "autocast"),
                                   ("bf16 autocast, float32 attention", "bfloat16", "float32")):
        cfg = recipe(PRESET, dtype=dtype, attention_dtype=attention, muon_dtype="bfloat16",
                     device="cpu")
        torch.manual_seed(0)
        trainer = Trainer(GPT(config), TokenBatches(train, val, cfg.batch_size,
                                                    config.block_size, 0, ctx),
                          cfg, ctx, NoCheckpoints())
        contenders[name] = lambda t=trainer: [t.train_step(1e-3) for _ in range(steps)]
    return contenders


def measure(text_path: Path, reps: int, log=print, shapes=SHAPES, steps: int = 10
            ) -> dict[str, Any]:
    kernels: dict[str, dict[str, float]] = {}
    rows = []
    for shape in shapes:
        times = interleaved({k: attention_step(shape, k) for k in KERNELS}, reps)
        ms = {k: median(v) * 1e3 for k, v in times.items()}
        kernels["x".join(map(str, shape))] = ms
        rows.append(["x".join(map(str, shape))] + [f"{ms[k]:.2f}" for k in KERNELS]
                    + [f"{ms['float32'] / ms['bfloat16']:.2f}x"])
    log(table(["B x heads x T x head size", *(f"{k} ms" for k in KERNELS),
               "bf16 x float32"], rows))
    step_ms = {k: median(v) / steps * 1e3
               for k, v in interleaved(training_steps(text_path, steps), reps).items()}
    log(table(["training step, " + PRESET, "ms", "x float32"],
              [[k, f"{ms:.1f}", f"{step_ms['float32'] / ms:.2f}x"]
               for k, ms in step_ms.items()]))
    return {"preset": PRESET, "reps": reps, "attention_ms": kernels, "step_ms": step_ms}


def main(argv: list[str] | None = None) -> None:
    standalone_main("attention_dtype", __doc__, measure, 15, DEFAULT_TEXT, argv)


if __name__ == "__main__":
    main()
