"""Training recipes as data (TrainConfig fields), each citing where its numbers come from.
A model preset of the same name picks its recipe up by default (`gptlab train --preset`)."""

from __future__ import annotations

from typing import Any

_SPEEDRUN = dict(
    batch_size=32, gradient_accumulation_steps=1, max_iters=600, lr_decay_iters=600,
    learning_rate=2e-3, min_lr=2e-4, warmup_iters=50, lr_schedule="cosine",
    optimizer="muon", muon_lr=0.02, muon_momentum=0.95,
    weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0, eval_interval=100, eval_iters=20,
)

# The speedrun's second lap (issue 28) and its 1.88 track, which keeps the second pass's
# B=32 and 450 steps.
_TRACK_188 = dict(_SPEEDRUN, batch_size=32, max_iters=450, lr_decay_iters=450,
                  warmup_iters=20, muon_lr=0.04)
_LAP2 = dict(_TRACK_188, batch_size=24, max_iters=360, lr_decay_iters=360,
             muon_split_qkv=True, eval_at_start=False)
# The third lap's third pass: Muon's momentum 0.85 (modded-nanogpt's warm-up start) and
# a 330-step cosine. Steps to whole-val 1.70, the whole command, seeds 1337 / 1338 /
# 1339: lap 2's 310 / 350 / 320; momentum 0.9 310 / 340 / 300, 0.85 300 / 330 / 310,
# 0.8 300 / 340 / 310; 0.85 over 330 steps 300 / 320 / 300, over 320 310 / 320 / 300,
# over 300 seed 1338 never (1.7063 at its end). Muon's 4 Newton-Schulz steps 330 / 360 /
# 330; Adam's betas (0.8, 0.95) 310, no clipping 320, a 10-step warm-up 330, AdamW
# without weight decay 320 (seed 1337: BENCHMARKS.md, speedrun, lap 3).
_LAP3 = dict(_LAP2, muon_momentum=0.85, max_iters=330, lr_decay_iters=330)
# The third lap's fourth pass: the embedding at 20x AdamW's rate (modded-nanogpt steps its
# embedding far faster than the rest). Steps to whole-val 1.70 (seeds 1337 / 1338 / 1339,
# the looks as they were then): 310 / 330 / 300 at 1x, 310 / 330 / 300 at 5x, 270 / 300 /
# 290 at 10x and at 20x (lower losses at the stop: 1.6876 / 1.6767 / 1.6810 against
# 1.6988 / 1.6883 / 1.6886), 270 / 310 / 290 at 30x; the head at half or twice the rate
# (with 10x) 290 / 330 / 290 and 280 / 310 / 300.
_LAP3_4 = dict(_LAP3, embedding_lr=0.04)
# The third lap (issue 41): a user's whole command is the record, so the speedrun's presets
# stop as soon as the whole val split meets their target (gptlab.training.val_target),
# with one checkpoint there; the eval_iters estimates and checkpoints on the way (with
# best/ and loss.png each time) only at the end, where the target was not met.
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
    # The speedrun's second lap (issue 28), for the preset of the same name: the first
    # lap's with a 20-step warm-up, Muon at 0.04 (QK-norm keeps the attention logits in
    # range at the higher rate; without it 0.04 was slower than 0.02), B=24 since the
    # lap's third pass (its model's RoPE; B=32's steps cost 30% more on the development
    # VM), and since the fourth Muon orthogonalising q, k and v apart (modded-nanogpt's
    # separate matrices) over 360 steps instead of 450: seeds 1337-1339, steps to
    # whole-val 1.70 365 / 380 / 355 before, 310 / 330 / 320 after. No evaluation at step
    # 0: the speedrun looks for the step a rung is reached (BENCHMARKS.md, lap 2, fourth
    # pass). Since the third lap (issue 41) it stops at whole-val 1.70, and since its third
    # pass trains with Muon's momentum at 0.85 over 330 steps (_LAP3), since its fourth
    # with the embedding at 0.04 (_LAP3_4).
    "shakespeare-char-cpu-speedrun-2": dict(_LAP3_4, **_STOPPING, stop_at_val=1.70),
    # The 1.88 track's (issue 28): the second lap's as its second pass left it (B=32, 450
    # steps, q, k and v orthogonalised together), on one block; since the third lap it
    # stops at whole-val 1.88, without the evaluation at step 0.
    # Since the third lap's fourth pass with the embedding at 0.04 too: steps to 1.88 (seeds
    # 1337 / 1338 / 1339) 330 / 330 / 300 before, 300 / 310 / 290 after.
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
