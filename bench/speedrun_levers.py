"""The speedrun's levers, one at a time: each a change to the candidate recipe (training
settings and/or model shape), trained by bench.speedrun's own loop with its rules (whole
val split, training time only), one seed, evaluated every 100 steps and every 25 within 0.1 of
a rung (LEVER_CADENCE: the resolution every sweep in BENCHMARKS.md had; the speedrun itself
looks closer, bench.speedrun.CADENCE).

Step counts to a rung do not depend on the machine's load; times do, so run it on a quiet
machine and read the times as ratios within one run. Each lever is run once, in the order
given, after the base recipe; `--lever` picks some.

    python -m bench.speedrun_levers --text tests/assets/tinyshakespeare/input.txt
    python -m bench.speedrun_levers --text ... --lever base --lever muon_lr=0.03
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from bench.common import setup_threads, table, write_result
from bench.speedrun import (
    CADENCE,
    DEFAULT_TEXT,
    FIRST_SEED,
    RUNGS,
    decide_precision,
    model_for,
    train_to_rungs,
)
from bench.time_to_quality import encode, tiny_shakespeare

BASE = "shakespeare-char-cpu-speedrun"
# Lap 1 (issue 14) measured its levers against the first, provisional candidate: the
# recipe's Muon and batch with warm-up-stable-decay (the last 40% cooling down) and
# nanoGPT's tied head; "cosine + untied" was adopted. Its rows keep that starting point, so
# each reproduces.
PROVISIONAL = ({"lr_schedule": "wsd", "cooldown_frac": 0.4}, {"tie_embeddings": True})


def _lap1(settings: dict[str, Any], shape: dict[str, Any]) -> tuple[dict, dict]:
    return {**PROVISIONAL[0], **settings}, {**PROVISIONAL[1], **shape}


_LEAN = {"warmup_iters": 20, "muon_lr": 0.04, "max_iters": 450, "lr_decay_iters": 450}
_ADOPTED = {"qk_norm": True, "zero_init_proj": True, "value_residual": True}


def _track(n_layer: int, batch: int = 32, steps: int = 450) -> tuple[dict, dict]:
    """The adopted second lap with another depth, batch or length (the 1.88 track's search)."""
    return ({**_LEAN, "batch_size": batch, "max_iters": steps, "lr_decay_iters": steps},
            {**_ADOPTED, "n_layer": n_layer})


def _steps(n: int) -> dict[str, int]:
    return {"max_iters": n, "lr_decay_iters": n}


def _lap2_now(settings: dict[str, Any], shape: dict[str, Any] | None = None
              ) -> tuple[dict, dict]:
    """Lap 2 as its third pass left it (RoPE, B=24, 450 steps) with changes."""
    return ({**_LEAN, "batch_size": 24, **settings},
            {**_ADOPTED, "pos_encoding": "rope", **(shape or {})})


_APART = {"muon_split_qkv": True}  # Muon orthogonalises q, k and v apart (modded-nanogpt)


# name: (training settings, model shape changes) on top of BASE's recipe and preset. The
# levers that were not adopted and are no longer options (ReLU², soft-capping, U-net skips,
# ramps, fewer Newton-Schulz steps, plain momentum, NorMuon) and the sweeps that combined
# them are recorded in BENCHMARKS.md and bench/results/speedrun_levers_sweep*.json.
LEVERS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "base": ({}, {}),
    # Lap 2 (issue 28): modded-nanogpt's levers after Muon, each alone on the adopted recipe
    "QK-norm": ({}, {"qk_norm": True}),
    "zero-init proj": ({}, {"zero_init_proj": True}),
    "value residual": ({}, {"value_residual": True}),
    "iters=400": ({"max_iters": 400, "lr_decay_iters": 400}, {}),
    "iters=500": ({"max_iters": 500, "lr_decay_iters": 500}, {}),
    "warmup=20": ({"warmup_iters": 20}, {}),
    "muon_lr=0.04": ({"muon_lr": 0.04}, {}),
    "adam_lr=6e-3": ({"learning_rate": 6e-3, "min_lr": 6e-4}, {}),
    "QK-norm + muon_lr=0.04": ({"muon_lr": 0.04}, {"qk_norm": True}),
    "min_lr=0": ({"min_lr": 0.0}, {}),
    # what is left of it once the levers within a seed's spread are dropped (sweep 7)
    "QK-norm + zero-init, 450": (_LEAN, {"qk_norm": True, "zero_init_proj": True}),
    "QK-norm + zero-init + value residual, 450": (
        _LEAN, {"qk_norm": True, "zero_init_proj": True, "value_residual": True}),
    "QK-norm, 450": (_LEAN, {"qk_norm": True}),
    # around the adopted recipe, `shakespeare-char-cpu-speedrun-2` (sweep 8)
    "lap2 adopted": (_LEAN, _ADOPTED),
    "lap2 adopted + B=24": ({**_LEAN, "batch_size": 24}, _ADOPTED),
    "lap2 adopted, 3 layers": (_LEAN, {**_ADOPTED, "n_layer": 3}),
    "lap2 adopted + muon_lr=0.05, 400 steps": (
        {**_LEAN, "muon_lr": 0.05, "max_iters": 400, "lr_decay_iters": 400}, _ADOPTED),
    "lap2 adopted, tanh GELU": (_LEAN, {**_ADOPTED, "mlp": "gelu_tanh"}),
    "lap2 adopted, 2 heads of 64": (_LEAN, {**_ADOPTED, "n_head": 2}),
    # a recipe for the 1.88 rung alone, from the two levers that reached it sooner but
    # never reached 1.70 (sweep 9)
    "1.88 track: 3 layers, B=24": _track(3, batch=24),
    "1.88 track: 3 layers, 350 steps": _track(3, steps=350),
    "1.88 track: 3 layers, B=24, 350 steps": _track(3, batch=24, steps=350),
    "1.88 track: B=24, 350 steps": _track(4, batch=24, steps=350),
    "1.88 track: 3 layers, B=24, 300 steps": _track(3, batch=24, steps=300),
    "1.88 track: 2 layers, B=24, 350 steps": _track(2, batch=24, steps=350),
    "1.88 track: 3 layers, B=16, 400 steps": _track(3, batch=16, steps=400),
    "1.88 track: 2 layers, B=32, 350 steps": _track(2, steps=350),
    "1.88 track: 2 layers, B=24, 400 steps": _track(2, batch=24, steps=400),
    "1.88 track: 1 layer, B=24, 400 steps": _track(1, batch=24, steps=400),
    "1.88 track: 1 layer, B=24, 500 steps": _track(1, batch=24, steps=500),
    "1.88 track: 1 layer, B=32, 450 steps": _track(1),
    # around lap 2 as its third pass left it (RoPE, B=24, 450 steps): the fourth pass
    "lap2 third pass": _lap2_now({}),
    "lap2 third pass, Muon weight decay 0.1": _lap2_now({"muon_weight_decay": 0.1}),
    "lap2 third pass, no warm-up": _lap2_now({"warmup_iters": 0}),
    "lap2 third pass, T=128, B=12": _lap2_now({"batch_size": 12}, {"block_size": 128}),
    "lap2 third pass, T=128, B=16": _lap2_now({"batch_size": 16}, {"block_size": 128}),
    "lap2 third pass, T=96, B=16": _lap2_now({"batch_size": 16}, {"block_size": 96}),
    "lap2 third pass, 8 heads of 16": _lap2_now({}, {"n_head": 8}),
    "lap2 + q/k/v apart": _lap2_now(_APART),
    "lap2 + q/k/v apart, Muon 0.03": _lap2_now({**_APART, "muon_lr": 0.03}),
    "lap2 + q/k/v apart, Muon 0.05": _lap2_now({**_APART, "muon_lr": 0.05}),
    "lap2 + q/k/v apart, 420 steps": _lap2_now({**_APART, **_steps(420)}),
    "lap2 + q/k/v apart, 400 steps": _lap2_now({**_APART, **_steps(400)}),
    "lap2 + q/k/v apart, 380 steps": _lap2_now({**_APART, **_steps(380)}),
    "lap2 + q/k/v apart, 360 steps (adopted)": _lap2_now({**_APART, **_steps(360)}),
    # Lap 1 (issue 14), on the provisional candidate
    "lap1 base": _lap1({}, {}),
    # Muon against AdamW alone (1e-2: the best AdamW rate of issue 14's exploratory run)
    "AdamW lr=1e-2": _lap1({"optimizer": "adamw", "learning_rate": 1e-2, "min_lr": 1e-3}, {}),
    "AdamW lr=4e-3": _lap1({"optimizer": "adamw", "learning_rate": 4e-3, "min_lr": 4e-4}, {}),
    "Muon NS fp32": _lap1({"muon_dtype": "float32"}, {}),
    "Muon NS bf16": _lap1({"muon_dtype": "bfloat16"}, {}),
    "muon_lr=0.03": _lap1({"muon_lr": 0.03}, {}),
    "muon_lr=0.015": _lap1({"muon_lr": 0.015}, {}),
    "adam_lr=4e-3": _lap1({"learning_rate": 4e-3, "min_lr": 4e-4}, {}),
    "lap1 warmup=20": _lap1({"warmup_iters": 20}, {}),
    "cosine": _lap1({"lr_schedule": "cosine"}, {}),
    "iters=450": _lap1({"max_iters": 450, "lr_decay_iters": 450}, {}),
    "cooldown=0.6": _lap1({"cooldown_frac": 0.6}, {}),
    "B=24": _lap1({"batch_size": 24}, {}),
    "B=48": _lap1({"batch_size": 48}, {}),
    "T=128, B=16": _lap1({"batch_size": 16}, {"block_size": 128}),
    "untied head": _lap1({}, {"tie_embeddings": False}),
    "3 layers x 160": _lap1({}, {"n_layer": 3, "n_embd": 160, "n_head": 5}),
    "6 layers x 96": _lap1({}, {"n_layer": 6, "n_embd": 96, "n_head": 4}),
    "compile": _lap1({"compile": True}, {}),
    "bf16 autocast": _lap1({"dtype": "bfloat16"}, {}),
    # together: the levers that won alone (steps to both rungs, one seed each)
    "cosine + B=24": _lap1({"lr_schedule": "cosine", "batch_size": 24}, {}),
    "cosine + untied": _lap1({"lr_schedule": "cosine"}, {"tie_embeddings": False}),
    "cosine + B=24 + untied": _lap1({"lr_schedule": "cosine", "batch_size": 24},
                                    {"tie_embeddings": False}),
    "cosine + B=24 + untied + muon_lr=0.03": _lap1(
        {"lr_schedule": "cosine", "batch_size": 24, "muon_lr": 0.03}, {"tie_embeddings": False}),
}


LEVER_CADENCE = ((math.inf, 100), (0.1, 25))


def run_levers(names: list[str], text_path: Path, seed: int, log=print,
               cadence: tuple[tuple[float, int], ...] = LEVER_CADENCE) -> dict[str, Any]:
    train, val, vocab = encode(tiny_shakespeare(text_path))
    # every lever's 'auto' dtypes decided before anything trains, as bench.speedrun does
    plans = {name: decide_precision({"recipe": BASE, "seed": seed, **LEVERS[name][0]},
                                    model_for(BASE, **LEVERS[name][1]), vocab)[0]
             for name in names}
    rows, results = [], {}
    for name in names:
        settings, shape = LEVERS[name]
        log(f"lever {name!r}: {settings} {shape}")
        r = train_to_rungs(train, val, vocab, plans[name], model_for(BASE, **shape), RUNGS,
                           cadence)
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
            "cadence": [list(c) for c in cadence], "results": results}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", type=Path, default=DEFAULT_TEXT)
    p.add_argument("--seed", type=int, default=FIRST_SEED)
    p.add_argument("--lever", action="append", choices=list(LEVERS))
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    p.add_argument("--speedrun-cadence", action="store_true",
                   help="evaluate as the speedrun does (every 10 steps within 0.025 of a "
                        "rung) instead of LEVER_CADENCE")
    args = p.parse_args(argv)
    setup_threads()
    data = run_levers(args.lever or list(LEVERS), args.text, args.seed,
                      cadence=CADENCE if args.speedrun_cadence else LEVER_CADENCE)
    write_result(args.out, "speedrun_levers", data)


if __name__ == "__main__":
    main()
