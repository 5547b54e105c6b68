"""Hugging Face GPT-2, Llama, GPT-NeoX and OPT weights in and out.

`from_hf(model_or_dir)` builds our GPT from a `transformers` GPT2LMHeadModel,
LlamaForCausalLM, GPTNeoXForCausalLM or OPTForCausalLM: an instance, a local directory
(config.json plus model.safetensors, sharded safetensors with an index, or
pytorch_model.bin read with weights_only loading), or a hub name already in the Hugging
Face cache (or downloadable, when online).
`to_hf(model, out_dir)` writes config.json + model.safetensors that
`transformers.AutoModelForCausalLM.from_pretrained(out_dir)` loads, for every model one of
them computes exactly (`keymap_for` says which, or why none).

Where each weight goes is data, in gptlab.hf_keymap; this module translates configs, moves
tensors and checks every shape. `transformers` is optional (`pip install 'gptlab[hf]'`) and
imported only when a conversion runs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from gptlab.atomic import atomic_path, atomic_write_text, ensure_dir, read_json
from gptlab.checkpoint import weights_state
from gptlab.config import GPTConfig
from gptlab.errors import GptlabError, UsageError
from gptlab.hf_keymap import GPT2, GPT_NEOX, KEYMAPS, LLAMA, OPT, KeyMap
from gptlab.model import GPT, unwrap

INSTALL_HINT = "pip install 'gptlab[hf]'"
HF_CONFIG = "config.json"
HF_TOKENIZER = "tokenizer.json"
HF_TOKENIZER_CONFIG = "tokenizer_config.json"
SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_BIN = "pytorch_model.bin"
PYTORCH_BIN_INDEX = "pytorch_model.bin.index.json"

# Hugging Face activation names -> our mlp. "gelu_new" is GPT-2's tanh approximation.
GELU_FROM_HF = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}
# Our GELU MLPs -> the activation_function that computes them.
GELU_TO_HF = {"gelu": "gelu", "gelu_tanh": "gelu_new"}
# OPT's LayerNorms take torch's default epsilon; its config has no field for it.
OPT_NORM_EPS = 1e-5
# Our rope_scaling types that Hugging Face computes identically (see gptlab.positional).
ROPE_TYPES_BOTH_WAYS = ("linear", "yarn", "llama3")
# RoPE fields as transformers 4.x spells them (5.x moves them into rope_parameters).
ROPE_4X_KEYS = ("rope_theta", "rope_scaling", "rotary_emb_base", "rotary_pct")
# YaRN's optional keys, the same in both configs (see gptlab.positional._yarn).
YARN_KEYS = ("attention_factor", "mscale", "mscale_all_dim", "beta_fast", "beta_slow", "truncate")


class TransformersMissing(GptlabError, ImportError):
    """`transformers` is not installed; the message says what to install."""


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise TransformersMissing(
            f"Hugging Face conversion needs the `transformers` package: {INSTALL_HINT}"
        ) from None
    return transformers


# ----------------------------------------------------------------------------- configs


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


def _gpt2_config(hf: dict[str, Any]) -> GPTConfig:
    activation = hf.get("activation_function", "gelu_new")
    if activation not in GELU_FROM_HF:
        raise UsageError(f"unsupported GPT-2 activation_function {activation!r}; "
                         f"gptlab has: {', '.join(GELU_FROM_HF)}")
    for flag, wanted in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                         ("add_cross_attention", False)):
        if hf.get(flag, wanted) != wanted:
            raise UsageError(f"unsupported GPT-2 option {flag}={hf[flag]!r}")
    return GPTConfig(
        vocab_size=hf["vocab_size"], block_size=hf["n_positions"], n_layer=hf["n_layer"],
        n_head=hf["n_head"], n_embd=hf["n_embd"], ffn_hidden=hf.get("n_inner"),
        pos_encoding="learned", norm="layernorm", norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        norm_position="pre", mlp=GELU_FROM_HF[activation], bias=True,
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
    activation = hf.get("hidden_act", "gelu")
    if activation not in GELU_FROM_HF:
        raise UsageError(f"unsupported GPT-NeoX hidden_act {activation!r}; "
                         f"gptlab has: {', '.join(GELU_FROM_HF)}")
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
        mlp=GELU_FROM_HF[activation],
        # Without attention biases, the MLP's and the norms' must be zero (state_from_hf).
        bias=bool(hf.get("attention_bias", True)),
        tie_embeddings=hf.get("tie_word_embeddings", False),
        dropout=float(hf.get("hidden_dropout") or 0.0),
    )


def _opt_config(hf: dict[str, Any]) -> GPTConfig:
    activation = hf.get("activation_function", "relu")
    if activation not in GELU_FROM_HF:
        raise UsageError(f"unsupported OPT activation_function {activation!r} (most OPTs are "
                         f"ReLU); gptlab has: {', '.join(GELU_FROM_HF)}")
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
        mlp=GELU_FROM_HF[activation],
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
    if kind == "dynamic":
        raise UsageError(
            "unsupported rope scaling 'dynamic' (dynamic NTK): it changes the base with the "
            "sequence length at run time, and gptlab's 'ntk' is static, so they differ"
        )
    if kind not in ROPE_TYPES_BOTH_WAYS:
        raise UsageError(f"unsupported rope scaling {kind!r}; gptlab converts: "
                         f"{', '.join(ROPE_TYPES_BOTH_WAYS)}")
    factor = params.get("factor")
    original = params.get("original_max_position_embeddings") or hf.get(
        "max_position_embeddings")  # transformers' own default for yarn and llama3
    if kind == "linear":
        return theta, {"type": "linear", "factor": factor}
    if kind == "llama3":
        return theta, {"type": "llama3", "factor": factor,
                       "low_freq_factor": params["low_freq_factor"],
                       "high_freq_factor": params["high_freq_factor"],
                       "original_max_position_embeddings": original}
    if factor is None:  # transformers' rule (DeepSeek-V3 style configs)
        factor = hf["max_position_embeddings"] / original
    scaling = {"type": "yarn", "factor": factor, "original_max_position_embeddings": original}
    # Carried through as they are: gptlab.positional computes the temperature from them.
    for key in YARN_KEYS:
        if params.get(key) is not None:
            scaling[key] = params[key]
    return theta, scaling


def keymap_for(config: GPTConfig) -> KeyMap:
    """The Hugging Face architecture that computes exactly what a model of `config` does;
    a one-line error naming what none of them can hold, and why."""
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
    if kind == "llama3":  # our defaults, which transformers requires spelled out
        theirs.setdefault("low_freq_factor", 1.0)
        theirs.setdefault("high_freq_factor", 4.0)
    return {"rope_theta": config.rope_base,
            "rope_scaling": {"rope_type": kind, "rope_theta": config.rope_base, **theirs}}


# ----------------------------------------------------------------------------- weights


def _their_names(ours: str, keymap: KeyMap) -> tuple[tuple[str, ...], str | None]:
    """Their full names for one of our weights, and its name inside a block (or None)."""
    if ours in keymap.top:
        return (keymap.top[ours],), None
    match = re.fullmatch(r"blocks\.(\d+)\.(.+)", ours)
    if match is None or match.group(2) not in keymap.block:
        raise GptlabError(f"no {keymap.model_type} name for our weight {ours}")
    prefix = keymap.base_prefix + keymap.block_prefix.format(i=match.group(1))
    local = match.group(2)
    return tuple(prefix + name for name in keymap.block[local]), local


def _part_sizes(config: GPTConfig, n_parts: int) -> list[int]:
    """Rows of each of their tensors in one of ours; only qkv is made of several."""
    assert n_parts == 3, "only the fused qkv projection is split"
    return [config.n_head * config.head_dim, config.kv_dim, config.kv_dim]


def _with_prefix(state: dict[str, Tensor], keymap: KeyMap) -> dict[str, Tensor]:
    """A base model's checkpoint (GPT2Model, LlamaModel; openai-community/gpt2 is one) names
    its weights without the LM-head model's prefix; give them the prefix."""
    lm_head = keymap.top["lm_head.weight"]
    return {
        name if name.startswith(keymap.base_prefix) or name == lm_head
        else keymap.base_prefix + name: tensor
        for name, tensor in state.items()
    }


def state_from_hf(
    theirs: dict[str, Tensor], model: GPT, keymap: KeyMap, source: str
) -> dict[str, Tensor]:
    """Their state dict -> ours for `model`, checking names and every shape."""
    theirs = _with_prefix(theirs, keymap)
    config = model.config
    ours: dict[str, Tensor] = {}
    used: set[str] = set()
    for name, expected in weights_state(model).items():
        names, local = _their_names(name, keymap)
        missing = [n for n in names if n not in theirs]
        if missing:
            raise UsageError(f"{source} has no {missing[0]} (needed for {name})")
        transposed = local in keymap.transposed
        rows_before = keymap.position_offset if name == "wpe.weight" else 0
        wanted = expected.split(_part_sizes(config, len(names))) if len(names) > 1 else [expected]
        parts = []
        for their_name, want in zip(names, wanted, strict=True):
            tensor = theirs[their_name]
            want_shape = tuple(want.t().shape if transposed else want.shape)
            want_shape = (want_shape[0] + rows_before, *want_shape[1:])
            if tuple(tensor.shape) != want_shape:
                raise UsageError(f"{source}: {their_name} has shape {tuple(tensor.shape)}, "
                                 f"but its config says {want_shape}")
            parts.append(tensor.t() if transposed else tensor[rows_before:])
            used.add(their_name)
        ours[name] = torch.cat(parts, dim=0) if len(parts) > 1 else parts[0]
        if local in keymap.head_interleaved:
            ours[name] = _heads_grouped(ours[name], config.n_head)
    for name in _always_present(config, keymap):
        if name in ours:
            continue
        (their_name,), _ = _their_names(name, keymap)
        if their_name in theirs and theirs[their_name].any():
            raise UsageError(f"{source}: {their_name} is not zero, but its config has no "
                             "attention biases and gptlab has one `bias` for every layer")
        used.add(their_name)  # zeros: the model without it computes the same
    if config.tie_embeddings:
        used.add(keymap.top["lm_head.weight"])  # tied: their copy of wte, if they saved one
    unexpected = sorted(n for n in set(theirs) - used if not n.endswith(keymap.ignored))
    if unexpected:
        more = f" (+{len(unexpected) - 3} more)" if len(unexpected) > 3 else ""
        raise UsageError(f"{source} has weights its config does not account for: "
                         f"{', '.join(unexpected[:3])}{more}")
    return ours


def state_to_hf(model: GPT, keymap: KeyMap) -> dict[str, Tensor]:
    """Our weights under their names and layouts (a tied lm_head is left out, as they do),
    with what their architecture always has and ours lacks (see `_stand_ins`)."""
    theirs: dict[str, Tensor] = {}
    ours = weights_state(model)
    ours.update(_stand_ins(model, ours, keymap))
    for name, tensor in ours.items():
        names, local = _their_names(name, keymap)
        parts = tensor.split(_part_sizes(model.config, len(names))) if len(names) > 1 else [tensor]
        for their_name, part in zip(names, parts, strict=True):
            part = part.t() if local in keymap.transposed else part
            if local in keymap.head_interleaved:
                part = _heads_interleaved(part, model.config.n_head)
            if name == "wpe.weight" and keymap.position_offset:  # rows no position of ours uses
                part = torch.cat([part.new_zeros(keymap.position_offset, part.shape[1]), part])
            theirs[their_name] = part.contiguous().clone()  # own storage: safetensors insists
    return theirs


def _always_present(config: GPTConfig, keymap: KeyMap) -> list[str]:
    """Our full names for keymap.always_present: what their model has whatever ours has."""
    names = [n for n in keymap.top if n in keymap.always_present]
    return names + [f"blocks.{i}.{n}" for i in range(config.n_layer) for n in keymap.block
                    if n in keymap.always_present]


def _stand_ins(model: GPT, ours: dict[str, Tensor], keymap: KeyMap) -> dict[str, Tensor]:
    """keymap.always_present weights that our model has none of, as what it computes in their
    place: zero biases, and the absolute positions it adds (zeros for none) as a table."""
    weight = model.wte.weight.detach()
    stand_ins = {}
    for name in (n for n in _always_present(model.config, keymap) if n not in ours):
        if name == "wpe.weight":
            positions = torch.arange(model.config.block_size, device=weight.device)
            table = (model.wpe(positions) if model.wpe is not None
                     else torch.zeros(len(positions), model.config.n_embd))
            stand_ins[name] = table.to(weight)  # as forward casts it: to the embeddings' dtype
        elif name.removesuffix(".bias") + ".weight" in ours:  # not a post-norm model's ln_f
            rows = ours[name.removesuffix(".bias") + ".weight"].shape[0]
            stand_ins[name] = weight.new_zeros(rows)  # as many zeros as its layer has outputs
    return stand_ins


def _heads_interleaved(qkv: Tensor, n_head: int) -> Tensor:
    """Our fused qkv rows (q of every head, then k, then v; bias or weight) -> GPT-NeoX's
    (q_h, k_h, v_h for head 0, then head 1, ...)."""
    rest = qkv.shape[1:]
    return qkv.reshape(3, n_head, -1, *rest).transpose(0, 1).reshape(qkv.shape)


def _heads_grouped(qkv: Tensor, n_head: int) -> Tensor:
    """GPT-NeoX's head-by-head qkv rows -> ours; undoes `_heads_interleaved`."""
    rest = qkv.shape[1:]
    return qkv.reshape(n_head, 3, -1, *rest).transpose(0, 1).reshape(qkv.shape)


# ----------------------------------------------------------------------------- files


def resolve_hf_dir(name_or_dir: str | os.PathLike[str], cache_dir: str | Path | None = None
                   ) -> Path:
    """A local Hugging Face model directory, or a hub name resolved through the Hugging Face
    cache (downloading only when it is not cached and the hub can be reached)."""
    path = Path(name_or_dir).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise UsageError(f"{path} is a file; give a Hugging Face model directory or hub name")
    name = str(name_or_dir)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise UsageError(f"directory not found: {path}")
    _transformers()  # the hub client comes with it
    from huggingface_hub import snapshot_download

    weights = ["*.safetensors", SAFETENSORS_INDEX]
    pickled = [PYTORCH_BIN, "pytorch_model-*.bin", PYTORCH_BIN_INDEX]
    last_error: Exception | None = None
    for local_only in (True, False):  # the cache first: no network when it is there
        for patterns in (weights, pickled):  # .bin only when there are no safetensors
            try:
                snapshot = Path(snapshot_download(
                    name, allow_patterns=[HF_CONFIG, HF_TOKENIZER, *patterns],
                    cache_dir=cache_dir, local_files_only=local_only))
            except Exception as exc:  # the hub client's errors share no useful base class
                last_error = exc
                continue
            if (snapshot / HF_CONFIG).is_file() and _weight_files(snapshot):
                return snapshot
    from huggingface_hub.errors import (
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if last_error is None:
        raise UsageError(f"{name!r} on the Hugging Face hub has no {HF_CONFIG} with weights")
    why = f"{type(last_error).__name__}: {_one_line(last_error)}"
    if isinstance(last_error, (HFValidationError, RepositoryNotFoundError,
                               RevisionNotFoundError)):
        raise UsageError(f"{name!r} is not a local directory, and the Hugging Face hub has "
                         f"no such model ({why})")
    # Most likely the network (offline, DNS, a timeout, the hub down): a failure, not bad input.
    raise GptlabError(f"{name!r} is not a local directory, not in the Hugging Face cache, and "
                      f"could not be fetched ({why})")


def _weight_files(hf_dir: Path) -> list[Path]:
    """The files holding the weights, in the order transformers prefers them."""
    for single, index in ((SAFETENSORS, SAFETENSORS_INDEX), (PYTORCH_BIN, PYTORCH_BIN_INDEX)):
        if (hf_dir / single).is_file():
            return [hf_dir / single]
        if (hf_dir / index).is_file():
            try:
                weight_map = json.loads((hf_dir / index).read_text(encoding="utf-8"))["weight_map"]
                return [hf_dir / shard for shard in sorted(set(weight_map.values()))]
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise UsageError(f"{hf_dir / index} is not a valid weight index ({exc})") from None
    return []


def read_hf_config(hf_dir: Path) -> dict[str, Any]:
    """config.json through transformers' own config class, so defaults and old spellings
    are filled in as transformers fills them."""
    path = hf_dir / HF_CONFIG
    if not path.is_file():
        raise UsageError(f"{hf_dir} has no {HF_CONFIG}: not a Hugging Face model directory")
    raw = read_json(path, "Hugging Face config")
    if isinstance(raw, dict) and "model_type" not in raw and "pos_encoding" in raw:
        raise UsageError(f"{hf_dir} is a gptlab model directory, not a Hugging Face one "
                         "(to_hf / `gptlab convert --to-hf` converts it)")
    if not isinstance(raw, dict) or raw.get("model_type") not in KEYMAPS:
        model_type = raw.get("model_type") if isinstance(raw, dict) else None
        names = ", ".join(raw.get("architectures") or []) if isinstance(raw, dict) else ""
        raise UsageError(f"unsupported architecture {model_type!r}"
                         f"{f' ({names})' if names else ''} in {path}; "
                         f"gptlab converts: {', '.join(KEYMAPS)}")
    transformers = _transformers()
    try:
        return transformers.AutoConfig.for_model(**raw).to_dict()
    except Exception as exc:  # their validation raises ValueError, TypeError, ...
        raise UsageError(f"{path} is not a valid {raw['model_type']} config: "
                         f"{_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    """The whole message of exc on one line (a library's multi-line message cut at its first
    line loses the part that names the field), or its type when it has none."""
    return " ".join(str(exc).split()) or type(exc).__name__


def is_hf_dir(path: str | Path) -> bool:
    """Whether path holds a Hugging Face config.json (one with a model_type)."""
    try:
        raw = json.loads((Path(path) / HF_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(raw, dict) and "model_type" in raw and "pos_encoding" not in raw


def read_hf_weights(hf_dir: Path) -> dict[str, Tensor]:
    files = _weight_files(hf_dir)
    if not files:
        raise UsageError(f"{hf_dir} has no weights ({SAFETENSORS}, {SAFETENSORS_INDEX}, "
                         f"{PYTORCH_BIN} or {PYTORCH_BIN_INDEX})")
    state: dict[str, Tensor] = {}
    for path in files:
        state.update(_read_weight_file(path))
    return state


def _read_weight_file(path: Path) -> dict[str, Tensor]:
    if not path.is_file():
        raise UsageError(f"weights file not found: {path}")
    if path.suffix == ".safetensors":
        try:
            return load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise UsageError(f"{path} is not a readable safetensors file ({exc})") from None
    try:
        # weights_only: tensors and plain containers only; any other pickled object is refused.
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError, RuntimeError, EOFError, ...
        raise UsageError(f"refused {path}: not a plain state dict of tensors "
                         f"({_one_line(exc)})") from None
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        raise UsageError(f"refused {path}: not a plain state dict of tensors")
    return state


def write_tokenizer_config(out_dir: Path, model_max_length: int) -> None:
    """tokenizer_config.json, so AutoTokenizer loads out_dir/tokenizer.json as it is: the
    generic fast tokenizer (not the one config.json's model_type suggests, which may add
    tokens), with no clean-up of spaces on decoding (it would change the text)."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
              "model_max_length": model_max_length}
    atomic_write_text(out_dir / HF_TOKENIZER_CONFIG, json.dumps(config, indent=2) + "\n")


# ----------------------------------------------------------------------------- public


def from_hf(
    model_or_dir: Any, *, dtype: torch.dtype = torch.float32,
    cache_dir: str | Path | None = None,
) -> GPT:
    """Our GPT (eval mode, on the CPU, in `dtype`) with the weights of a Hugging Face GPT-2
    or Llama: a `transformers` model instance, a local directory, or a hub name."""
    if isinstance(model_or_dir, (str, os.PathLike)):
        hf_dir = resolve_hf_dir(model_or_dir, cache_dir)
        hf_config, theirs, source = read_hf_config(hf_dir), read_hf_weights(hf_dir), str(hf_dir)
    elif hasattr(model_or_dir, "config") and hasattr(model_or_dir, "state_dict"):
        hf_config = model_or_dir.config.to_dict()
        theirs = {k: v.detach() for k, v in model_or_dir.state_dict().items()}
        source = type(model_or_dir).__name__
    else:
        raise UsageError(f"from_hf takes a transformers model, a directory or a hub name, "
                         f"not {type(model_or_dir).__name__}")
    config, keymap = config_from_hf(hf_config)
    model = GPT(config)
    model.load_state_dict(state_from_hf(theirs, model, keymap, source),
                          strict=not config.tie_embeddings)  # tied: lm_head is wte
    return model.to(dtype).eval()


def to_hf(model: torch.nn.Module, out_dir: str | Path) -> Path:
    """Write out_dir/config.json (Hugging Face format) and out_dir/model.safetensors, which
    `transformers.AutoModelForCausalLM.from_pretrained(out_dir)` loads. Returns out_dir."""
    gpt = unwrap(model)
    fields, keymap = config_to_hf(gpt.config)
    transformers = _transformers()
    hf_config = transformers.AutoConfig.for_model(keymap.model_type, **fields)
    hf_config.architectures = [keymap.architecture]
    config_json = json.loads(hf_config.to_json_string(use_diff=True))
    # Also spelled the 4.x way, so an older transformers reads the same RoPE (5.x reads both).
    config_json.update({k: v for k, v in fields.items() if k in ROPE_4X_KEYS})
    config_json["torch_dtype"] = str(gpt.wte.weight.dtype).removeprefix("torch.")
    out_dir = ensure_dir(out_dir)
    with atomic_path(out_dir / SAFETENSORS) as tmp:  # weights first: config points at them
        save_file(state_to_hf(gpt, keymap), str(tmp), metadata={"format": "pt"})
    atomic_write_text(out_dir / HF_CONFIG, json.dumps(config_json, indent=2, sort_keys=True) + "\n")
    return out_dir
