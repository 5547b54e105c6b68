"""One-GPU benchmark: GPT-2 124M training steps (bf16 autocast, torch.compile, flash SDPA,
fused AdamW, block 1024) as tokens/s and MFU against the bf16 matmul peak measured in the
same run, then generation tokens/s, then an FSDP2 smoke test (`gptlab train --parallel fsdp`
on this one device, bf16 mixed precision on a GPU). `--dry-run` runs every step on the CPU
at tiny sizes, so the script is known to work before a GPU's minutes are spent on it.

    bench/gpu.sh              # on the GPU machine
    bench/gpu.sh --dry-run    # anywhere, seconds
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from gptlab import GPT, GPTConfig
from gptlab.files.atomic import atomic_write_text
from gptlab.model.params import accounting


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device, reps: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    sync(device)
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync(device)
        out.append(time.perf_counter() - t)
    return out


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def matmul_peak(device: torch.device, n: int, reps: int) -> float:
    """bf16 FLOP/s of an n x n matmul, the best of a few shapes' medians."""
    best = 0.0
    for m in (n // 2, n):
        a = torch.randn(m, m, device=device, dtype=torch.bfloat16)
        b = torch.randn(m, m, device=device, dtype=torch.bfloat16)
        ts = timed(lambda a=a, b=b: torch.mm(a, b), device, reps, warmup=3)
        best = max(best, 2 * m**3 / median(ts))
    return best


def flash_only(device: torch.device):
    """Force the flash kernel on CUDA, so a silent fallback to the math path fails loudly."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION])


def train_steps(config: GPTConfig, batch: int, device: torch.device, steps: int,
                warmup: int, compile_model: bool) -> dict[str, Any]:
    torch.manual_seed(0)
    model = GPT(config).to(device)
    params = [p for p in model.parameters()]
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=6e-4, betas=(0.9, 0.95), fused=True)
    forward = torch.compile(model) if compile_model else model
    g = torch.Generator().manual_seed(0)
    data = torch.randint(config.vocab_size, (4, batch, config.block_size + 1), generator=g)
    data = data.to(device)
    state = {"i": 0}

    def step() -> None:
        w = data[state["i"] % len(data)]
        state["i"] += 1
        x, y = w[:, :-1], w[:, 1:]
        with torch.autocast(device.type, dtype=torch.bfloat16), flash_only(device):
            logits, _ = forward(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    t = time.perf_counter()
    step()
    sync(device)
    first = time.perf_counter() - t
    ts = timed(step, device, steps, warmup)
    tokens = batch * config.block_size
    acc = accounting(config, seq_len=config.block_size)
    return {"batch_size": batch, "seq_len": config.block_size, "first_step_s": first,
            "ms_per_step": median(ts) * 1e3, "tokens_per_s": tokens / median(ts),
            "flops_per_token": acc.flops_train_per_token,
            "achieved_flops_per_s": acc.flops_train_per_token * tokens / median(ts),
            "times_s": ts}


def generation(config: GPTConfig, device: torch.device, batches: tuple[int, ...],
               prompt_len: int, new: int, reps: int) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    model = GPT(config).to(device=device, dtype=torch.bfloat16).eval()
    rows = []
    for b in batches:
        prompt = torch.randint(config.vocab_size, (b, prompt_len), device=device)
        ts = timed(lambda p=prompt: model.generate(p, new, temperature=0.0), device, reps,
                   warmup=1)
        rows.append({"batch_size": b, "new_tokens": new, "dtype": "bf16",
                     "tokens_per_s": b * new / median(ts), "times_s": ts})
    return rows


def fsdp_smoke(device: torch.device, steps: int, work: Path) -> dict[str, Any]:
    """`--parallel fsdp` in one process (a 1-rank mesh; FSDP2's MixedPrecisionPolicy in bf16
    on a GPU), char-level on the repo's tiny Shakespeare: the loss must fall, and the
    gathered model.safetensors must load as an ordinary model."""
    from gptlab.data.prepared import prepare
    from gptlab.data.tokenizer import CharTokenizer
    from gptlab.model_dir import load_model
    from gptlab.training.config import TrainConfig
    from gptlab.training.run import train

    text = (Path(__file__).parents[1] / "tests/assets/tinyshakespeare/input.txt").read_text()
    prepare(text, work / "data", CharTokenizer.from_text(text), source="tinyshakespeare")
    model = GPTConfig.from_preset("tiny-gpt2", vocab_size=1, block_size=64)
    settings = TrainConfig(parallel="fsdp", max_iters=steps, warmup_iters=steps // 10,
                           eval_interval=steps, eval_iters=4, batch_size=16,
                           learning_rate=3e-3, device=device.type, whole_val=False,
                           dtype="bfloat16" if device.type == "cuda" else "float32")
    result = train(model, settings, work / "data", work / "run", progress=False)
    evals = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines()
             if '"eval"' in line]
    first, last = evals[0]["val_loss"], evals[-1]["val_loss"]
    gathered = load_model(work / "run")  # the ordinary file sample/eval/convert read
    ok = result.status == "finished" and last < first - 0.5 and gathered.num_parameters() > 0
    return {"steps": steps, "dtype": settings.dtype, "val_loss_first": first,
            "val_loss_last": last, "ok": ok}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/gpu.sh", description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    p.add_argument("--batch", type=int, default=16, help="sequences per step (default 16)")
    p.add_argument("--steps", type=int, default=30, help="timed training steps (default 30)")
    p.add_argument("--vocab", type=int, default=50304,
                   help="vocabulary size; 50304 is 50257 padded to a multiple of 128, as "
                        "nanoGPT does for speed (default 50304)")
    p.add_argument("--no-compile", action="store_true", help="eager mode")
    p.add_argument("--out", default="bench/results/gpu", help="directory for gpu.json")
    args = p.parse_args(argv)
    if args.dry_run:
        device = torch.device("cpu")
        torch.set_num_threads(2)
        config = GPTConfig.from_preset("tiny-gpt2", vocab_size=args.vocab if args.vocab < 1000
                                       else 97, block_size=32)
        batch, steps, warmup, mm, gen = 2, 2, 1, 128, dict(batches=(1, 2), prompt_len=4,
                                                          new=8, reps=1)
        compile_model = False  # the CPU's compile time would dwarf a dry run
    else:
        if not torch.cuda.is_available():
            print("bench/gpu.sh: error: no CUDA device; use --dry-run to check the script "
                  "on a CPU", file=sys.stderr)
            return 2
        device = torch.device("cuda")
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        config = GPTConfig.from_preset("gpt2", vocab_size=args.vocab)
        batch, steps, warmup, mm = args.batch, args.steps, 5, 8192
        gen = dict(batches=(1, 8), prompt_len=16, new=256, reps=3)
        compile_model = not args.no_compile
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (dry run)"
    print(f"device: {name}; torch {torch.__version__}", flush=True)
    peak = matmul_peak(device, mm, reps=10)
    print(f"bf16 matmul peak: {peak / 1e12:.1f} TFLOP/s", flush=True)
    try:
        train = train_steps(config, batch, device, steps, warmup, compile_model)
    except Exception as exc:  # noqa: BLE001 (a compile failure must not waste the GPU's time)
        if not compile_model:
            raise
        print(f"torch.compile failed ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
              "measuring eager instead", flush=True)
        compile_model = False
        train = train_steps(config, batch, device, steps, warmup, compile_model)
    train["mfu"] = train["achieved_flops_per_s"] / peak
    print(f"training GPT-2 shape (vocab {config.vocab_size}, block {config.block_size}), "
          f"B={batch}, bf16{' + compile' if compile_model else ''} + fused AdamW: "
          f"{train['ms_per_step']:.1f} ms/step, {train['tokens_per_s']:,.0f} tokens/s, "
          f"MFU {train['mfu']:.1%} (first step {train['first_step_s']:.1f} s)", flush=True)
    gen_rows = generation(config, device, **gen)
    for r in gen_rows:
        print(f"generation bf16 batch {r['batch_size']}: {r['tokens_per_s']:,.0f} tokens/s",
              flush=True)
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        smoke = fsdp_smoke(device, 20 if args.dry_run else 300, Path(work))
    print(f"FSDP2 smoke test ({smoke['steps']} steps, {smoke['dtype']}): val loss "
          f"{smoke['val_loss_first']:.3f} -> {smoke['val_loss_last']:.3f}: "
          f"{'ok' if smoke['ok'] else 'FAILED'}", flush=True)
    out = Path(args.out)
    data = {"benchmark": "gpu", "device": name, "torch": torch.__version__,
            "dry_run": args.dry_run, "config": config.to_dict(), "compile": compile_model,
            "bf16_matmul_peak_flops_per_s": peak, "train": train, "generation": gen_rows,
            "fsdp_smoke": smoke,
            "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_text(out / "gpu.json", json.dumps(data, indent=2) + "\n")
    print(f"wrote {out / 'gpu.json'}")
    return 0 if smoke["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
