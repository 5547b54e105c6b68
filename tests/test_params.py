"""Parameter, FLOP and memory accounting (gptlab.model.params) and the `gptlab params` command.

The arithmetic is checked against the model itself: parameters against GPT(config) on the
meta device, part by part; FLOPs against torch's FlopCounterMode running a real forward and
backward; memory against a real KV cache and a real AdamW state."""

from __future__ import annotations

import itertools
import json
import random
import statistics
import subprocess
import sys
import time

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from gptlab import GPT, GPTConfig
from gptlab.cli.main import main
from gptlab.errors import UsageError
from gptlab.model.config import MLPS, NORM_POSITIONS, NORMS, POS_ENCODINGS
from gptlab.model.kv_cache import new_kv_cache
from gptlab.model.params import accounting, count_parameters, meta_parameter_count


def meta_model(config: GPTConfig) -> GPT:
    with torch.device("meta"):
        return GPT(config)


def numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def random_config(rng: random.Random, pos_encoding: str, norm: str, mlp: str,
                  norm_position: str, bias: bool, tie: bool, grouped: bool) -> GPTConfig:
    """A small valid config with these switches and otherwise random sizes."""
    n_kv_head = rng.choice([1, 2, 3])
    n_head = n_kv_head * rng.choice([2, 3]) if grouped else n_kv_head
    head_dim = rng.choice([2, 4, 6, 8]) if pos_encoding == "rope" else rng.choice([1, 3, 4, 5])
    n_embd = n_head * head_dim
    return GPTConfig(
        vocab_size=rng.randint(5, 120), block_size=rng.randint(1, 40),
        n_layer=rng.randint(1, 3), n_head=n_head, n_kv_head=n_kv_head, n_embd=n_embd,
        ffn_hidden=rng.choice([None, rng.randint(1, 50)]), pos_encoding=pos_encoding,
        norm=norm, mlp=mlp, norm_position=norm_position, bias=bias, tie_embeddings=tie,
    )


GRID = list(itertools.product(POS_ENCODINGS, NORMS, MLPS, NORM_POSITIONS, [True, False],
                              [True, False], [True, False]))


def test_grid_covers_every_switch():
    assert len(GRID) == 4 * 2 * 3 * 2 * 2 * 2 * 2


@pytest.mark.parametrize("pos_encoding,norm,mlp,norm_position", sorted(
    {g[:4] for g in GRID}))
def test_analytic_count_equals_meta_model_over_a_grid(pos_encoding, norm, mlp, norm_position):
    rng = random.Random(f"{pos_encoding}{norm}{mlp}{norm_position}")
    for bias, tie, grouped in itertools.product([True, False], repeat=3):
        config = random_config(rng, pos_encoding, norm, mlp, norm_position, bias, tie, grouped)
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
        assert acc.blocks == numel(model.blocks)
        assert sum(r.params * r.count for r in acc.rows) == acc.total
        # N_matmul: the Linear weights (not biases) of the blocks, plus lm_head's.
        linear_weights = sum(m.weight.numel() for m in model.modules()
                             if isinstance(m, nn.Linear))
        assert acc.n_matmul == linear_weights


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


# ----------------------------------------------------------------------------- the CLI


def run_main(capsys, *argv):
    code = main(["params", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_table(capsys):
    code, out, err = run_main(capsys, "gpt2")
    assert code == 0 and err == ""
    assert "124,439,808" in out and "lm_head" in out


def test_cli_json_matches_accounting(capsys):
    code, out, _ = run_main(capsys, "llama2-70b", "--json")
    assert code == 0
    expected = accounting(GPTConfig.from_preset("llama2-70b"), name="llama2-70b").to_dict()
    assert json.loads(out) == expected


def test_cli_check_builds_on_meta(capsys):
    code, out, _ = run_main(capsys, "tiny-llama", "--check", "--json")
    assert code == 0 and json.loads(out)["meta_device_params"] == 29_408


def test_cli_config_json_path_and_run_dir(capsys, tmp_path):
    config = GPTConfig(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128,
                       bias=False)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(config.to_dict()))
    code, out, _ = run_main(capsys, str(path), "--json", "--seq-len", "16")
    assert code == 0
    data = json.loads(out)
    assert data["total"] == meta_parameter_count(config)
    assert data["seq_len"] == 16
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    code, out, _ = run_main(capsys, str(run_dir), "--json")
    assert code == 0 and json.loads(out)["total"] == data["total"]


def bad_inputs(tmp_path):
    """(argv, words the one-line message must contain)."""
    malformed = tmp_path / "malformed.json"
    malformed.write_text("{not json")
    bad_value = tmp_path / "bad_value.json"
    bad_value.write_text(json.dumps({"n_embd": 100, "n_head": 12}))
    unknown_field = tmp_path / "unknown_field.json"
    unknown_field.write_text(json.dumps({"n_embd": 64, "n_heads": 4}))
    not_object = tmp_path / "list.json"
    not_object.write_text("[1, 2]")
    infinite = tmp_path / "infinite.json"
    infinite.write_text('{"norm_eps": Infinity}')  # Python's json reads it
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    (hf_dir / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    return [
        (["gpt5"], ["unknown preset 'gpt5'", "gpt2", "llama2-70b"]),
        ([str(malformed)], ["not valid JSON"]),
        ([str(tmp_path / "missing.json")], ["not found"]),
        ([str(bad_value)], ["n_embd", "n_head"]),
        ([str(unknown_field)], ["unknown config field", "n_heads"]),
        ([str(not_object)], ["JSON object"]),
        ([str(tmp_path)], ["config.json"]),
        (["gpt2", "--seq-len", "0"], ["seq_len"]),
        (["gpt2", "--seq-len", "4096"], ["block_size"]),
        ([""], ["give a preset name"]),
        ([str(tmp_path / "no-such-run")], ["not found:", "no-such-run"]),
        (["   "], ["give a preset name"]),
        ([str(infinite)], ["norm_eps must be a finite number > 0, got inf"]),
        ([str(hf_dir)], ["is a Hugging Face model directory", "convert --from-hf"]),
    ]


def test_cli_argparse_error_is_one_line_exit_2(capsys):
    assert main(["params", "gpt2", "--seq-len", "many"]) == 2  # main returns argparse's code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--seq-len" in err


def test_cli_bad_input_is_one_line_exit_2(capsys, tmp_path):
    for argv, words in bad_inputs(tmp_path):
        code, out, err = run_main(capsys, *argv)
        assert code == 2, argv
        assert out == ""
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err
        for word in words:
            assert word in err, (argv, err)


def test_cli_in_a_subprocess(tmp_path):
    """The real entry point, a few cases (each start costs a torch import); main() above
    covers every bad input."""

    def gptlab(*argv):
        return subprocess.run([sys.executable, "-m", "gptlab", "params", *argv],
                              capture_output=True, text=True, timeout=120)

    done = gptlab("gpt2")
    assert done.returncode == 0 and "124,439,808" in done.stdout
    done = gptlab("gpt2-xl", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["total"] == 1_557_611_200
    for argv, words in bad_inputs(tmp_path)[:2]:  # unknown preset, malformed JSON
        done = gptlab(*argv)
        assert done.returncode == 2, argv
        assert done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert words[0] in done.stderr and "Traceback" not in done.stderr
