"""Markdown tables from a results folder, to paste into BENCHMARKS.md after a run:

    python -m bench.report bench/results
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def md(headers: list[str], rows: list[list[Any]]) -> str:
    def cell(x: Any) -> str:
        if isinstance(x, float):
            return f"{x:,.3g}" if abs(x) < 100 else f"{x:,.0f}"
        return str(x)

    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def train_step(d: dict) -> str:
    out = []
    for s in d["shapes"]:
        out.append(f"**{s['shape']}**, B={s['batch_size']}, T={s['seq_len']}, median of "
                   f"{s['reps']} interleaved steps\n")
        out.append(md(["contender", "ms/step", "tokens/s", "x transformers"],
                      [[r["contender"], r["ms_per_step"], r["tokens_per_s"],
                        f"{r['speedup_vs_peer']:.2f}x"] for r in s["rows"]]))
    return "\n\n".join(out)


def generation(d: dict) -> str:
    rows = [[r["who"], r["dtype"], r["batch_size"], r["tokens_per_s"],
             f"{r['speedup_vs_peer']:.2f}x", r["bandwidth_floor_tokens_per_s"],
             f"{r['share_of_floor']:.0%}"] for r in d["rows"]]
    lat = d["latency"]
    uncached = ", ".join(f"{n}: {t * 1e3:.0f} ms" for n, t in
                         zip(lat["uncached_lengths"], lat["uncached_s_per_token"], strict=True))
    return (f"bandwidth {d['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s "
            f"({d['bandwidth_method']}); {d['rows'][0]['new_tokens']} new tokens\n\n"
            + md(["who", "dtype", "batch", "tokens/s", "x transformers", "floor tokens/s",
                  "of floor"], rows)
            + f"\n\nper-token latency (fp32, batch 1): with cache "
              f"{lat['cached_first_quarter_median_s'] * 1e3:.1f} ms (first quarter) -> "
              f"{lat['cached_last_quarter_median_s'] * 1e3:.1f} ms (last quarter); "
              f"without cache {uncached}"
            + weight_formats(d.get("weight_formats")))


def weight_formats(rows: list[dict] | None) -> str:
    if not rows:
        return ""
    return ("\n\ndecoding weight formats (`gptlab sample --weights`), batch 1:\n\n"
            + md(["weights", "kernel", "tokens/s", "x plain fp32", "floor tokens/s",
                  "of floor", "same greedy tokens"],
                 [[r["weights"], r["kernel"], r["tokens_per_s"], f"{r['x_plain_fp32']:.2f}x",
                   r["bandwidth_floor_tokens_per_s"], f"{r['share_of_floor']:.0%}",
                   f"{r['greedy_tokens_agree']:.0%}"] for r in rows]))


def mfu(d: dict) -> str:
    peak = d["matmul"]["peak_flops_per_s"]
    return (f"matmul peak: fp32 {peak['fp32'] / 1e9:,.0f} GFLOP/s, bf16 "
            f"{peak['bf16'] / 1e9:,.0f} GFLOP/s\n\n"
            + md(["shape", "dtype", "ms/step", "GFLOP/s", "MFU"],
                 [[r["shape"], r["dtype"], r["ms_per_step"],
                   r["achieved_flops_per_s"] / 1e9, f"{r['mfu']:.1%}"] for r in d["rows"]]))


def scaling(d: dict) -> str:
    rows = [[w["width"], p["context"], p["batch_size"], p["us_per_token"],
             f"{p['attention_flop_share']:.0%}"] for w in d["widths"] for p in w["points"]]
    fits = "\n".join(f"- d={w['width']}: {w['fit_a_us']:.2f} + {w['fit_b_us']:.4f}·T µs/token;"
                     f" attention equals the rest at T ≈ {w['crossover_context']:.0f} "
                     f"(FLOPs predict {w['flop_crossover_context']:.0f})" for w in d["widths"])
    return md(["width", "T", "batch", "µs/token", "attention FLOP share"], rows) + "\n\n" + fits


def time_to_quality(d: dict) -> str:
    return md(["recipe", "reached", "steps", "train s", "ms/step", "val", "x nanoGPT time"],
              [[k, "yes" if r["reached"] else "no", r["steps"], r["train_s"],
                r["train_s"] / r["steps"] * 1e3, f"{r['final_val_loss']:.4f}",
                f"{r['time_vs_nanogpt']:.2f}x"] for k, r in d["recipes"].items()])


def speedrun(d: dict) -> str:
    from bench.speedrun import record_header, record_rows

    return record_header(tuple(d["rungs"])) + "\n" + record_rows(d)


def speedrun_whole(d: dict) -> str:
    from bench.speedrun_whole import record_rows

    return record_rows(d).rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    folder = Path((argv or sys.argv[1:] or ["bench/results"])[0])
    for name in ("train_step", "time_to_quality", "speedrun", "speedrun_whole", "generation",
                 "mfu", "scaling"):
        path = folder / f"{name}.json"
        if path.is_file():
            d = json.loads(path.read_text())
            print(f"### {name} ({d['size']}, {d['time_utc']})\n")
            print(globals()[name](d) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
