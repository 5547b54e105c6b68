"""Benchmark 3: generation. Greedy decoding tokens/s for the GPT-2 small shape (random
init), gptlab's cached loop against transformers' `generate` with its KV cache; per-token
latency as the text grows, with the cache and without; the share of the memory-bandwidth
floor reached (weight bytes read per token over the bandwidth measured in this run); and
gptlab's decoding weight formats (gptlab.inference.quantize: fp32 in the probed layout, fp16, bf16,
int8, auto) against plain fp32 weights, at batch 1, in the same run."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bench.common import Size, interleaved, median, new_figure, table, write_result
from bench.steps import hf_gpt2
from gptlab import GPT, GPTConfig
from gptlab.inference import quantize
from gptlab.model.decoding import SamplingSettings, generate_tokens
from gptlab.plots import save_figure

PEER = "transformers"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def read_bandwidth(mib: int, reps: int) -> float:
    """Bytes/s that torch.sum reads from a buffer far larger than the caches."""
    x = torch.ones(mib * 2**20 // 4, dtype=torch.float32)
    times = interleaved({"sum": lambda: x.sum()}, reps=reps, warmup=1)["sum"]
    return x.numel() * 4 / median(times)


def weight_bytes_per_token(model: GPT) -> int:
    """Bytes of weights one decoding step reads: every matrix once (a tied embedding is
    read as lm_head), but one row of the position table and of an embedding that is not
    also the head (untied, or the head quantized into its own copy)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    total += sum(b.numel() * b.element_size() for m in model.modules()
                 if isinstance(m, quantize.DecodeLinear) for b in m.buffers())
    # Unless the head is the embedding matrix itself, the embedding is read a row a token.
    if model.lm_head.weight is not model.wte.weight:
        w = model.wte.weight
        total -= (w.shape[0] - 1) * w.shape[1] * w.element_size()
    if model.wpe is not None:
        w = model.wpe.weight
        total -= (w.shape[0] - 1) * w.shape[1] * w.element_size()
    return total


def weight_formats(config: GPTConfig, prompt_len: int, new: int, reps: int,
                   bandwidth: float) -> list[dict[str, Any]]:
    """Batch-1 greedy tokens/s of plain fp32 weights (torch's nn.Linear) and of each
    `gptlab sample --weights` choice, interleaved; each against plain fp32 and the floor
    its own bytes allow. Tokens agreeing with plain fp32 are counted too (random weights
    give near-ties, so this is a lower bound on what a trained model keeps)."""
    plain, _, _ = models(config, torch.float32)
    contenders: dict[str, GPT] = {"plain fp32": plain}
    choices = {}
    for weights in quantize.WEIGHT_CHOICES:
        model, _, _ = models(config, torch.float32)
        choices[weights] = quantize.quantize(model, weights)
        contenders[weights] = model
    prompt = torch.randint(config.vocab_size, (1, prompt_len),
                           generator=torch.Generator().manual_seed(1))
    tokens = {name: ours_generate(m, prompt, new)[0, prompt_len:]
              for name, m in contenders.items()}  # also the warm-up
    times = interleaved({name: lambda m=m: ours_generate(m, prompt, new)
                         for name, m in contenders.items()}, reps=reps, warmup=0)
    base = new / median(times["plain fp32"])
    rows = []
    for name, model in contenders.items():
        tps = new / median(times[name])
        floor = bandwidth / weight_bytes_per_token(model)
        rows.append({"weights": name, "kernel": choices[name].kernel if name in choices
                     else "nn.Linear", "tokens_per_s": tps, "x_plain_fp32": tps / base,
                     "weight_bytes_per_step": weight_bytes_per_token(model),
                     "bandwidth_floor_tokens_per_s": floor, "share_of_floor": tps / floor,
                     "greedy_tokens_agree": float((tokens[name] == tokens["plain fp32"])
                                                  .float().mean()),
                     "probe_ms_per_token": choices[name].ms_per_token if name in choices
                     else None, "times_s": times[name]})
    return rows


def models(config: GPTConfig, dtype: torch.dtype) -> tuple[GPT, nn.Module, bool]:
    """(ours, theirs, same_weights): the transformers model at random init, and ours
    holding the very same weights when gptlab.convert.hf can convert them."""
    torch.manual_seed(0)
    hf = hf_gpt2(config).eval()
    try:
        from gptlab.convert.hf import from_hf

        ours, same = from_hf(hf), True
    except Exception:  # noqa: BLE001 (the converter is optional for this benchmark)
        torch.manual_seed(0)
        ours, same = GPT(config), False
    return ours.to(dtype).eval(), hf.to(dtype), same


def ours_generate(model: GPT, prompt: torch.Tensor, new: int) -> torch.Tensor:
    return model.generate(prompt, new, temperature=0.0)


def hf_generate(model: nn.Module, prompt: torch.Tensor, new: int) -> torch.Tensor:
    with torch.inference_mode():
        return model.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new,
            min_new_tokens=new, do_sample=False, use_cache=True, pad_token_id=0,
        )


def latency_with_cache(model: GPT, prompt: torch.Tensor, new: int) -> list[float]:
    """Seconds between consecutive tokens of one cached greedy generation."""
    stamps = [time.perf_counter()]
    for _ in generate_tokens(model, prompt, new, SamplingSettings(temperature=0.0)):
        stamps.append(time.perf_counter())
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]


@torch.inference_mode()
def latency_without_cache(model: GPT, prompt: torch.Tensor, lengths: list[int],
                          reps: int) -> list[float]:
    """Median seconds to choose the next token by running the whole text again, at each
    text length: what every step costs when nothing is cached."""
    out = []
    for n in lengths:
        idx = prompt.new_zeros(prompt.shape[0], n) + prompt[:, :1]
        times = interleaved({"f": lambda idx=idx: model(idx)[0][:, -1].argmax(-1)},
                            reps=reps, warmup=1)["f"]
        out.append(median(times))
    return out


def plot(path: Path, cached: list[float], lengths: list[int], uncached: list[float],
         prompt_len: int) -> None:

    fig, ax = new_figure((7, 4))
    ax.plot(range(prompt_len + 1, prompt_len + 1 + len(cached)), [t * 1e3 for t in cached],
            lw=1, label="with KV cache (each token)")
    ax.plot(lengths, [t * 1e3 for t in uncached], "o-", label="without cache (whole text)")
    ax.set_xlabel("text length (tokens)")
    ax.set_ylabel("ms per new token")
    ax.set_title("GPT-2 small shape, fp32, batch 1, greedy (gptlab)")
    ax.set_ylim(bottom=0)
    ax.legend()
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    if size.smoke:
        config, prompt_len, new, batches = GPTConfig.from_preset("tiny-gpt2"), 4, 8, (1, 2)
        mib, reps = 16, 2
    else:
        config, prompt_len = GPTConfig.from_preset("gpt2"), 16
        new = 256 if size.name == "full" else 32
        batches, mib, reps = (1, 8), 256, (3 if size.name == "full" else 2)
    bandwidth = read_bandwidth(mib, reps=5)
    log(f"\ngeneration: memory read bandwidth (torch.sum over {mib} MiB) "
        f"{bandwidth / 1e9:.1f} GB/s")
    rows = []
    for dtype_name, dtype in DTYPES.items():
        ours, hf, same_weights = models(config, dtype)
        weight_bytes = weight_bytes_per_token(ours)
        for batch in batches:
            g = torch.Generator().manual_seed(batch)
            prompt = torch.randint(config.vocab_size, (batch, prompt_len), generator=g)
            a, b = ours_generate(ours, prompt, new), hf_generate(hf, prompt, new)
            agree = float((a[:, prompt_len:] == b[:, prompt_len:]).float().mean())
            # The agreement check above was the warm-up; batch 8 costs 8x, so one fewer rep.
            times = interleaved({"gptlab": lambda m=ours, p=prompt: ours_generate(m, p, new),
                                 PEER: lambda m=hf, p=prompt: hf_generate(m, p, new)},
                                reps=reps if batch == 1 else max(2, reps - 1), warmup=0)
            floor = bandwidth / weight_bytes * batch  # tokens/s if only weight reads cost
            for who, ts in times.items():
                tps = batch * new / median(ts)
                rows.append({
                    "who": who, "dtype": dtype_name, "batch_size": batch,
                    "prompt_len": prompt_len, "new_tokens": new, "seconds": median(ts),
                    "tokens_per_s": tps, "weight_bytes_per_step": weight_bytes,
                    "bandwidth_floor_tokens_per_s": floor, "share_of_floor": tps / floor,
                    "greedy_tokens_agree": agree if same_weights else None, "times_s": ts})
    peer = {(r["dtype"], r["batch_size"]): r["tokens_per_s"] for r in rows if r["who"] == PEER}
    for r in rows:
        r["speedup_vs_peer"] = r["tokens_per_s"] / peer[(r["dtype"], r["batch_size"])]
    log(f"greedy, {prompt_len}-token prompt, {new} new tokens, median of {reps} (batch 1) "
        f"or {max(2, reps - 1)} (batch > 1) interleaved runs")
    log(table(["who", "dtype", "batch", "tokens/s", "x transformers", "floor tok/s",
               "of floor", "same tokens"],
              [[r["who"], r["dtype"], r["batch_size"], r["tokens_per_s"], r["speedup_vs_peer"],
                r["bandwidth_floor_tokens_per_s"], f"{r['share_of_floor']:.0%}",
                "-" if r["greedy_tokens_agree"] is None else f"{r['greedy_tokens_agree']:.0%}"]
               for r in rows]))

    formats = weight_formats(config, prompt_len, new, reps, bandwidth)
    log(f"\ndecoding weight formats (gptlab sample --weights), batch 1, {new} new tokens, "
        f"median of {reps} interleaved runs")
    log(table(["weights", "kernel", "tokens/s", "x plain fp32", "floor tok/s", "of floor",
               "same tokens"],
              [[r["weights"], r["kernel"], r["tokens_per_s"], r["x_plain_fp32"],
                r["bandwidth_floor_tokens_per_s"], f"{r['share_of_floor']:.0%}",
                f"{r['greedy_tokens_agree']:.0%}"] for r in formats]))

    # Per-token latency as the text grows, fp32, batch 1.
    ours, _, _ = models(config, torch.float32)
    prompt = torch.randint(config.vocab_size, (1, prompt_len),
                           generator=torch.Generator().manual_seed(0))
    cached = latency_with_cache(ours, prompt, new)
    top = prompt_len + new
    lengths = sorted({prompt_len, *(max(prompt_len, top * k // 4) for k in (1, 2, 3)), top})
    uncached = latency_without_cache(ours, prompt, lengths, reps=reps)
    quarter = max(1, len(cached) // 4)
    latency = {
        "cached_s_per_token": cached,
        "cached_first_quarter_median_s": median(cached[:quarter]),
        "cached_last_quarter_median_s": median(cached[-quarter:]),
        "uncached_lengths": lengths, "uncached_s_per_token": uncached,
    }
    first, last = latency["cached_first_quarter_median_s"], latency["cached_last_quarter_median_s"]
    log(f"per-token latency, fp32 batch 1: cached {first * 1e3:.1f} ms (first quarter) -> "
        f"{last * 1e3:.1f} ms (last); "
        "uncached " + ", ".join(f"{n}: {t*1e3:.0f} ms" for n, t in zip(lengths, uncached,
                                                                       strict=True)))
    png = Path(out_dir) / "generation_latency.png"
    plot(png, cached, lengths, uncached, prompt_len)
    data = {"size": size.name, "config": config.to_dict(), "bandwidth_bytes_per_s": bandwidth,
            "bandwidth_method": f"torch.sum over {mib} MiB fp32, median", "rows": rows,
            "weight_formats": formats,
            "latency": latency, "plot": png.name}
    write_result(out_dir, "generation", data)
    return data
