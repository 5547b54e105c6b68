"""The speedrun's levers, one at a time: each a change to the candidate recipe (training
settings and/or model shape), trained by bench.speedrun's own loop with its rules (whole
val split, training time only, evaluations every 100 steps, every 25 near a rung), one seed.

Step counts to a rung do not depend on the machine's load; times do, so run it on a quiet
machine and read the times as ratios within one run. Each lever is run once, in the order
given, after the base recipe; `--lever` picks some.

    python -m bench.speedrun_levers --text tests/assets/tinyshakespeare/input.txt
    python -m bench.speedrun_levers --text ... --lever base --lever muon_lr=0.03
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.common import setup_threads, table, write_result
from bench.speedrun import DEFAULT_TEXT, FIRST_SEED, RUNGS, model_for, train_to_rungs
from bench.time_to_quality import encode, tiny_shakespeare

BASE = "shakespeare-char-cpu-speedrun"
# The levers were measured against the first, provisional candidate: the recipe's Muon and
# batch with warm-up-stable-decay (the last 40% cooling down) and nanoGPT's tied head.
# Every lever starts from it, so each row reproduces; "cosine + untied" was adopted.
PROVISIONAL = ({"lr_schedule": "wsd", "cooldown_frac": 0.4}, {"tie_embeddings": True})
# name: (training settings, model shape changes), on top of PROVISIONAL
LEVERS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "base": ({}, {}),
    # Muon against AdamW alone (1e-2: the best AdamW rate of issue 14's exploratory run)
    "AdamW lr=1e-2": ({"optimizer": "adamw", "learning_rate": 1e-2, "min_lr": 1e-3}, {}),
    "AdamW lr=4e-3": ({"optimizer": "adamw", "learning_rate": 4e-3, "min_lr": 4e-4}, {}),
    "Muon NS fp32": ({"muon_dtype": "float32"}, {}),
    "Muon NS bf16": ({"muon_dtype": "bfloat16"}, {}),
    "muon_lr=0.03": ({"muon_lr": 0.03}, {}),
    "muon_lr=0.015": ({"muon_lr": 0.015}, {}),
    "adam_lr=4e-3": ({"learning_rate": 4e-3, "min_lr": 4e-4}, {}),
    "warmup=20": ({"warmup_iters": 20}, {}),
    "cosine": ({"lr_schedule": "cosine"}, {}),
    "iters=450": ({"max_iters": 450, "lr_decay_iters": 450}, {}),
    "cooldown=0.6": ({"cooldown_frac": 0.6}, {}),
    "B=24": ({"batch_size": 24}, {}),
    "B=48": ({"batch_size": 48}, {}),
    "T=128, B=16": ({"batch_size": 16}, {"block_size": 128}),
    "untied head": ({}, {"tie_embeddings": False}),
    "3 layers x 160": ({}, {"n_layer": 3, "n_embd": 160, "n_head": 5}),
    "6 layers x 96": ({}, {"n_layer": 6, "n_embd": 96, "n_head": 4}),
    "compile": ({"compile": True}, {}),
    "bf16 autocast": ({"dtype": "bfloat16"}, {}),
    # together: the levers that won alone (steps to both rungs, one seed each)
    "cosine + B=24": ({"lr_schedule": "cosine", "batch_size": 24}, {}),
    "cosine + untied": ({"lr_schedule": "cosine"}, {"tie_embeddings": False}),
    "cosine + B=24 + untied": ({"lr_schedule": "cosine", "batch_size": 24},
                               {"tie_embeddings": False}),
    "cosine + B=24 + untied + muon_lr=0.03": (
        {"lr_schedule": "cosine", "batch_size": 24, "muon_lr": 0.03}, {"tie_embeddings": False}),
}


def run_levers(names: list[str], text_path: Path, seed: int, log=print) -> dict[str, Any]:
    train, val, vocab = encode(tiny_shakespeare(text_path))
    rows, results = [], {}
    for name in names:
        settings = {**PROVISIONAL[0], **LEVERS[name][0]}
        shape = {**PROVISIONAL[1], **LEVERS[name][1]}
        log(f"lever {name!r}: {settings} {shape}")
        r = train_to_rungs(train, val, vocab, {"recipe": BASE, "seed": seed, **settings},
                           model_for(BASE, **shape), RUNGS, coarse=100, fine=25)
        results[name] = r
        ms = r["train_s"] / max(r["steps"], 1) * 1e3
        cells = [name, f"{ms:.1f}"]
        for rung in RUNGS:
            hit = r["rungs"].get(str(rung))
            cells += ([hit["step"], f"{hit['train_s']:.1f}"] if hit else ["-", "-"])
        rows.append(cells + [f"{r['final_val_loss']:.4f}"])
        log(table(["lever", "ms/step"] + [c for rung in RUNGS
                                          for c in (f"step {rung}", f"s {rung}")]
                  + ["last val"], rows))
    return {"size": "full", "base": BASE, "seed": seed, "levers": {n: LEVERS[n] for n in names},
            "results": results}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", type=Path, default=DEFAULT_TEXT)
    p.add_argument("--seed", type=int, default=FIRST_SEED)
    p.add_argument("--lever", action="append", choices=list(LEVERS))
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    args = p.parse_args(argv)
    setup_threads()
    data = run_levers(args.lever or list(LEVERS), args.text, args.seed)
    write_result(args.out, "speedrun_levers", data)


if __name__ == "__main__":
    main()
