"""Benchmark 1: training-step throughput, gptlab's GPT against transformers' GPT2LMHeadModel
(SDPA attention) doing the same forward + backward + clip + AdamW step on the same batches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Size, interleaved, median, table, write_result
from bench.steps import Levers, build_model, make_step, random_batches
from gptlab import GPTConfig

PEER = "transformers fp32"


def shapes(size: Size) -> list[dict[str, Any]]:
    """(name, config, batch) to measure. The first is the shakespeare-char-cpu recipe's."""
    if size.smoke:
        return [dict(name="tiny", config=GPTConfig.from_preset("tiny-gpt2", mlp="gelu"),
                     batch=2, seq_len=16)]
    out = [dict(name="shakespeare-char-cpu", config=GPTConfig.from_preset(
        "shakespeare-char-cpu"), batch=12, seq_len=64)]
    # GPT-2 small at a short context: 124M parameters, so the matmuls dominate.
    out.append(dict(name="gpt2 (T=128)", config=GPTConfig.from_preset("gpt2", block_size=128),
                    batch=2 if size.name == "full" else 1, seq_len=128))
    return out


def contenders(size: Size, shape_name: str) -> dict[str, tuple[str, Levers]]:
    """label -> (model kind, levers). The peer comes first; then gptlab like for like, then
    one lever at a time. --quick keeps the levers that matter most."""
    c = {PEER: ("hf", Levers()), "gptlab fp32": ("ours", Levers()),
         "gptlab fp32 + fused AdamW": ("ours", Levers(fused_adamw=True))}
    big = shape_name.startswith("gpt2")
    if size.smoke:
        c["gptlab bf16 + fused AdamW"] = ("ours", Levers(bf16=True, fused_adamw=True))
        return c
    if size.name == "full":
        c["transformers bf16 + fused AdamW"] = ("hf", Levers(bf16=True, fused_adamw=True))
    c["gptlab bf16 + fused AdamW"] = ("ours", Levers(bf16=True, fused_adamw=True))
    if not big:
        # Compiling GPT-2 small on 2 cores takes minutes; the small shape shows the effect.
        c["gptlab fp32 + fused AdamW + compile"] = (
            "ours", Levers(fused_adamw=True, compile=True))
        if size.name == "full":
            # Eager autocast adds a cast per op; compile fuses them away.
            c["gptlab bf16 + fused AdamW + compile"] = (
                "ours", Levers(bf16=True, fused_adamw=True, compile=True))
    return c


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    results = []
    for shape in shapes(size):
        config, B, T = shape["config"], shape["batch"], shape["seq_len"]
        batches = random_batches(config.vocab_size, B, T)
        steps = {}
        for label, (kind, levers) in contenders(size, shape["name"]).items():
            steps[label] = make_step(build_model(kind, config), levers, batches)
        big = shape["name"].startswith("gpt2")
        reps = max(2, size.reps // 3) if big else size.reps
        times = interleaved(steps, reps=reps, warmup=1 if big else size.warmup)
        peer_ms = median(times[PEER]) * 1e3
        rows = []
        for label, ts in times.items():
            ms = median(ts) * 1e3
            rows.append({"contender": label, "ms_per_step": ms, "tokens_per_s": B * T / ms * 1e3,
                         "speedup_vs_peer": peer_ms / ms, "times_s": ts})
        log(f"\ntraining step, {shape['name']}: B={B} T={T}, {config.n_layer} layers x "
            f"{config.n_head} heads x {config.n_embd}, vocab {config.vocab_size}, "
            f"median of {reps} interleaved steps")
        log(table(["contender", "ms/step", "tokens/s", "x transformers"],
                  [[r["contender"], r["ms_per_step"], r["tokens_per_s"], r["speedup_vs_peer"]]
                   for r in rows]))
        results.append({"shape": shape["name"], "config": config.to_dict(), "batch_size": B,
                        "seq_len": T, "reps": reps, "peer": PEER, "rows": rows})
    data = {"size": size.name, "step": "forward + backward + clip_grad_norm(1.0) + AdamW "
            "(lr 1e-3, betas 0.9/0.99, wd 0.1 on matrices) + zero_grad", "shapes": results}
    write_result(out_dir, "train_step", data)
    return data
