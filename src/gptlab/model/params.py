"""Parameter, FLOP and memory accounting from a config alone.

Everything here is arithmetic on a `GPTConfig`: no tensor is allocated, so llama2-70b is
counted as fast as gpt2. `meta_parameter_count` builds the real model on PyTorch's "meta"
device (shapes, no storage) to cross-check the arithmetic against the code that trains.

Conventions (also carried in the output, so a reader need not find this file):
- parameters: a tied lm_head shares wte's matrix and counts once (as `GPT.num_parameters`).
- FLOPs per token: forward = 2 * N_matmul + 4 * n_layer * seq_len * (n_head * head_dim).
  N_matmul is every weight that multiplies activations: the blocks' Linear weights (qkv,
  proj, feed-forward) and lm_head (counted even when tied: the matmul still happens).
  Left out: embedding and position lookups (no multiply), norms, biases, softmax, RoPE,
  ALiBi's bias (one add per score).
  The attention term is QK^T and AV over a full seq_len context, with no halving for the
  causal mask (PaLM, Chowdhery et al. 2022, app. B; nanoGPT's estimate_mfu). Training =
  3 x forward (backward is twice forward) = 6 * N_matmul + 12 * n_layer * seq_len * d_attn.
- memory: all in bytes. Training = fp32 weights + fp32 grads + AdamW's exp_avg and
  exp_avg_sq in fp32 = 16 bytes per parameter, activations excluded. KV cache: keys and
  values for every layer, n_kv_head * head_dim each, batch size 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gptlab.errors import Setting, SettingError, UsageError
from gptlab.model.config import GPTConfig

FLOPS_FORMULA = (
    "forward = 2*N_matmul + 4*n_layer*seq_len*(n_head*head_dim); train = 3*forward; "
    "N_matmul = blocks' Linear weights + lm_head weight (counted even when tied); "
    "embedding/position lookups, norms, biases, softmax and RoPE not counted; "
    "attention term = QK^T and AV over the full seq_len context, no causal halving"
)
MEMORY_UNITS = "bytes"
TRAINING_MEMORY_NOTE = (
    "fp32 weights + fp32 grads + AdamW exp_avg + exp_avg_sq (fp32) = 16 bytes/param; "
    "activations excluded"
)
KV_CACHE_NOTE = "keys + values, every layer, n_kv_head*head_dim each, batch size 1"

BYTES_FP32 = 4
BYTES_BF16 = 2
ADAMW_FP32_BYTES_PER_PARAM = 16  # weight 4 + grad 4 + exp_avg 4 + exp_avg_sq 4


@dataclass(frozen=True)
class Row:
    """One line of the breakdown. `count` is how many times it occurs in the model
    (n_layer for per-block parts, 1 otherwise), so sum(params * count) == total."""

    name: str
    params: int
    note: str
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": self.params, "note": self.note,
                "count": self.count}


@dataclass(frozen=True)
class Accounting:
    """The numbers `gptlab params` prints. Sizes in bytes, FLOPs per token."""

    config: GPTConfig
    seq_len: int
    rows: list[Row]
    total: int
    per_block: int
    n_matmul: int  # weights that take part in matmuls (see the module docstring)
    flops_forward_per_token: int
    flops_attention_per_token: int  # the forward attention term alone
    kv_cache_elements_per_token: int
    name: str | None = None  # the preset's name, when there is one

    @property
    def blocks(self) -> int:
        return self.config.n_layer * self.per_block

    @property
    def estimate_12Ld2(self) -> int:  # noqa: N802 (the formula's own name)
        return 12 * self.config.n_layer * self.config.n_embd**2

    @property
    def flops_train_per_token(self) -> int:
        return 3 * self.flops_forward_per_token

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready. Parameter counts are integers; memory is in bytes."""
        c = self.config
        kv_per_token = self.kv_cache_elements_per_token
        return {
            "name": self.name,
            "config": c.to_dict(),
            "seq_len": self.seq_len,
            "rows": [row.to_dict() for row in self.rows],
            "total": self.total,
            "per_block": self.per_block,
            "blocks": self.blocks,
            "estimate_12Ld2": self.estimate_12Ld2,
            # (estimate - actual) / actual: against the whole model, and against the blocks
            # alone (what 12*L*d^2 sets out to approximate).
            "estimate_error": (self.estimate_12Ld2 - self.total) / self.total,
            "estimate_error_blocks": (self.estimate_12Ld2 - self.blocks) / self.blocks,
            "flops": {
                "n_matmul": self.n_matmul,
                "forward_per_token": self.flops_forward_per_token,
                "train_per_token": self.flops_train_per_token,
                "attention_term_per_token": self.flops_attention_per_token,
                "seq_len": self.seq_len,
                "formula": FLOPS_FORMULA,
            },
            "memory": {
                "units": MEMORY_UNITS,
                "weights_fp32": self.total * BYTES_FP32,
                "weights_bf16": self.total * BYTES_BF16,
                "training_adamw_fp32": self.total * ADAMW_FP32_BYTES_PER_PARAM,
                "training_note": TRAINING_MEMORY_NOTE,
                "kv_cache_per_token_fp32": kv_per_token * BYTES_FP32,
                "kv_cache_per_token_bf16": kv_per_token * BYTES_BF16,
                "kv_cache_full_context_fp32": kv_per_token * self.seq_len * BYTES_FP32,
                "kv_cache_full_context_bf16": kv_per_token * self.seq_len * BYTES_BF16,
                "kv_cache_note": KV_CACHE_NOTE + f", full context = {self.seq_len:,} tokens",
            },
        }

    def table(self) -> str:
        return format_table(self)


# ----------------------------------------------------------------------------- counting


def _linear(d_in: int, d_out: int, bias: bool) -> int:
    return d_in * d_out + (d_out if bias else 0)


def _norm(config: GPTConfig) -> int:
    """LayerNorm: weight (+ bias when config.bias); RMSNorm: weight only."""
    d = config.n_embd
    return d + d if config.norm == "layernorm" and config.bias else d


def _block_norms(config: GPTConfig) -> int:
    """A block's norms: two (before attention and before the MLP), one when attention only."""
    return (2 if config.has_mlp else 1) * _norm(config)


def _attention(config: GPTConfig) -> int:
    d, q_dim = config.n_embd, config.n_head * config.head_dim
    return _linear(d, q_dim + 2 * config.kv_dim, config.bias) + _linear(q_dim, d, config.bias)


def _feed_forward(config: GPTConfig) -> int:
    if not config.has_mlp:
        return 0
    d, hidden = config.n_embd, config.ffn_hidden
    n_in = 2 if config.mlp == "swiglu" else 1  # SwiGLU: gate and up; GELU: fc
    return n_in * _linear(d, hidden, config.bias) + _linear(hidden, d, config.bias)


def _matmul_weights_per_block(config: GPTConfig) -> int:
    """The block's Linear weights without biases: what multiplies activations."""
    d, q_dim, hidden = config.n_embd, config.n_head * config.head_dim, config.ffn_hidden
    n_in = 2 if config.mlp == "swiglu" else 1
    ffn = (n_in * d * hidden + hidden * d) if config.has_mlp else 0
    return d * (q_dim + 2 * config.kv_dim) + q_dim * d + ffn


def check_tp_divides(config: GPTConfig, tp: int) -> None:
    """Tensor parallel gives each rank an equal share of the heads, the kv heads (each
    with its group of query heads) and the FFN's hidden units."""
    counts = [("n_head", config.n_head), ("n_kv_head", config.n_kv_head)]
    for name, count in counts + ([("ffn_hidden", config.ffn_hidden)] if config.has_mlp else []):
        if count % tp:
            raise UsageError(f"--tp {tp} does not divide {name} {count}: tensor parallel "
                             f"splits them across ranks")


def parameter_shapes(config: GPTConfig, tp: int = 1) -> list[tuple[int, ...]]:
    """The shape of every parameter of GPT(config) (a tied lm_head once), or with tp > 1
    of its share on one rank of a tp-wide tensor-parallel group. q, k and v are listed as
    three matrices, as the sharded modes hold them (gptlab.distributed.parallelize splits
    the fused qkv projection)."""
    check_tp_divides(config, tp)
    c, d = config, config.n_embd
    q_dim, kv_dim, hidden = c.n_head * c.head_dim // tp, c.kv_dim // tp, c.ffn_hidden // tp
    norm = [(d,), (d,)] if c.norm == "layernorm" and c.bias else [(d,)]
    block = (2 if c.has_mlp else 1) * norm
    n_in = (2 if c.mlp == "swiglu" else 1) if c.has_mlp else 0
    for rows in (q_dim, kv_dim, kv_dim, *[hidden] * n_in):  # split by output
        block += [(rows, d)] + ([(rows,)] if c.bias else [])
    for cols in (q_dim, hidden)[:2 if c.has_mlp else 1]:  # split by input; bias once, whole
        block += [(d, cols)] + ([(d,)] if c.bias else [])
    shapes = [(c.vocab_size, d)] + block * c.n_layer
    if c.pos_encoding == "learned":
        shapes.append((c.block_size, d))
    if c.norm_position == "pre":
        shapes += norm
    if not c.tie_embeddings:
        shapes.append((c.vocab_size, d))
    if c.value_residual:
        shapes += [(1,)] * (c.n_layer - 1)
    return shapes


def count_parameters(config: GPTConfig) -> int:
    """Parameters of GPT(config), by arithmetic alone (a tied lm_head counts once)."""
    return accounting(config).total


def meta_parameter_count(config: GPTConfig) -> int:
    """Parameters of GPT(config) built on the meta device: real modules, no storage.
    The cross-check for `count_parameters`; takes ~0.1-1 s, so not used by `accounting`."""
    # start-up time: the counts above need no torch; only this cross-check waits for it
    import torch

    from gptlab.model.gpt import GPT

    with torch.device("meta"):
        model = GPT(config)
    return model.num_parameters()


def _rows(config: GPTConfig) -> list[Row]:
    c, d, v = config, config.n_embd, config.vocab_size
    biases = "with biases" if c.bias else "no biases"
    q_dim, qkv_out = c.n_head * c.head_dim, c.n_head * c.head_dim + 2 * c.kv_dim
    norm_kind = "layernorm (weight + bias)" if c.norm == "layernorm" and c.bias else (
        f"{c.norm} (weight only)")
    position_notes = {
        "learned": f"learned: {c.block_size:,} x {d:,}",
        "sinusoidal": "sinusoidal: a fixed table, no parameters",
        "rope": "rope: rotates q and k, no parameters",
        "alibi": f"alibi: a fixed linear bias on the scores, {c.n_head} slopes, no parameters",
        "none": "none: no position signal",
    }
    if not c.has_mlp:
        ffn_note = "none: attention only, no feed-forward network"
    elif c.mlp == "swiglu":
        ffn_note = (f"swiglu: gate and up {d:,} -> {c.ffn_hidden:,}, "
                    f"proj {c.ffn_hidden:,} -> {d:,}, {biases}")
    else:
        ffn_note = (f"{c.mlp}: fc {d:,} -> {c.ffn_hidden:,}, "
                    f"proj {c.ffn_hidden:,} -> {d:,}, {biases}")
    heads = counted(c.n_head, "head") + (f", {counted(c.n_kv_head, 'kv head')}"
                                         if c.n_kv_head != c.n_head else "")
    return [
        Row("token embeddings (wte)", v * d, f"{v:,} x {d:,}"),
        Row("positions (wpe)", c.block_size * d if c.pos_encoding == "learned" else 0,
            position_notes[c.pos_encoding]),
        Row("attention (per block)", _attention(c),
            f"{heads} of {c.head_dim}: qkv {d:,} -> {qkv_out:,}, "
            f"proj {q_dim:,} -> {d:,}, {biases}", c.n_layer),
        Row("feed-forward (per block)", _feed_forward(c), ffn_note, c.n_layer),
        Row("norms (per block)", _block_norms(c), f"{2 if c.has_mlp else 1} x {norm_kind}",
            c.n_layer),
        Row("final norm (ln_f)", _norm(c) if c.norm_position == "pre" else 0,
            norm_kind if c.norm_position == "pre" else "post-norm: the last block ends in a norm"),
        Row("lm_head", 0 if c.tie_embeddings else d * v,
            f"tied: reuses wte's {v:,} x {d:,} matrix" if c.tie_embeddings
            else f"untied: {d:,} -> {v:,}, no bias"),
    ] + _option_rows(c)


def _option_rows(c: GPTConfig) -> list[Row]:
    """The learned scalars of the speedrun's options, one row each where switched on."""
    rows = []
    if c.value_residual:
        rows.append(Row("value residual mix", c.n_layer - 1,
                        "one lambda per block after the first"))
    return rows


def accounting(config: GPTConfig, seq_len: int | None = None, name: str | None = None
               ) -> Accounting:
    """Parameters, FLOPs per token and memory for `config` at a context of `seq_len`
    tokens (default block_size). Pure arithmetic: microseconds, even for 70B models."""
    if seq_len is None:
        seq_len = config.block_size
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0:
        raise SettingError(Setting("seq_len"), f" must be a positive integer, got {seq_len!r}")
    if config.pos_encoding == "learned" and seq_len > config.block_size:
        raise SettingError(Setting("seq_len"), f" {seq_len} is longer than ",
                           Setting("block_size"),
                           f" {config.block_size}, the number of learned positions")
    rows = _rows(config)
    total = sum(row.params * row.count for row in rows)
    per_block = _attention(config) + _feed_forward(config) + _block_norms(config)
    d_attn = config.n_head * config.head_dim
    n_matmul = (config.n_layer * _matmul_weights_per_block(config)
                + config.n_embd * config.vocab_size)  # + lm_head, tied or not
    attention_term = 4 * config.n_layer * seq_len * d_attn  # QK^T 2*T*d_attn, AV 2*T*d_attn
    return Accounting(
        config=config, seq_len=seq_len, rows=rows, total=total, per_block=per_block,
        n_matmul=n_matmul, flops_forward_per_token=2 * n_matmul + attention_term,
        flops_attention_per_token=attention_term,
        kv_cache_elements_per_token=2 * config.n_layer * config.kv_dim, name=name,
    )


# ----------------------------------------------------------------------------- the table


def human_bytes(n: int | float) -> str:
    """1536 -> '1.50 KiB'; binary units (1 GiB = 2^30 bytes)."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{int(n)} B"


def human_count(n: int | float) -> str:
    """124439808 -> '124.4M'."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:,.1f}{unit}"
    return f"{n:,}"


def counted(n: int, noun: str) -> str:
    """(3, "layer") -> "3 layers", (1, "layer") -> "1 layer" (nouns whose plural adds s)."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def format_table(acc: Accounting) -> str:
    c, info = acc.config, acc.to_dict()
    flops, memory = info["flops"], info["memory"]
    forward, train = flops["forward_per_token"], flops["train_per_token"]
    title = acc.name or "config"
    lines = [
        f"{title}: {counted(c.n_layer, 'layer')}, d_model {c.n_embd:,}, "
        f"{counted(c.n_head, 'head')} "
        f"({c.n_kv_head} kv) of {c.head_dim}, "
        f"FFN {f'{c.ffn_hidden:,} ({c.mlp})' if c.has_mlp else 'none (attention only)'}, "
        f"vocab {c.vocab_size:,}, context {c.block_size:,}",
        f"{c.pos_encoding} positions, {c.norm_position}-norm {c.norm}, "
        f"{'biases' if c.bias else 'no biases'}, "
        f"{'tied' if c.tie_embeddings else 'untied'} embeddings",
        "",
    ]
    width = 30
    table = []
    for row in acc.rows:
        table.append((row.name, f"{row.params:,}", row.note))
        if row.name == "norms (per block)":
            table.append(("block (each)", f"{acc.per_block:,}", ""))
            table.append((f"all {counted(c.n_layer, 'block')}", f"{acc.blocks:,}",
                          f"{c.n_layer} x {acc.per_block:,}"))
    table.append(("total", f"{acc.total:,}", human_count(acc.total)))
    num_width = max(len("parameters"), *(len(t[1]) for t in table))
    lines.append(f"{'part':<{width}} {'parameters':>{num_width}}  note")
    lines += [f"{n:<{width}} {p:>{num_width}}  {note}".rstrip() for n, p, note in table]
    lines += [
        "",
        f"quick estimate 12*L*d^2 = {acc.estimate_12Ld2:,}: "
        f"{info['estimate_error_blocks']:+.2%} vs the blocks, "
        f"{info['estimate_error']:+.2%} vs the total",
        "",
        f"FLOPs per token at seq_len {acc.seq_len:,} (N_matmul = {acc.n_matmul:,}):",
        f"  forward  {forward:>20,}  (~{human_count(forward)})"
        f"  = 2*N_matmul + attention {flops['attention_term_per_token']:,}",
        f"  training {train:>20,}  (~{human_count(train)})"
        f"  = 3 x forward = 6*N_matmul + 12*L*T*d_attn",
        "  N_matmul: blocks' Linear weights + lm_head (even when tied); lookups, norms,",
        "  biases not counted; attention = QK^T + AV over the full context (PaLM, nanoGPT)",
        "",
        "memory (1 MiB = 2^20 bytes; --json gives exact bytes):",
        f"  weights fp32 {human_bytes(memory['weights_fp32'])}, "
        f"bf16 {human_bytes(memory['weights_bf16'])}",
        f"  training, AdamW fp32: {human_bytes(memory['training_adamw_fp32'])} "
        f"(weights + grads + 2 moments, 16 B/param; activations excluded)",
        f"  KV cache per token: fp32 {human_bytes(memory['kv_cache_per_token_fp32'])}, "
        f"bf16 {human_bytes(memory['kv_cache_per_token_bf16'])}",
        f"  KV cache for {acc.seq_len:,} tokens: "
        f"fp32 {human_bytes(memory['kv_cache_full_context_fp32'])}, "
        f"bf16 {human_bytes(memory['kv_cache_full_context_bf16'])} (batch 1)",
    ]
    return "\n".join(lines)
