"""Benchmark 4: model FLOP utilization, the training FLOP/s achieved over this machine's
matmul peak, both measured in the same run, in fp32 and bf16."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.common import Size, interleaved, median, table, write_result
from bench.steps import Levers, build_model, make_step, random_batches
from gptlab import GPTConfig
from gptlab.model.params import FLOPS_FORMULA, accounting

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def matmul_peak(sizes: tuple[int, ...], reps: int, warmup: int = 1) -> dict[str, Any]:
    """Best median FLOP/s of torch.mm on square matrices, per dtype: the peak that MFU
    divides by. Each size and dtype is timed in turns with the others."""
    calls = {}
    for dtype_name, dtype in DTYPES.items():
        for n in sizes:
            a = torch.randn(n, n).to(dtype)
            b = torch.randn(n, n).to(dtype)
            calls[f"{dtype_name} {n}"] = (lambda a=a, b=b: torch.mm(a, b))
    times = interleaved(calls, reps=reps, warmup=warmup)
    per_size = {k: 2 * int(k.split()[1]) ** 3 / median(v) for k, v in times.items()}
    peak = {d: max(v for k, v in per_size.items() if k.startswith(d)) for d in DTYPES}
    return {"flops_per_s_by_size": per_size, "peak_flops_per_s": peak}


def shapes(size: Size) -> list[dict[str, Any]]:
    if size.smoke:
        return [dict(name="tiny", config=GPTConfig.from_preset("tiny-gpt2"), batch=2,
                     seq_len=16)]
    return [
        dict(name="shakespeare-char-cpu",
             config=GPTConfig.from_preset("shakespeare-char-cpu"), batch=12, seq_len=64),
        dict(name="gpt2 (T=128)", config=GPTConfig.from_preset("gpt2", block_size=128),
             batch=2 if size.name == "full" else 1, seq_len=128),
    ]


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    mm_sizes = (128, 256) if size.smoke else (1024, 2048)
    peak = matmul_peak(mm_sizes, reps=size.reps, warmup=size.warmup)
    log("\nmatmul peak (torch.mm, square, best size): " + ", ".join(
        f"{d} {v / 1e9:,.0f} GFLOP/s" for d, v in peak["peak_flops_per_s"].items()))
    rows = []
    for shape in shapes(size):
        config, B, T = shape["config"], shape["batch"], shape["seq_len"]
        acc = accounting(config, seq_len=T)
        flops_per_step = acc.flops_train_per_token * B * T
        batches = random_batches(config.vocab_size, B, T)
        steps = {
            "fp32": make_step(build_model("ours", config), Levers(fused_adamw=True), batches),
            "bf16": make_step(build_model("ours", config), Levers(bf16=True, fused_adamw=True),
                              batches),
        }
        big = shape["name"].startswith("gpt2")
        reps = max(2, size.reps // 3) if big else size.reps
        times = interleaved(steps, reps=reps, warmup=1 if big else size.warmup)
        for dtype_name, ts in times.items():
            achieved = flops_per_step / median(ts)
            rows.append({
                "shape": shape["name"], "dtype": dtype_name, "batch_size": B, "seq_len": T,
                "flops_per_step": flops_per_step, "ms_per_step": median(ts) * 1e3,
                "achieved_flops_per_s": achieved,
                "peak_flops_per_s": peak["peak_flops_per_s"][dtype_name],
                "mfu": achieved / peak["peak_flops_per_s"][dtype_name], "times_s": ts})
    log(table(["shape", "dtype", "ms/step", "GFLOP/step", "GFLOP/s", "peak GFLOP/s", "MFU"],
              [[r["shape"], r["dtype"], r["ms_per_step"], r["flops_per_step"] / 1e9,
                r["achieved_flops_per_s"] / 1e9, r["peak_flops_per_s"] / 1e9,
                f"{r['mfu']:.1%}"] for r in rows]))
    data = {"size": size.name, "flops_formula": FLOPS_FORMULA,
            "step": "gptlab GPT, fused AdamW, eager; bf16 = CPU autocast",
            "matmul": peak, "rows": rows}
    write_result(out_dir, "mfu", data)
    return data
