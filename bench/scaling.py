"""Benchmark 5: training cost against context length and width. Tokens per step are held
fixed, so the cost per token is a + b*T: `a` the matmuls with the weights (the 6N term),
`b*T` attention over the context (the 12*L*T*d term, O(T^2) per sequence). The context
where b*T overtakes a is where attention takes over."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Size, interleaved, median, new_figure, table, write_result
from bench.steps import Levers, build_model, make_step, random_batches
from gptlab import GPTConfig
from gptlab.model.params import accounting
from gptlab.plots import save_figure


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (a, b) of y = a + b*x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - b * mx, b


def grid(size: Size) -> tuple[list[int], list[int], int]:
    """(widths, contexts, tokens per step)."""
    if size.smoke:
        return [32], [16, 32, 64], 128
    if size.name == "quick":
        return [128], [64, 128, 256, 512, 1024], 2048
    return [64, 128, 256], [64, 128, 256, 512, 1024], 2048


def config_for(width: int, context: int) -> GPTConfig:
    # shakespeare-char-cpu's depth, heads and vocabulary; only width and context vary.
    return GPTConfig.from_preset("shakespeare-char-cpu", n_embd=width, block_size=context)


def plot(path: Path, results: list[dict[str, Any]]) -> None:

    fig, ax = new_figure((7, 4.5))
    for r in results:
        T = [p["context"] for p in r["points"]]
        us = [p["us_per_token"] for p in r["points"]]
        line = ax.plot(T, us, "o-", label=f"d={r['width']} measured")[0]
        a, b = r["fit_a_us"], r["fit_b_us"]
        ax.plot(T, [a + b * t for t in T], ":", color=line.get_color(),
                label=f"d={r['width']} fit {a:.1f} + {b:.3f}·T "
                      f"(attention = rest at T≈{r['crossover_context']:.0f})")
        if T[0] <= r["crossover_context"] <= T[-1]:
            ax.axvline(r["crossover_context"], color=line.get_color(), ls="--", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length T (tokens per step held fixed)")
    ax.set_ylabel("µs per token (fwd + bwd + AdamW)")
    ax.set_title("Training cost per token: weights (flat) vs attention (∝ T)\n"
                 "dashed vertical: T where the attention term equals the rest")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    widths, contexts, tokens = grid(size)
    reps = 2 if size.smoke else max(3, size.reps // 3)
    results = []
    for width in widths:
        steps = {}
        for T in contexts:
            config = config_for(width, T)
            batches = random_batches(config.vocab_size, tokens // T, T, n=2)
            steps[T] = make_step(build_model("ours", config), Levers(fused_adamw=True), batches)
        times = interleaved(steps, reps=reps, warmup=1)
        points = []
        for T, ts in times.items():
            acc = accounting(config_for(width, T), seq_len=T)
            points.append({"context": T, "batch_size": tokens // T,
                           "ms_per_step": median(ts) * 1e3,
                           "us_per_token": median(ts) / tokens * 1e6,
                           "attention_flop_share": 3 * acc.flops_attention_per_token
                           / acc.flops_train_per_token, "times_s": ts})
        a, b = fit_line([p["context"] for p in points], [p["us_per_token"] for p in points])
        acc = accounting(config_for(width, contexts[0]), seq_len=contexts[0])
        # 12*L*T*d = 6*N_matmul  <=>  T = N_matmul / (2*L*d)
        flop_crossover = acc.n_matmul / (2 * acc.config.n_layer * acc.config.n_embd)
        results.append({"width": width, "points": points, "fit_a_us": a, "fit_b_us": b,
                        "crossover_context": a / b if b > 0 else float("inf"),
                        "flop_crossover_context": flop_crossover})
    log(f"\nscaling: {tokens} tokens per step, 4 layers x 4 heads, fp32, fused AdamW; "
        f"median of {reps} interleaved steps")
    log(table(["width", "T", "batch", "ms/step", "µs/token", "attention FLOP share"],
              [[r["width"], p["context"], p["batch_size"], p["ms_per_step"], p["us_per_token"],
                f"{p['attention_flop_share']:.0%}"] for r in results for p in r["points"]]))
    for r in results:
        log(f"d={r['width']}: cost/token = {r['fit_a_us']:.2f} + {r['fit_b_us']:.4f}*T µs; "
            f"attention term equals the rest at T = {r['crossover_context']:.0f} "
            f"(FLOP count predicts {r['flop_crossover_context']:.0f})")
    png = Path(out_dir) / "scaling.png"
    plot(png, results)
    data = {"size": size.name, "tokens_per_step": tokens, "widths": results, "plot": png.name}
    write_result(out_dir, "scaling", data)
    return data
