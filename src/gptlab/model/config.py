"""GPTConfig: the one description of an architecture. Plain data, so it serializes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gptlab.errors import ConfigError, Setting
from gptlab.fields import from_dict, is_number, without_retired
from gptlab.files.atomic import read_json
from gptlab.model.presets import preset_dict

POS_ENCODINGS = ("learned", "sinusoidal", "rope", "alibi", "none")
NORMS = ("layernorm", "rmsnorm")
NORM_POSITIONS = ("pre", "post")
# 'gelu' is the exact erf GELU; 'gelu_tanh' is GPT-2's tanh approximation ("gelu_new");
# 'none': no feed-forward network (and no second norm): an attention-only model, as
# Elhage et al. 2021 and Olsson et al. 2022 study.
MLPS = ("gelu", "gelu_tanh", "swiglu", "none")
# Options the speedrun tried and did not adopt (BENCHMARKS.md), each with the value that
# left it off: a config saved with them off still loads.
RETIRED_FIELDS = {"logit_softcap": None, "unet_skips": False}
ROPE_SCALINGS = ("linear", "ntk", "yarn", "dynamic", "llama3")
# The rules that need the training length (original_max_position_embeddings).
ROPE_SCALINGS_WITH_ORIGINAL = ("yarn", "dynamic", "llama3")


@dataclass
class GPTConfig:
    """The one description of an architecture: a decoder-only transformer (Vaswani et al.
    2017, "Attention Is All You Need", with the decoder stack alone, as GPT uses it) and its
    successors' choices. Defaults are GPT-2 small's.

    vocab_size      token ids 0..vocab_size-1: rows of the embedding matrix (W_E) and
                    columns of the unembedding (W_U)
    block_size      the context: the longest sequence the model is built for (the number of
                    learned positions, and the RoPE tables' length)
    n_layer         transformer blocks, each attention then a feed-forward network
    n_head          attention heads h; each sees d_k = d_v = n_embd / n_head dimensions
                    (head_dim, derived) and scores are scaled by 1/sqrt(d_k)
    n_kv_head       key/value heads: n_head (multi-head), 1 (multi-query, Shazeer 2019) or
                    a divisor of n_head (grouped-query, Ainslie et al. 2023)
    n_embd          d_model, the width of the residual stream
    ffn_hidden      d_ff, the feed-forward network's inner width (default 4 * d_model)
    pos_encoding    "learned" (GPT-2), "sinusoidal" (the 2017 paper), "rope" (rotary, Su et
                    al. 2021), "alibi" (a linear bias on the scores, Press et al. 2021) or
                    "none"
    rope_base       RoPE's theta, the base of its wavelengths (10000 in the paper)
    rope_scaling    None, or a long-context rule for RoPE: {"type": "linear" | "ntk" | "yarn"
                    | "dynamic" | "llama3", "factor": ..., ...} (gptlab.model.rope_scaling;
                    `rope_scaling_from_spec` reads "KIND:FACTOR")
    norm            "layernorm" (Ba et al. 2016) or "rmsnorm" (Zhang & Sennrich 2019)
    norm_eps        the epsilon inside the norm's square root
    norm_position   "pre" (norm, sublayer, add: GPT-2 on) or "post" (sublayer, add, norm:
                    the 2017 paper)
    mlp             "gelu" (exact erf GELU), "gelu_tanh" (GPT-2's approximation),
                    "swiglu" (Shazeer 2020, Llama) or "none": no feed-forward network and
                    no second norm in any block, an attention-only model (Elhage et al.
                    2021); ffn_hidden is then unused
    bias            biases in the linear layers and norms (GPT-2 yes, Llama no)
    tie_embeddings  the unembedding reuses the embedding matrix (W_U = W_E^T), as the 2017
                    paper and GPT-2 do
    dropout         dropout on embeddings, attention weights and residual branches (training)

    Options of later work, each off by default (the model is then the chapter's):
    attn_scale      divide scores by sqrt(d_k) (True, the paper's choice); False leaves them
                    unscaled, for the experiment that asks why the factor is there
    qk_norm         RMSNorm (no gain) on each head's queries and keys before RoPE (Dehghani
                    et al. 2023; modded-nanogpt): bounded logits, so higher learning rates hold
    zero_init_proj  the projections that write into the residual stream start at zero, so
                    every block starts as the identity (modded-nanogpt)
    value_residual  every layer after the first mixes its values with the first layer's,
                    v = lambda * v + (1 - lambda) * v_1, lambda learned per layer and starting
                    at 0.5 (Zhou et al. 2024, "Value Residual Learning")

    Every field is checked when the config is made (and again when GPT builds a model from
    it); a message names the field. to_dict/from_dict/from_json make it plain data.
    """

    vocab_size: int = 50257
    block_size: int = 1024  # the longest sequence the model is built for
    n_layer: int = 12
    n_head: int = 12
    n_kv_head: int | None = None  # None: n_head (multi-head); 1: multi-query; else grouped-query
    n_embd: int = 768
    ffn_hidden: int | None = None  # None: 4 * n_embd, the 2017 paper's and GPT-2's width
    pos_encoding: str = "learned"
    rope_base: float = 10000.0
    # None, or {"type": "linear"|"ntk"|"yarn"|"dynamic"|"llama3", "factor": float, ...};
    # see rope_scaling.py
    rope_scaling: dict[str, Any] | None = None
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    norm_position: str = "pre"
    mlp: str = "gelu"
    bias: bool = True
    tie_embeddings: bool = True
    dropout: float = 0.0
    attn_scale: bool = True
    qk_norm: bool = False
    zero_init_proj: bool = False
    value_residual: bool = False
    # Derived in __post_init__; not part of the serialized config.
    head_dim: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            _require_positive_int(name, getattr(self, name))
        if self.n_kv_head is None:
            self.n_kv_head = self.n_head
        if self.ffn_hidden is None:
            self.ffn_hidden = 4 * self.n_embd
        self.validate()

    def validate(self) -> None:
        """Check every field and derive head_dim again. A config is a plain mutable
        dataclass, so GPT(config) calls this too: a field changed after construction is
        checked before any weight is built."""
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "n_kv_head",
                     "ffn_hidden"):
            _require_positive_int(name, getattr(self, name))
        if self.n_embd % self.n_head:
            raise ConfigError(Setting("n_embd"), f" ({self.n_embd}) must be divisible by ",
                              Setting("n_head"), f" ({self.n_head})")
        if self.n_head % self.n_kv_head:
            raise ConfigError(Setting("n_head"), f" ({self.n_head}) must be divisible by ",
                              Setting("n_kv_head"), f" ({self.n_kv_head})")
        self.head_dim = self.n_embd // self.n_head
        _require_choice("pos_encoding", self.pos_encoding, POS_ENCODINGS)
        _require_choice("norm", self.norm, NORMS)
        _require_choice("norm_position", self.norm_position, NORM_POSITIONS)
        _require_choice("mlp", self.mlp, MLPS)
        if self.pos_encoding == "rope" and self.head_dim % 2:
            raise ConfigError(
                "pos_encoding 'rope' rotates pairs of dimensions, so the head size ",
                Setting("n_embd"), " / ", Setting("n_head"), f" = {self.head_dim} must be even")
        if not (is_number(self.rope_base) and self.rope_base > 1):
            raise ConfigError(Setting("rope_base"),
                              f" must be a finite number > 1, got {self.rope_base!r}")
        if not (is_number(self.norm_eps) and self.norm_eps > 0):
            raise ConfigError(Setting("norm_eps"),
                              f" must be a finite number > 0, got {self.norm_eps!r}")
        if not (is_number(self.dropout) and 0 <= self.dropout < 1):
            raise ConfigError(Setting("dropout"), f" must be in [0, 1), got {self.dropout!r}")
        for name in ("bias", "tie_embeddings", "attn_scale", "qk_norm", "zero_init_proj",
                     "value_residual"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(Setting(name),
                                  f" must be true or false, got {getattr(self, name)!r}")
        if self.rope_scaling is not None:
            self._check_rope_scaling()

    def _check_rope_scaling(self) -> None:
        scaling = self.rope_scaling
        if not isinstance(scaling, dict):
            raise ConfigError(Setting("rope_scaling"),
                              f" must be null or an object, got {scaling!r}")
        if self.pos_encoding != "rope":
            raise ConfigError(Setting("rope_scaling"), " is set but pos_encoding is not 'rope'")
        _require_choice("rope_scaling.type", scaling.get("type"), ROPE_SCALINGS)
        factor = scaling.get("factor")
        if not (is_number(factor) and factor >= 1):
            raise ConfigError(f"rope_scaling.factor must be a finite number >= 1, got {factor!r}")
        if scaling["type"] in ROPE_SCALINGS_WITH_ORIGINAL:
            original = scaling.get("original_max_position_embeddings")
            if isinstance(original, bool) or not (isinstance(original, int) and original > 0):
                raise ConfigError(
                    f"rope_scaling.original_max_position_embeddings must be a positive "
                    f"integer for type {scaling['type']!r}, got {original!r}"
                )

    def later_options(self) -> list[str]:
        """The options of later work that change what the model computes (attn_scale off,
        qk_norm, value_residual, and mlp none: attention only),
        as `name=value`: what formats made for the chapter's models (Hugging Face's, GGUF)
        cannot hold. zero_init_proj is not among them: it is a starting point, and the
        trained weights are ordinary."""
        defaults = {"attn_scale": True, "qk_norm": False, "value_residual": False}
        options = [f"{name}={getattr(self, name)}" for name, default in defaults.items()
                   if getattr(self, name) != default]
        return options + (["mlp=none"] if not self.has_mlp else [])

    @property
    def has_mlp(self) -> bool:
        """Whether each block has its feed-forward network (mlp is not "none")."""
        return self.mlp != "none"

    # Derived sizes, named so the code that uses them reads plainly.
    @property
    def n_rep(self) -> int:
        """Query heads that share one key/value head (1 for plain multi-head attention)."""
        return self.n_head // self.n_kv_head

    @property
    def kv_dim(self) -> int:
        return self.n_kv_head * self.head_dim

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        if out["rope_scaling"] is not None:
            out["rope_scaling"] = dict(out["rope_scaling"])
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GPTConfig:
        return from_dict(cls, without_retired(d, RETIRED_FIELDS, "config", ConfigError), "config",
                         "config field", error=ConfigError)

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> GPTConfig:
        return cls.from_dict({**preset_dict(name), **overrides})

    @classmethod
    def from_json(cls, path: str | Path) -> GPTConfig:
        return cls.from_dict(read_json(path, "config file"))


def rope_scaling_from_spec(spec: str, original: int) -> dict[str, Any]:
    """"KIND:FACTOR" (linear:4, ntk:4, yarn:4, dynamic:4, llama3:4) -> a rope_scaling for a
    model trained at `original` positions, the rule's other settings at their defaults:
    the one reading of --rope-scaling (eval, sample, the lab, gptlab.load)."""
    kind, sep, factor_text = str(spec).partition(":")
    if not sep or kind not in ROPE_SCALINGS:
        raise ConfigError(f"rope scaling must be KIND:FACTOR with KIND one of "
                          f"{', '.join(ROPE_SCALINGS)} (e.g. linear:4), got {spec!r}")
    try:
        factor = float(factor_text)
    except ValueError:
        factor = float("nan")
    if not (is_number(factor) and factor >= 1):
        raise ConfigError(f"rope scaling factor must be a finite number >= 1, got "
                          f"{factor_text!r} in {spec!r}")
    scaling: dict[str, Any] = {"type": kind, "factor": factor}
    if kind in ROPE_SCALINGS_WITH_ORIGINAL:
        scaling["original_max_position_embeddings"] = original
    return scaling


def with_rope_scaling(config: GPTConfig, spec: str | dict[str, Any]) -> GPTConfig:
    """A new config: `config` with a RoPE scaling rule applied at inference time ("KIND:F"
    as rope_scaling_from_spec reads it, the training length being block_size, or a
    rope_scaling dict). No weight changes; the config given is left as it is."""
    if config.pos_encoding != "rope":
        raise ConfigError(f"rope scaling stretches RoPE's frequencies; this model's "
                          f"pos_encoding is {config.pos_encoding!r}")
    if config.rope_scaling is not None:
        raise ConfigError("this model already has ", Setting("rope_scaling"),
                          f" {config.rope_scaling['type']!r}; gptlab applies one rule at a time")
    scaling = spec if isinstance(spec, dict) else rope_scaling_from_spec(spec, config.block_size)
    return dataclasses.replace(config, rope_scaling=dict(scaling))


def _require_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(Setting(name), f" must be a positive integer, got {value!r}")


def _require_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}; expected one of: {', '.join(choices)}")
