"""Parameter, FLOP and memory accounting (gptlab.model.params), checked against the model
itself: parameters against GPT(config) on the meta device, part by part; FLOPs against
torch's FlopCounterMode running a real forward and backward; memory against a real KV cache
and a real AdamW state. The `gptlab params` command: tests/cli/test_params.py."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random
import statistics
import time

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from gptlab import GPT, GPTConfig
from gptlab.errors import ConfigError, UsageError
from gptlab.model.config import MLPS, NORM_POSITIONS, NORMS, POS_ENCODINGS
from gptlab.model.kv_cache import new_kv_cache
from gptlab.model.params import (
    Row,
    accounting,
    count_parameters,
    meta_parameter_count,
    parameter_shapes,
)


def meta_model(config: GPTConfig) -> GPT:
    with torch.device("meta"):
        return GPT(config)


def numel(module: nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters())


def random_config(rng: random.Random, pos_encoding: str, norm: str, mlp: str,
                  norm_position: str, bias: bool, tie: bool, grouped: bool,
                  **options) -> GPTConfig:
    """A small valid config with these switches (and options) and otherwise random sizes."""
    n_kv_head = rng.choice([1, 2, 3])
    n_head = n_kv_head * rng.choice([2, 3]) if grouped else n_kv_head
    head_dim = rng.choice([2, 4, 6, 8]) if pos_encoding == "rope" else rng.choice([1, 3, 4, 5])
    n_embd = n_head * head_dim
    return GPTConfig(
        vocab_size=rng.randint(5, 120), block_size=rng.randint(1, 40),
        n_layer=rng.randint(1, 3), n_head=n_head, n_kv_head=n_kv_head, n_embd=n_embd,
        ffn_hidden=rng.choice([None, rng.randint(1, 50)]), pos_encoding=pos_encoding,
        norm=norm, mlp=mlp, norm_position=norm_position, bias=bias, tie_embeddings=tie,
        **options,
    )


# The switches of GPTConfig, each with every value it accepts; the grid is every
# combination of them, and of multi-head against grouped-query attention.
# The later options (attn_scale off, qk_norm, ...) are drawn at random in each cell.
OPTIONS = {"attn_scale": (True, False), "qk_norm": (True, False),
           "zero_init_proj": (True, False), "value_residual": (True, False)}
SWITCHES = {"pos_encoding": POS_ENCODINGS, "norm": NORMS, "mlp": MLPS,
            "norm_position": NORM_POSITIONS, "bias": (True, False),
            "tie_embeddings": (True, False), **OPTIONS}


def test_the_grid_spans_every_choice_gptconfig_accepts():
    """A switch added to GPTConfig, or a value added to one, without its place in the grid
    fails here: the choice fields are the grid's, and each one's own error lists exactly
    the grid's values."""
    choices = {f.name for f in dataclasses.fields(GPTConfig) if f.type in ("str", "bool")}
    assert choices == set(SWITCHES)
    for name, values in SWITCHES.items():
        if values == (True, False):
            continue
        with pytest.raises(ConfigError) as info:
            GPTConfig(**{name: "not-a-choice"})
        assert str(info.value).endswith("expected one of: " + ", ".join(values))


@pytest.mark.parametrize("pos_encoding,norm,mlp,norm_position", list(itertools.product(
    POS_ENCODINGS, NORMS, MLPS, NORM_POSITIONS)))
def test_analytic_count_equals_meta_model_over_a_grid(pos_encoding, norm, mlp, norm_position):
    rng = random.Random(f"{pos_encoding}{norm}{mlp}{norm_position}")
    for bias, tie, grouped in itertools.product([True, False], repeat=3):
        options = {name: rng.choice(values) for name, values in OPTIONS.items()}
        config = random_config(rng, pos_encoding, norm, mlp, norm_position, bias, tie, grouped,
                               **options)
        model = meta_model(config)
        acc = accounting(config)
        assert acc.total == model.num_parameters() == count_parameters(config), config
        # Part by part, against the modules that hold them.
        rows = {row.name: row for row in acc.rows}
        block = model.blocks[0]
        assert rows["token embeddings (wte)"].params == numel(model.wte)
        assert rows["positions (wpe)"].params == (numel(model.wpe) if model.wpe else 0)
        assert rows["attention (per block)"].params == numel(block.attn)
        assert rows["feed-forward (per block)"].params == numel(block.mlp)
        assert rows["norms (per block)"].params == numel(block.norm_1) + numel(block.norm_2)
        assert rows["final norm (ln_f)"].params == (numel(model.ln_f) if model.ln_f else 0)
        assert rows["lm_head"].params == (0 if tie else numel(model.lm_head))
        assert acc.per_block == numel(block)
        value_mixes = config.n_layer - 1 if config.value_residual else 0  # not in block 0
        assert acc.blocks + value_mixes == numel(model.blocks)
        assert rows.get("value residual mix", Row("", 0, "")).params == value_mixes
        skips = numel(model) - numel(model.blocks) - sum(
            numel(m) for m in (model.wte, model.wpe, model.ln_f) if m is not None) - (
            0 if tie else numel(model.lm_head))
        assert rows.get("U-net skip weights", Row("", 0, "")).params == skips
        assert sum(r.params * r.count for r in acc.rows) == acc.total
        # N_matmul: the Linear weights (not biases) of the blocks, plus lm_head's.
        linear_weights = sum(m.weight.numel() for m in model.modules()
                             if isinstance(m, nn.Linear))
        assert acc.n_matmul == linear_weights
        # The shapes the per-rank memory is computed from hold every parameter once.
        assert sum(math.prod(s) for s in parameter_shapes(config)) == acc.total


def test_gpt2_block_is_7_1m_and_12Ld2_is_85m():
    acc = accounting(GPTConfig.from_preset("gpt2"))
    assert acc.per_block == 7_087_872  # d=768, h=12, with biases: ~7.1M
    assert acc.estimate_12Ld2 == 84_934_656  # ~85M
    assert acc.blocks == 12 * 7_087_872
    d = acc.to_dict()
    assert d["estimate_error_blocks"] == pytest.approx((84_934_656 - 85_054_464) / 85_054_464)
    assert d["estimate_error"] == pytest.approx((84_934_656 - 124_439_808) / 124_439_808)


def test_meta_parameter_count_matches_a_real_model():
    config = GPTConfig.from_preset("tiny-llama")
    assert meta_parameter_count(config) == GPT(config).num_parameters() == 29_408


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama"])
@pytest.mark.parametrize("seq_len", [1, 7, 32])
def test_flops_equal_torch_flop_counter(name, seq_len):
    """FlopCounterMode counts 2*m*n*k per matmul on a real forward and backward. The
    explicit-softmax attention path (record_weights) is used because the counter does not
    see CPU fused attention; it computes the full T x T scores, as our convention counts."""
    torch.manual_seed(0)
    config = GPTConfig.from_preset(name)
    model = GPT(config)
    for block in model.blocks:
        block.attn.record_weights = True
    idx = torch.randint(0, config.vocab_size, (1, seq_len))
    acc = accounting(config, seq_len=seq_len)
    with FlopCounterMode(display=False) as counter:
        model(idx, idx)
    assert counter.get_total_flops() == seq_len * acc.flops_forward_per_token
    with FlopCounterMode(display=False) as counter:
        _, loss = model(idx, idx)
        loss.backward()
    assert counter.get_total_flops() == seq_len * acc.flops_train_per_token


def test_flops_formula_for_gpt2():
    config = GPTConfig.from_preset("gpt2")
    L, d, V, T = 12, 768, 50257, 1024
    n_matmul = 12 * L * d * d + V * d  # 4d^2 attention + 8d^2 MLP per block, + lm_head
    flops = accounting(config).to_dict()["flops"]
    assert flops["n_matmul"] == n_matmul
    assert flops["attention_term_per_token"] == 4 * L * T * d
    assert flops["forward_per_token"] == 2 * n_matmul + 4 * L * T * d
    assert flops["train_per_token"] == 6 * n_matmul + 12 * L * T * d
    assert "2*N_matmul" in flops["formula"]
    short = accounting(config, seq_len=128).to_dict()["flops"]
    assert short["attention_term_per_token"] == 4 * L * 128 * d


def test_kv_cache_bytes_equal_a_real_cache():
    config = GPTConfig.from_preset("tiny-llama")  # grouped-query: 2 kv heads of 4
    model = GPT(config)
    memory = accounting(config).to_dict()["memory"]
    for dtype, key in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        cache = new_kv_cache(model, batch_size=1, max_len=config.block_size, dtype=dtype)
        nbytes = sum(t.numel() * t.element_size() for t in cache.keys + cache.values)
        assert memory[f"kv_cache_full_context_{key}"] == nbytes
        assert memory[f"kv_cache_per_token_{key}"] * config.block_size == nbytes
    llama70 = accounting(GPTConfig.from_preset("llama2-70b")).to_dict()["memory"]
    assert llama70["kv_cache_per_token_bf16"] == 2 * 80 * 8 * 128 * 2  # 320 KiB


def test_training_memory_equals_weights_grads_and_adamw_state():
    torch.manual_seed(0)
    config = GPTConfig.from_preset("tiny-gpt2")
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters())
    idx = torch.randint(0, config.vocab_size, (2, 8))
    model(idx, idx)[1].backward()
    optimizer.step()

    def nbytes(tensors):
        return sum(t.numel() * t.element_size() for t in tensors)

    params = list(model.parameters())
    state = [optimizer.state[p][k] for p in params for k in ("exp_avg", "exp_avg_sq")]
    measured = nbytes(params) + nbytes(p.grad for p in params) + nbytes(state)
    memory = accounting(config).to_dict()["memory"]
    assert memory["training_adamw_fp32"] == measured
    assert memory["weights_fp32"] == nbytes(params)
    assert memory["weights_bf16"] == nbytes(p.to(torch.bfloat16) for p in params)
    assert memory["units"] == "bytes"


def test_to_dict_is_json_ready_and_has_the_documented_keys():
    d = accounting(GPTConfig.from_preset("llama2-7b"), name="llama2-7b").to_dict()
    assert json.loads(json.dumps(d)) == d
    assert {"rows", "total", "per_block", "estimate_12Ld2", "estimate_error", "flops",
            "memory"} <= set(d)
    assert {"forward_per_token", "train_per_token", "attention_term_per_token",
            "formula"} <= set(d["flops"])
    assert {"weights_fp32", "weights_bf16", "training_adamw_fp32", "kv_cache_per_token_fp32",
            "kv_cache_per_token_bf16", "kv_cache_full_context_fp32",
            "kv_cache_full_context_bf16"} <= set(d["memory"])
    for row in d["rows"]:
        assert {"name", "params", "note"} <= set(row)
    assert d["total"] == 6_738_415_616
    assert d["seq_len"] == 4096


def test_seq_len_is_checked():
    config = GPTConfig.from_preset("gpt2")
    for bad in (0, -3, 1.5, True):
        with pytest.raises(UsageError, match="seq_len"):
            accounting(config, seq_len=bad)
    with pytest.raises(UsageError, match="block_size"):
        accounting(config, seq_len=1025)  # learned positions stop at block_size
    rope = GPTConfig.from_preset("llama2-7b")
    assert accounting(rope, seq_len=8192).seq_len == 8192  # RoPE has no such limit


def test_accounting_is_fast_enough_to_show_live():
    config = GPTConfig.from_preset("gpt2")
    times = []
    for _ in range(50):
        start = time.perf_counter()
        accounting(config).to_dict()
        times.append(time.perf_counter() - start)
    assert statistics.median(times) < 0.005


def test_table_shows_every_part_with_separators():
    table = accounting(GPTConfig.from_preset("gpt2"), name="gpt2").table()
    for text in ("token embeddings (wte)", "positions (wpe)", "attention (per block)",
                 "feed-forward (per block)", "norms (per block)", "final norm (ln_f)",
                 "lm_head", "tied", "124,439,808", "7,087,872", "84,934,656", "-0.14%",
                 "MiB", "GiB", "KV cache", "activations excluded"):
        assert text in table, text
    untied = accounting(GPTConfig.from_preset("llama2-70b")).table()
    assert "68,976,648,192" in untied and "untied" in untied


def test_counts_are_said_in_the_singular_for_one():
    from gptlab.model.params import accounting, counted

    assert (counted(1, "layer"), counted(2, "layer"), counted(0, "step")) == (
        "1 layer", "2 layers", "0 steps")
    one = GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=1, n_embd=8)
    table = accounting(one).table()
    assert "config: 1 layer, d_model 8, 1 head " in table and "all 1 block " in table
    assert "layers" not in table.splitlines()[0]
