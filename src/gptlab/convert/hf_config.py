"""Configs between gptlab and Hugging Face: GPTConfig <-> the config.json of GPT-2, Llama,
GPT-NeoX and OPT, and which of them (if any) computes a given gptlab model exactly
(`keymap_for`). Plain dictionaries in and out: transformers is not imported here."""

from __future__ import annotations

from typing import Any

from gptlab.convert.hf_keymap import GPT2, GPT_NEOX, KEYMAPS, LLAMA, OPT, KeyMap
from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig

# Hugging Face activation names -> our mlp. "gelu_new" is GPT-2's tanh approximation.
GELU_FROM_HF = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}
# Our GELU MLPs -> the activation_function that computes them.
GELU_TO_HF = {"gelu": "gelu", "gelu_tanh": "gelu_new"}
# OPT's LayerNorms take torch's default epsilon; its config has no field for it.
OPT_NORM_EPS = 1e-5
# Our rope_scaling types that Hugging Face computes identically (see gptlab.model.positional).
# Their "dynamic" takes max_position_embeddings as the training length, so ours goes out only
# where original_max_position_embeddings is the block_size.
ROPE_TYPES_BOTH_WAYS = ("linear", "yarn", "dynamic", "llama3")
# RoPE fields as transformers 4.x spells them (5.x moves them into rope_parameters).
ROPE_4X_KEYS = ("rope_theta", "rope_scaling", "rotary_emb_base", "rotary_pct")
# YaRN's optional keys, the same in both configs (see gptlab.model.rope_scaling._yarn).
YARN_KEYS = ("attention_factor", "mscale", "mscale_all_dim", "beta_fast", "beta_slow", "truncate")


def config_from_hf(hf: dict[str, Any]) -> tuple[GPTConfig, KeyMap]:
    """Their config (a `PretrainedConfig.to_dict()`) -> our GPTConfig and the key map."""
    model_type = hf.get("model_type")
    if model_type == "gpt2":
        return _gpt2_config(hf), GPT2
    if model_type == "llama":
        return _llama_config(hf), LLAMA
    if model_type == "gpt_neox":
        return _neox_config(hf), GPT_NEOX
    if model_type == "opt":
        return _opt_config(hf), OPT
    raise UsageError(
        f"unsupported architecture {model_type!r} ({', '.join(hf.get('architectures') or [])}); "
        f"gptlab converts: {', '.join(KEYMAPS)}"
    )


def _gelu_mlp(hf: dict[str, Any], arch: str, key: str, default: str, note: str = "") -> str:
    """Our mlp for a GELU architecture's activation key, or a UsageError naming it."""
    activation = hf.get(key, default)
    if activation not in GELU_FROM_HF:
        raise UsageError(f"unsupported {arch} {key} {activation!r}{note}; "
                         f"gptlab has: {', '.join(GELU_FROM_HF)}")
    return GELU_FROM_HF[activation]


def _gpt2_config(hf: dict[str, Any]) -> GPTConfig:
    mlp = _gelu_mlp(hf, "GPT-2", "activation_function", "gelu_new")
    for flag, wanted in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                         ("add_cross_attention", False)):
        if hf.get(flag, wanted) != wanted:
            raise UsageError(f"unsupported GPT-2 option {flag}={hf[flag]!r}")
    return GPTConfig(
        vocab_size=hf["vocab_size"], block_size=hf["n_positions"], n_layer=hf["n_layer"],
        n_head=hf["n_head"], n_embd=hf["n_embd"], ffn_hidden=hf.get("n_inner"),
        pos_encoding="learned", norm="layernorm", norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        norm_position="pre", mlp=mlp, bias=True,
        tie_embeddings=hf.get("tie_word_embeddings", True),
        dropout=hf.get("resid_pdrop", 0.0),  # one rate for all three of theirs
    )


def _llama_config(hf: dict[str, Any]) -> GPTConfig:
    if hf.get("hidden_act", "silu") != "silu":
        raise UsageError(f"unsupported Llama hidden_act {hf['hidden_act']!r}; gptlab has: silu")
    n_embd, n_head = hf["hidden_size"], hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or n_embd // n_head
    if head_dim * n_head != n_embd:
        raise UsageError(f"unsupported Llama head_dim {head_dim}: gptlab needs hidden_size / "
                         f"num_attention_heads = {n_embd / n_head:g}")
    attention_bias, mlp_bias = hf.get("attention_bias", False), hf.get("mlp_bias", False)
    if attention_bias != mlp_bias:
        raise UsageError(f"unsupported Llama biases: attention_bias={attention_bias} but "
                         f"mlp_bias={mlp_bias}; gptlab has one `bias` for both")
    rope_base, rope_scaling = rope_from_hf(hf)
    return GPTConfig(
        vocab_size=hf["vocab_size"], block_size=hf["max_position_embeddings"],
        n_layer=hf["num_hidden_layers"], n_head=n_head,
        n_kv_head=hf.get("num_key_value_heads") or n_head, n_embd=n_embd,
        ffn_hidden=hf["intermediate_size"], pos_encoding="rope", rope_base=float(rope_base),
        rope_scaling=rope_scaling, norm="rmsnorm", norm_eps=hf.get("rms_norm_eps", 1e-6),
        norm_position="pre", mlp="swiglu", bias=bool(attention_bias),
        tie_embeddings=hf.get("tie_word_embeddings", False),
        dropout=float(hf.get("attention_dropout") or 0.0),
    )


def _neox_config(hf: dict[str, Any]) -> GPTConfig:
    mlp = _gelu_mlp(hf, "GPT-NeoX", "hidden_act", "gelu")
    if hf.get("use_parallel_residual", True):
        raise UsageError("unsupported GPT-NeoX use_parallel_residual=true (Pythia's x + attn(x) "
                         "+ mlp(x)): gptlab's blocks run attention, then the MLP")
    rope_base, rope_scaling = rope_from_hf(hf)
    return GPTConfig(
        vocab_size=hf["vocab_size"], block_size=hf["max_position_embeddings"],
        n_layer=hf["num_hidden_layers"], n_head=hf["num_attention_heads"],
        n_embd=hf["hidden_size"], ffn_hidden=hf["intermediate_size"], pos_encoding="rope",
        rope_base=float(rope_base), rope_scaling=rope_scaling, norm="layernorm",
        norm_eps=hf.get("layer_norm_eps", 1e-5), norm_position="pre",
        mlp=mlp,
        # Without attention biases, the MLP's and the norms' must be zero (state_from_hf).
        bias=bool(hf.get("attention_bias", True)),
        tie_embeddings=hf.get("tie_word_embeddings", False),
        dropout=float(hf.get("hidden_dropout") or 0.0),
    )


def _opt_config(hf: dict[str, Any]) -> GPTConfig:
    mlp = _gelu_mlp(hf, "OPT", "activation_function", "relu", " (most OPTs are ReLU)")
    n_embd = hf["hidden_size"]
    pre_norm = hf.get("do_layer_norm_before", True)
    for flag, value, wanted in (
            ("word_embed_proj_dim", hf.get("word_embed_proj_dim") or n_embd, n_embd),
            ("layer_norm_elementwise_affine", hf.get("layer_norm_elementwise_affine", True), True),
            ("_remove_final_layer_norm", hf.get("_remove_final_layer_norm", False) and pre_norm,
             False)):
        if value != wanted:
            raise UsageError(f"unsupported OPT option {flag}={value!r}")
    return GPTConfig(
        vocab_size=hf["vocab_size"], block_size=hf["max_position_embeddings"],
        n_layer=hf["num_hidden_layers"], n_head=hf["num_attention_heads"], n_embd=n_embd,
        ffn_hidden=hf["ffn_dim"], pos_encoding="learned", norm="layernorm",
        norm_eps=OPT_NORM_EPS, norm_position="pre" if pre_norm else "post",
        mlp=mlp,
        # Without linear biases, the norms' must be zero (state_from_hf).
        bias=bool(hf.get("enable_bias", True)),
        tie_embeddings=hf.get("tie_word_embeddings", True),
        dropout=float(hf.get("dropout") or 0.0),
    )


def rope_from_hf(hf: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """(rope_base, our rope_scaling) from their config, in transformers 5.x naming
    (`rope_parameters` holding rope_theta) or 4.x (`rope_theta` + `rope_scaling`)."""
    params = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    theta = params.get("rope_theta") or hf.get("rope_theta") or 10000.0
    kind = params.get("rope_type") or params.get("type") or "default"
    partial = params.get("partial_rotary_factor") or hf.get("partial_rotary_factor") or 1.0
    if partial != 1.0:
        raise UsageError(f"unsupported partial_rotary_factor {partial}: gptlab rotates whole heads")
    if kind == "default":
        return theta, None
    if kind not in ROPE_TYPES_BOTH_WAYS:
        raise UsageError(f"unsupported rope scaling {kind!r}; gptlab converts: "
                         f"{', '.join(ROPE_TYPES_BOTH_WAYS)}")
    factor = params.get("factor")
    original = params.get("original_max_position_embeddings") or hf.get(
        "max_position_embeddings")  # transformers' own default for yarn and llama3
    if kind == "linear":
        return theta, {"type": "linear", "factor": factor}
    if kind == "dynamic":  # their training length is max_position_embeddings, always
        return theta, {"type": "dynamic", "factor": factor,
                       "original_max_position_embeddings": hf["max_position_embeddings"]}
    if kind == "llama3":
        return theta, {"type": "llama3", "factor": factor,
                       "low_freq_factor": params["low_freq_factor"],
                       "high_freq_factor": params["high_freq_factor"],
                       "original_max_position_embeddings": original}
    if factor is None:  # transformers' rule (DeepSeek-V3 style configs)
        factor = hf["max_position_embeddings"] / original
    scaling = {"type": "yarn", "factor": factor, "original_max_position_embeddings": original}
    # Carried through as they are: gptlab.model.positional computes the temperature from them.
    for key in YARN_KEYS:
        if params.get(key) is not None:
            scaling[key] = params[key]
    return theta, scaling


def keymap_for(config: GPTConfig) -> KeyMap:
    """The Hugging Face architecture that computes exactly what a model of `config` does;
    a one-line error naming what none of them can hold, and why."""
    if config.later_options():
        raise UsageError(f"no Hugging Face architecture computes "
                         f"{', '.join(config.later_options())}; export a model without them")
    if config.pos_encoding == "alibi":
        raise UsageError(
            "pos_encoding 'alibi' is not exported: none of the Hugging Face architectures "
            "gptlab writes (GPT-2, GPT-NeoX, Llama, OPT) has ALiBi, and the ones that do "
            "differ (BLOOM normalises the embeddings; MPT orders the slopes of a head count "
            "that is not a power of two otherwise than Press et al.)")
    gelu_layernorm = config.norm == "layernorm" and config.mlp in GELU_TO_HF
    if config.norm_position == "post":
        if not gelu_layernorm or config.pos_encoding == "rope":
            raise UsageError(
                "Hugging Face OPT, which holds gptlab's post-norm models, is layernorm + "
                "gelu/gelu_tanh with learned (or sinusoidal, none) positions; this post-norm "
                f"model has norm={config.norm!r}, mlp={config.mlp!r}, "
                f"pos_encoding={config.pos_encoding!r}")
        if config.norm_eps != OPT_NORM_EPS:
            raise UsageError(f"Hugging Face OPT, which holds gptlab's post-norm models, fixes "
                             f"LayerNorm's epsilon at {OPT_NORM_EPS:g}; this model has norm_eps "
                             f"{config.norm_eps:g}")
        keymap, name = OPT, "OPT"
    elif gelu_layernorm:
        keymap, name = (GPT_NEOX, "GPT-NeoX") if config.pos_encoding == "rope" else (GPT2, "GPT-2")
    elif (config.norm, config.mlp, config.pos_encoding) == ("rmsnorm", "swiglu", "rope"):
        return LLAMA
    else:
        raise UsageError(
            f"no Hugging Face architecture for norm={config.norm!r}, mlp={config.mlp!r}, "
            f"pos_encoding={config.pos_encoding!r}: GPT-2 is layernorm + gelu/gelu_tanh with "
            "learned (or sinusoidal, none) positions, GPT-NeoX the same with rope, Llama is "
            "rmsnorm + swiglu + rope")
    if config.n_kv_head != config.n_head:
        raise UsageError(f"Hugging Face {name} has no grouped-query attention "
                         f"(n_kv_head {config.n_kv_head} != n_head {config.n_head})")
    return keymap


def config_to_hf(config: GPTConfig) -> tuple[dict[str, Any], KeyMap]:
    """Our GPTConfig -> their config fields and the key map (see `keymap_for`)."""
    keymap = keymap_for(config)
    return _FIELDS_TO_HF[keymap.model_type](config), keymap


def _gpt2_fields(config: GPTConfig) -> dict[str, Any]:
    """GPT-2 always has biases and a learned position table; a model without them is written
    with zeros, or the table its positions compute (see hf_keymap.GPT2.always_present)."""
    return {
        "vocab_size": config.vocab_size, "n_positions": config.block_size,
        "n_layer": config.n_layer, "n_head": config.n_head, "n_embd": config.n_embd,
        "n_inner": config.ffn_hidden, "activation_function": GELU_TO_HF[config.mlp],
        "layer_norm_epsilon": config.norm_eps, "tie_word_embeddings": config.tie_embeddings,
        "resid_pdrop": config.dropout, "embd_pdrop": config.dropout,
        "attn_pdrop": config.dropout, "bos_token_id": None, "eos_token_id": None,
    }


def _llama_fields(config: GPTConfig) -> dict[str, Any]:
    return {
        "vocab_size": config.vocab_size, "max_position_embeddings": config.block_size,
        "num_hidden_layers": config.n_layer, "num_attention_heads": config.n_head,
        "num_key_value_heads": config.n_kv_head, "hidden_size": config.n_embd,
        "head_dim": config.head_dim, "intermediate_size": config.ffn_hidden,
        "hidden_act": "silu", "rms_norm_eps": config.norm_eps,
        "attention_bias": config.bias, "mlp_bias": config.bias,
        "tie_word_embeddings": config.tie_embeddings, "attention_dropout": config.dropout,
        "bos_token_id": None, "eos_token_id": None, **rope_to_hf(config),
    }


def _neox_fields(config: GPTConfig) -> dict[str, Any]:
    """Sequential residual, RoPE on whole heads; the MLP and the norms always have biases,
    so a bias-free model gets zero ones there (see hf_keymap.GPT_NEOX.always_present)."""
    rope = rope_to_hf(config)
    return {
        "vocab_size": config.vocab_size, "max_position_embeddings": config.block_size,
        "num_hidden_layers": config.n_layer, "num_attention_heads": config.n_head,
        "hidden_size": config.n_embd, "intermediate_size": config.ffn_hidden,
        "hidden_act": GELU_TO_HF[config.mlp], "layer_norm_eps": config.norm_eps,
        "use_parallel_residual": False, "attention_bias": config.bias,
        # GPT-NeoX's own names for rope_theta and partial_rotary_factor (4.x and 5.x).
        "rotary_emb_base": rope.pop("rope_theta"), "rotary_pct": 1.0, **rope,
        "tie_word_embeddings": config.tie_embeddings, "attention_dropout": config.dropout,
        "hidden_dropout": config.dropout, "bos_token_id": None, "eos_token_id": None,
    }


def _opt_fields(config: GPTConfig) -> dict[str, Any]:
    """Post-norm with no final norm, as ours; the norms always have biases, and the position
    table always exists (see hf_keymap.OPT)."""
    return {
        "vocab_size": config.vocab_size, "max_position_embeddings": config.block_size,
        "num_hidden_layers": config.n_layer, "num_attention_heads": config.n_head,
        "hidden_size": config.n_embd, "word_embed_proj_dim": config.n_embd,
        "ffn_dim": config.ffn_hidden, "activation_function": GELU_TO_HF[config.mlp],
        "do_layer_norm_before": config.norm_position == "pre", "enable_bias": config.bias,
        "tie_word_embeddings": config.tie_embeddings, "dropout": config.dropout,
        "attention_dropout": config.dropout, "pad_token_id": None, "bos_token_id": None,
        "eos_token_id": None,
    }


_FIELDS_TO_HF = {GPT2.model_type: _gpt2_fields, LLAMA.model_type: _llama_fields,
                 GPT_NEOX.model_type: _neox_fields, OPT.model_type: _opt_fields}


def rope_to_hf(config: GPTConfig) -> dict[str, Any]:
    """rope_theta and rope_scaling in the 4.x spelling, which 5.x also reads (it moves both
    into rope_parameters)."""
    scaling = config.rope_scaling
    if scaling is None:
        return {"rope_theta": config.rope_base}
    kind = scaling["type"]
    if kind not in ROPE_TYPES_BOTH_WAYS:
        raise UsageError(f"gptlab's static {kind!r} rope scaling has no Hugging Face equivalent "
                         "(their 'dynamic' NTK changes with sequence length)")
    theirs = {k: v for k, v in scaling.items() if k != "type"}
    if kind == "dynamic":
        if theirs.pop("original_max_position_embeddings") != config.block_size:
            raise UsageError("Hugging Face's dynamic rope scaling takes "
                             "max_position_embeddings (block_size) as the training length; "
                             "this model's original_max_position_embeddings differs")
    if kind == "llama3":  # our defaults, which transformers requires spelled out
        theirs.setdefault("low_freq_factor", 1.0)
        theirs.setdefault("high_freq_factor", 4.0)
    return {"rope_theta": config.rope_base,
            "rope_scaling": {"rope_type": kind, "rope_theta": config.rope_base, **theirs}}
