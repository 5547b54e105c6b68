"""What an evaluation of the whole val split costs against the training it judges: the
speedrun's model (its preset), tiny Shakespeare's val split (nanoGPT's last 10%), scored as
`gptlab eval` and the speedrun score it (gptlab.inference.evaluate.score_ids: windows of
block_size sliding by half of it, so each token is run about twice) at several batch
sizes, and under bf16 autocast as a bf16 run's `--stop-at-val` looks score it, against the
training forward (train mode, autograd on) and the whole training step (forward, backward,
clipping, Muon + AdamW) of the speedrun's recipe on its batches.

Throughput is tokens through the model per second (a scored token is run about twice);
"steps" is how many training steps one whole-split evaluation costs. Medians of
interleaved repetitions, 2 threads, random weights (the cost does not depend on them).

    python -m bench.eval_throughput [--reps 5] [--out bench/results]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bench.common import interleaved, median, standalone_main, table
from bench.speedrun import DEFAULT_TEXT
from bench.time_to_quality import encode, tiny_shakespeare
from gptlab.data.batches import TokenBatches
from gptlab.distributed.process import Dist
from gptlab.inference.evaluate import DEFAULT_EVAL_TOKENS, score_ids, windows
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.config import recipe
from gptlab.training.trainer import NoCheckpoints, Trainer

PRESET = "shakespeare-char-cpu-speedrun"
BATCHES = (8, 32, 128, None)  # None: the token-budget default (DEFAULT_EVAL_TOKENS)


def measure(text_path: Path, reps: int, log=print) -> dict[str, Any]:
    train, val, vocab = encode(tiny_shakespeare(text_path))
    config = GPTConfig.from_preset(PRESET, vocab_size=vocab)
    cfg = recipe(PRESET, dtype="float32", muon_dtype="float32", device="cpu")
    torch.manual_seed(0)
    model = GPT(config)
    val_ids = torch.from_numpy(val.astype("int64"))
    block = config.block_size
    run_tokens = sum(end - begin for begin, end, _ in windows(len(val_ids), block, block // 2))
    ctx = Dist(device=torch.device("cpu"))
    trainer = Trainer(model, TokenBatches(train, val, cfg.batch_size, block, 0, ctx), cfg, ctx,
                      NoCheckpoints())
    x, y = trainer.batches.train_batch()
    step_tokens = x.numel()

    def forward() -> None:
        model.train()
        model(x, y)

    contenders = {f"eval, batch {b or 'default'}":
                  (lambda b=b: score_ids(model, val_ids, batch_size=b)) for b in BATCHES}

    def bf16_eval() -> None:  # as a bf16 run's stop_at_val looks score (issue 41)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            score_ids(model, val_ids)

    contenders["eval, default batch, bf16 autocast"] = bf16_eval
    contenders["training forward"] = lambda: [forward() for _ in range(10)]
    contenders["training step"] = lambda: [trainer.train_step(1e-4) for _ in range(10)]
    times = {k: median(v) for k, v in interleaved(contenders, reps).items()}
    step_s = times["training step"] / 10
    rows, out = [], {}
    for name, seconds in times.items():
        if name.startswith("eval"):
            tokens = run_tokens
        else:
            seconds, tokens = seconds / 10, step_tokens
        out[name] = {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
                     "training_steps": seconds / step_s}
    forward_rate = out["training forward"]["tokens_per_s"]
    for name, r in out.items():
        r["x_training_forward"] = r["tokens_per_s"] / forward_rate
        rows.append([name, f"{r['seconds'] * 1e3:.1f}", f"{r['tokens']:,}",
                     f"{r['tokens_per_s']:,.0f}", f"{r['x_training_forward']:.2f}x",
                     f"{r['training_steps']:.1f}"])
    log(table(["what", "ms", "tokens", "tokens/s", "x training forward", "training steps"],
              rows))
    return {"preset": PRESET, "val_tokens": len(val_ids), "reps": reps,
            "default_eval_tokens": DEFAULT_EVAL_TOKENS, "results": out}


def main(argv: list[str] | None = None) -> None:
    standalone_main("eval_throughput", __doc__, measure, 5, DEFAULT_TEXT, argv)


if __name__ == "__main__":
    main()
