"""Named configs as data, each citing where its numbers come from: model presets
(GPTConfig fields) and training recipes (TrainConfig fields)."""

from __future__ import annotations

from typing import Any

from gptlab.errors import UsageError

_GPT2 = dict(
    vocab_size=50257, block_size=1024, pos_encoding="learned", norm="layernorm",
    norm_eps=1e-5, norm_position="pre", mlp="gelu_tanh", bias=True, tie_embeddings=True,
)
_LLAMA2 = dict(
    vocab_size=32000, block_size=4096, pos_encoding="rope", rope_base=10000.0,
    norm="rmsnorm", norm_eps=1e-5, norm_position="pre", mlp="swiglu", bias=False,
    tie_embeddings=False,
)
# nanoGPT's char-level Shakespeare recipes; the vocabulary comes from the data
# (65 symbols for tiny Shakespeare), so training overrides vocab_size.
_SHAKESPEARE_CHAR = dict(
    vocab_size=65, pos_encoding="learned", norm="layernorm", norm_position="pre",
    mlp="gelu", tie_embeddings=True,
)

PRESETS: dict[str, dict[str, Any]] = {
    # Hugging Face openai-community/gpt2* config.json (Radford et al. 2019).
    "gpt2": dict(_GPT2, n_layer=12, n_head=12, n_embd=768),
    "gpt2-medium": dict(_GPT2, n_layer=24, n_head=16, n_embd=1024),
    "gpt2-large": dict(_GPT2, n_layer=36, n_head=20, n_embd=1280),
    "gpt2-xl": dict(_GPT2, n_layer=48, n_head=25, n_embd=1600),
    # Hugging Face meta-llama/Llama-2-*-hf config.json (Touvron et al. 2023).
    "llama2-7b": dict(_LLAMA2, n_layer=32, n_head=32, n_embd=4096, ffn_hidden=11008),
    "llama2-13b": dict(_LLAMA2, n_layer=40, n_head=40, n_embd=5120, ffn_hidden=13824),
    "llama2-70b": dict(
        _LLAMA2, n_layer=80, n_head=64, n_kv_head=8, n_embd=8192, ffn_hidden=28672
    ),
    # nanoGPT README, "I only have a macbook": --n_layer=4 --n_head=4 --n_embd=128
    # --block_size=64 --bias=False --dropout=0.0.
    "shakespeare-char-cpu": dict(
        _SHAKESPEARE_CHAR, block_size=64, n_layer=4, n_head=4, n_embd=128, bias=False,
        dropout=0.0,
    ),
    # The CPU speedrun's model (bench/speedrun.py): nanoGPT's CPU shape with its output
    # head untied from the embedding, which reached whole-val 1.88 in 275 steps instead of
    # 300 (BENCHMARKS.md, speedrun levers). Its recipe has the same name.
    "shakespeare-char-cpu-speedrun": dict(
        _SHAKESPEARE_CHAR, block_size=64, n_layer=4, n_head=4, n_embd=128, bias=False,
        dropout=0.0, tie_embeddings=False,
    ),
    # The CPU speedrun's model at whole-val 1.70 (BENCHMARKS.md, speedrun): the same shape
    # with QK-norm, zero-initialised output projections, a value residual and rotary
    # positions. Seed 1337, steps to 1.88 / 1.70: 200 / 370, against 210 / 415 without the
    # value residual and 230 / 410 with QK-norm alone; RoPE took 1.70 from 390 to 320 steps
    # at B=32 (at 15% more per step). Not exportable to Hugging Face or GGUF (those formats
    # have no QK-norm or value residual for this shape).
    "shakespeare-char-cpu-speedrun-2": dict(
        _SHAKESPEARE_CHAR, block_size=64, n_layer=4, n_head=4, n_embd=128, bias=False,
        dropout=0.0, tie_embeddings=False, qk_norm=True, zero_init_proj=True,
        value_residual=True, pos_encoding="rope",
    ),
    # The CPU speedrun's model at whole-val 1.88: one block of the 1.70 model with learned
    # positions and no value residual (one block has no later layer to mix values into),
    # which has the capacity for 1.88 and not for 1.70 and steps fastest to it. Seed 1337,
    # steps (seconds of training) to 1.88: 1 block 320 (6.6 s), 3 blocks 245 (14.6 s), 4
    # blocks 200 (16.3 s); 2 blocks over 350 steps 225 (9.5 s).
    "shakespeare-char-cpu-speedrun-188": dict(
        _SHAKESPEARE_CHAR, block_size=64, n_layer=1, n_head=4, n_embd=128, bias=False,
        dropout=0.0, tie_embeddings=False, qk_norm=True, zero_init_proj=True,
    ),
    # The model gptlab ships (gptlab.pretrained, `make pretrained`): the speedrun's
    # untied shape scaled to what 2 CPU cores train in about an hour (trials in
    # tools/pretrained.py's commit and the README). Its recipe has the same name.
    "shakespeare-char-cpu-hour": dict(
        _SHAKESPEARE_CHAR, block_size=128, n_layer=6, n_head=6, n_embd=192, bias=False,
        dropout=0.0, tie_embeddings=False,
    ),
    # nanoGPT config/train_shakespeare_char.py (its GPU recipe).
    "shakespeare-char": dict(
        _SHAKESPEARE_CHAR, block_size=256, n_layer=6, n_head=6, n_embd=384, bias=False,
        dropout=0.2,
    ),
    # Tiny shapes for tests: fast on one CPU core, still every feature switched on.
    "tiny-gpt2": dict(_GPT2, vocab_size=97, block_size=32, n_layer=2, n_head=4, n_embd=32),
    "tiny-llama": dict(
        _LLAMA2, vocab_size=97, block_size=32, n_layer=2, n_head=4, n_kv_head=2, n_embd=32,
        ffn_hidden=88,
    ),
}


def preset_dict(name: str) -> dict[str, Any]:
    try:
        return dict(PRESETS[name])
    except KeyError:
        raise UsageError(
            f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}"
        ) from None


