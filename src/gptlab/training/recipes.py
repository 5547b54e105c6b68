"""Training recipes as data (TrainConfig's settings, flat: the speed levers beside the rest,
as the flags name them; TrainConfig.from_dict groups them), each citing where its numbers
come from.
A model preset of the same name picks its recipe up by default (`gptlab train --preset`)."""

from __future__ import annotations

from typing import Any

_SPEEDRUN = dict(
    batch_size=32, gradient_accumulation_steps=1, max_iters=600, lr_decay_iters=600,
    learning_rate=2e-3, min_lr=2e-4, warmup_iters=50, lr_schedule="cosine",
    optimizer="muon", muon_lr=0.02, muon_momentum=0.95,
    weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0, eval_interval=100, eval_iters=20,
)

# The speedrun's record holders build on _SPEEDRUN step by step; each step is what was
# measured to reach the target sooner (BENCHMARKS.md, "speedrun", has every lever's numbers).
# The 1.88 track: a 20-step warm-up and Muon at 0.04, which QK-norm keeps stable.
_TRACK_188 = dict(_SPEEDRUN, batch_size=32, max_iters=450, lr_decay_iters=450,
                  warmup_iters=20, muon_lr=0.04)
# For 1.70 on RoPE: B=24 (B=32's steps cost 30% more), q, k and v orthogonalised apart
# (modded-nanogpt's separate matrices: steps to 1.70 over seeds 1337-1339, 365 / 380 / 355
# -> 310 / 330 / 320), no evaluation at step 0 (the speedrun looks for the step a target is
# reached, not the loss at initialisation).
_LAP2 = dict(_TRACK_188, batch_size=24, max_iters=360, lr_decay_iters=360,
             muon_split_qkv=True, eval_at_start=False)
# Muon's momentum 0.85 (modded-nanogpt's warm-up start) over a 330-step cosine: 300 / 320 /
# 300 steps to 1.70, where 0.95 over 360 took 310 / 350 / 320 and 300 steps leave seed 1338
# short (1.7063).
_LAP3 = dict(_LAP2, muon_momentum=0.85, max_iters=330, lr_decay_iters=330)
# The embedding at 20x AdamW's rate (modded-nanogpt steps its embedding far faster than the
# rest: a row moves only where its token occurs): 270 / 300 / 290 steps against 310 / 330 /
# 300 at 1x, with lower losses at the stop.
_LAP3_4 = dict(_LAP3, embedding_lr=0.04)
# A user's whole command is the record, so the speedrun's presets stop as soon as the whole
# val split meets their target (gptlab.training.val_target), with one checkpoint there; the
# estimates and checkpoints on the way only at the end, where the target was not met.
_STOPPING = dict(eval_at_start=False, eval_interval=10_000, checkpoint_interval=10_000)

# Training recipes (TrainConfig fields). A preset of the same name picks its recipe up by
# default (`gptlab train --preset NAME`).
RECIPES: dict[str, dict[str, Any]] = {
    # nanoGPT README, CPU: --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
    # --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0 --eval_iters=20
    # on top of config/train_shakespeare_char.py (lr 1e-3, min_lr 1e-4, beta2 0.99,
    # warmup 100, eval every 250); weight decay 0.1 and grad clip 1.0 are train.py's.
    "shakespeare-char-cpu": dict(
        batch_size=12, gradient_accumulation_steps=1, max_iters=2000, lr_decay_iters=2000,
        learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, weight_decay=0.1, beta1=0.9,
        beta2=0.99, grad_clip=1.0, eval_interval=250, eval_iters=20, batch_rng="nanogpt",
        dtype="float32",  # nanoGPT on a CPU: no autocast
        allocator="system",  # nor a tuned malloc (gptlab.training.allocator)
    ),
    # gptlab's default CPU recipe: nanoGPT's with twice the peak learning rate (and floor).
    # It reaches val 1.88 on tiny Shakespeare by step ~1400 of 2000, where nanoGPT's ends
    # at 1.89-1.93 across seeds (BENCHMARKS.md, time_to_quality). fp32, eager: on a CPU
    # without fast bf16 autocast loses, and a cold compile costs more than a minute saves.
    "shakespeare-char-cpu-fast": dict(
        batch_size=12, gradient_accumulation_steps=1, max_iters=2000, lr_decay_iters=2000,
        learning_rate=2e-3, min_lr=2e-4, warmup_iters=100, weight_decay=0.1, beta1=0.9,
        beta2=0.99, grad_clip=1.0, eval_interval=250, eval_iters=20,
    ),
    # The CPU speedrun's recipe (bench/speedrun.py; levers in bench/speedrun_levers.py,
    # BENCHMARKS.md), for the preset of the same name (nanoGPT's shape, head untied). Muon
    # at Keller Jordan's lr 0.02 for the hidden matrices, AdamW at the default recipe's 2e-3
    # for embeddings, head and norms; B=32, 600 steps, cosine after 50 warm-up steps. Lever
    # by lever (seed 1337, steps to whole-val 1.88 / 1.70): warm-up-stable-decay 350 / 550,
    # cosine 300 / 500, cosine with the untied head 275 / 475; AdamW alone at its best rate
    # 550 / never. dtype and Muon's dtype stay auto: bf16 only where a probe finds it faster.
    # `gptlab demo` trains it too, for 1000 steps.
    "shakespeare-char-cpu-speedrun": dict(_SPEEDRUN),
    # The speedrun's record at whole-val 1.70, for the preset of the same name (RoPE,
    # QK-norm, zero-init, value residual).
    "shakespeare-char-cpu-speedrun-2": dict(_LAP3_4, **_STOPPING, stop_at_val=1.70),
    # The speedrun's record at whole-val 1.88, for the one-block preset of the same name:
    # the track's recipe, stopping at 1.88, the embedding at 0.04 (steps to 1.88, seeds
    # 1337-1339: 300 / 310 / 290, against 330 / 330 / 300 at 1x).
    "shakespeare-char-cpu-speedrun-188": dict(_TRACK_188, **_STOPPING, stop_at_val=1.88,
                                              embedding_lr=0.04),
    # The shipped model's recipe (gptlab.pretrained; `make pretrained`): the speedrun's
    # (Muon + cosine, AdamW for embeddings, head and norms) run longer on the preset of the
    # same name, 4000 steps of 32 x 128 tokens (16.4M tokens, ~3.8 passes over the embedded
    # corpus's train split). fp32 and fp32 Newton-Schulz fixed, not auto: a retrain must not
    # depend on a timing probe.
    "shakespeare-char-cpu-hour": dict(
        batch_size=32, gradient_accumulation_steps=1, max_iters=4000, lr_decay_iters=4000,
        learning_rate=2e-3, min_lr=2e-4, warmup_iters=100, lr_schedule="cosine",
        optimizer="muon", muon_lr=0.02, muon_momentum=0.95,
        weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0, eval_interval=500,
        eval_iters=20, dtype="float32", muon_dtype="float32",
    ),
    # nanoGPT config/train_shakespeare_char.py (its GPU recipe).
    "shakespeare-char": dict(
        batch_size=64, gradient_accumulation_steps=1, max_iters=5000, lr_decay_iters=5000,
        learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, weight_decay=0.1, beta1=0.9,
        beta2=0.99, grad_clip=1.0, eval_interval=250, eval_iters=200,
    ),
}
