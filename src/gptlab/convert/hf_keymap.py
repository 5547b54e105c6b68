"""Where each of our weights lives in a Hugging Face checkpoint: data, not code.

One `KeyMap` per architecture. Names are ours on the left (as in `GPT.state_dict()`),
theirs on the right; a block weight made of several of theirs is their tensors
concatenated along dim 0 (our fused qkv from Llama's q/k/v_proj). `transposed` lists the
weights GPT-2 stores as Conv1D, (in, out), where our nn.Linear is (out, in);
`head_interleaved` the fused qkv that GPT-NeoX orders head by head; `position_offset` the
rows OPT keeps before position 0 in its position table. `always_present` lists
what their architecture always has and a model of ours may not: it is written as what
computes the same (zero biases; for GPT-2's learned position table, the table our
sinusoidal positions compute, or zeros for none). gptlab.convert.hf does the moving and checks
every shape; the model knows nothing of any of this.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeyMap:
    model_type: str  # config.json's "model_type"
    architecture: str  # the class `AutoModelForCausalLM` builds, written to "architectures"
    base_prefix: str  # their base model's prefix inside the LM-head model's state dict
    block_prefix: str  # block i's prefix, after base_prefix
    top: dict[str, str]  # ours -> theirs, outside the blocks (full names)
    block: dict[str, tuple[str, ...]]  # ours -> theirs inside block i, concatenated on dim 0
    transposed: frozenset[str]  # our block names stored transposed on their side
    ignored: tuple[str, ...]  # suffixes of buffers their checkpoints may carry, not weights
    # Our names (top or inside a block) they always have, even where our model has none.
    always_present: frozenset[str] = frozenset()
    # Our block names whose rows they order head by head (q_h, k_h, v_h for each head h),
    # where ours are all heads' q, then all k, then all v.
    head_interleaved: frozenset[str] = frozenset()
    # Rows of their position table before position 0's (OPT keeps 2 for padding).
    position_offset: int = 0


GPT2 = KeyMap(
    model_type="gpt2",
    architecture="GPT2LMHeadModel",
    base_prefix="transformer.",
    block_prefix="h.{i}.",
    top={
        "wte.weight": "transformer.wte.weight",
        "wpe.weight": "transformer.wpe.weight",
        "ln_f.weight": "transformer.ln_f.weight",
        "ln_f.bias": "transformer.ln_f.bias",
        "lm_head.weight": "lm_head.weight",
    },
    block={
        "norm_1.weight": ("ln_1.weight",),
        "norm_1.bias": ("ln_1.bias",),
        "attn.qkv.weight": ("attn.c_attn.weight",),  # (C, 3C): q, k, v side by side
        "attn.qkv.bias": ("attn.c_attn.bias",),
        "attn.proj.weight": ("attn.c_proj.weight",),
        "attn.proj.bias": ("attn.c_proj.bias",),
        "norm_2.weight": ("ln_2.weight",),
        "norm_2.bias": ("ln_2.bias",),
        "mlp.fc.weight": ("mlp.c_fc.weight",),
        "mlp.fc.bias": ("mlp.c_fc.bias",),
        "mlp.proj.weight": ("mlp.c_proj.weight",),
        "mlp.proj.bias": ("mlp.c_proj.bias",),
    },
    # Conv1D stores (in, out): y = x @ W + b.
    transposed=frozenset({"attn.qkv.weight", "attn.proj.weight", "mlp.fc.weight",
                          "mlp.proj.weight"}),
    # The causal-mask buffers older GPT-2 checkpoints saved (openai-community/gpt2 has them).
    ignored=(".attn.bias", ".attn.masked_bias"),
    # GPT-2 always has biases and a learned position table.
    always_present=frozenset({"wpe.weight", "ln_f.bias", "norm_1.bias", "attn.qkv.bias",
                              "attn.proj.bias", "norm_2.bias", "mlp.fc.bias", "mlp.proj.bias"}),
)

LLAMA = KeyMap(
    model_type="llama",
    architecture="LlamaForCausalLM",
    base_prefix="model.",
    block_prefix="layers.{i}.",
    top={
        "wte.weight": "model.embed_tokens.weight",
        "ln_f.weight": "model.norm.weight",
        "lm_head.weight": "lm_head.weight",
    },
    block={
        "norm_1.weight": ("input_layernorm.weight",),
        "attn.qkv.weight": ("self_attn.q_proj.weight", "self_attn.k_proj.weight",
                            "self_attn.v_proj.weight"),
        "attn.qkv.bias": ("self_attn.q_proj.bias", "self_attn.k_proj.bias",
                          "self_attn.v_proj.bias"),
        "attn.proj.weight": ("self_attn.o_proj.weight",),
        "attn.proj.bias": ("self_attn.o_proj.bias",),
        "norm_2.weight": ("post_attention_layernorm.weight",),
        "mlp.gate.weight": ("mlp.gate_proj.weight",),
        "mlp.gate.bias": ("mlp.gate_proj.bias",),
        "mlp.up.weight": ("mlp.up_proj.weight",),
        "mlp.up.bias": ("mlp.up_proj.bias",),
        "mlp.proj.weight": ("mlp.down_proj.weight",),
        "mlp.proj.bias": ("mlp.down_proj.bias",),
    },
    transposed=frozenset(),
    # Older Llama checkpoints saved RoPE's inverse frequencies; we recompute them.
    ignored=(".rotary_emb.inv_freq",),
)

GPT_NEOX = KeyMap(
    model_type="gpt_neox",
    architecture="GPTNeoXForCausalLM",
    base_prefix="gpt_neox.",
    block_prefix="layers.{i}.",
    top={
        "wte.weight": "gpt_neox.embed_in.weight",
        "ln_f.weight": "gpt_neox.final_layer_norm.weight",
        "ln_f.bias": "gpt_neox.final_layer_norm.bias",
        "lm_head.weight": "lm_head.weight",  # `embed_out` before transformers 5
    },
    block={
        "norm_1.weight": ("input_layernorm.weight",),
        "norm_1.bias": ("input_layernorm.bias",),
        "attn.qkv.weight": ("attention.query_key_value.weight",),
        "attn.qkv.bias": ("attention.query_key_value.bias",),
        "attn.proj.weight": ("attention.dense.weight",),
        "attn.proj.bias": ("attention.dense.bias",),
        "norm_2.weight": ("post_attention_layernorm.weight",),
        "norm_2.bias": ("post_attention_layernorm.bias",),
        "mlp.fc.weight": ("mlp.dense_h_to_4h.weight",),
        "mlp.fc.bias": ("mlp.dense_h_to_4h.bias",),
        "mlp.proj.weight": ("mlp.dense_4h_to_h.weight",),
        "mlp.proj.bias": ("mlp.dense_4h_to_h.bias",),
    },
    transposed=frozenset(),
    # Causal-mask and RoPE buffers that older GPT-NeoX checkpoints (Pythia) saved.
    ignored=(".attention.bias", ".attention.masked_bias", ".rotary_emb.inv_freq"),
    # attention_bias switches the attention's biases; the norms and the MLP always have them.
    always_present=frozenset({"ln_f.bias", "norm_1.bias", "norm_2.bias", "mlp.fc.bias",
                              "mlp.proj.bias"}),
    head_interleaved=frozenset({"attn.qkv.weight", "attn.qkv.bias"}),
)

# Written for post-norm models only (do_layer_norm_before=false, as OPT-350m); pre-norm
# ones go to GPT-2, their usual home. (GPT-1, openai-gpt, is post-norm too, but has tanh
# GELU only, a tied head only, and masks with -1e4 rather than -inf.)
OPT = KeyMap(
    model_type="opt",
    architecture="OPTForCausalLM",
    base_prefix="model.decoder.",
    block_prefix="layers.{i}.",
    top={
        "wte.weight": "model.decoder.embed_tokens.weight",
        "wpe.weight": "model.decoder.embed_positions.weight",
        "ln_f.weight": "model.decoder.final_layer_norm.weight",  # pre-norm OPT only
        "ln_f.bias": "model.decoder.final_layer_norm.bias",
        "lm_head.weight": "lm_head.weight",
    },
    block={
        "norm_1.weight": ("self_attn_layer_norm.weight",),
        "norm_1.bias": ("self_attn_layer_norm.bias",),
        "attn.qkv.weight": ("self_attn.q_proj.weight", "self_attn.k_proj.weight",
                            "self_attn.v_proj.weight"),
        "attn.qkv.bias": ("self_attn.q_proj.bias", "self_attn.k_proj.bias",
                          "self_attn.v_proj.bias"),
        "attn.proj.weight": ("self_attn.out_proj.weight",),
        "attn.proj.bias": ("self_attn.out_proj.bias",),
        "norm_2.weight": ("final_layer_norm.weight",),  # each layer's second norm
        "norm_2.bias": ("final_layer_norm.bias",),
        "mlp.fc.weight": ("fc1.weight",),
        "mlp.fc.bias": ("fc1.bias",),
        "mlp.proj.weight": ("fc2.weight",),
        "mlp.proj.bias": ("fc2.bias",),
    },
    transposed=frozenset(),
    ignored=(),
    # enable_bias switches the linear layers' biases; the norms always have them.
    always_present=frozenset({"wpe.weight", "ln_f.bias", "norm_1.bias", "norm_2.bias"}),
    position_offset=2,
)

KEYMAPS: dict[str, KeyMap] = {m.model_type: m for m in (GPT2, LLAMA, GPT_NEOX, OPT)}
