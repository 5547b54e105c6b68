"""`gptlab params`: the accounting table and its JSON for a preset, a config file or a run,
per-rank memory under sharding, and every bad input in one line."""

from __future__ import annotations

import json

import pytest

from gptlab import GPTConfig
from gptlab.cli.main import main
from gptlab.distributed.memory import per_rank_memory
from gptlab.model.params import accounting, meta_parameter_count


def test_cli_table(gptlab):
    code, out, err = gptlab("params", "gpt2")
    assert code == 0 and err == ""
    assert "124,439,808" in out and "lm_head" in out


def test_cli_json_matches_accounting(gptlab):
    code, out, _ = gptlab("params", "llama2-70b", "--json")
    assert code == 0
    expected = accounting(GPTConfig.from_preset("llama2-70b"), name="llama2-70b").to_dict()
    assert json.loads(out) == expected


def test_cli_check_builds_on_meta(gptlab):
    code, out, _ = gptlab("params", "tiny-llama", "--check", "--json")
    assert code == 0 and json.loads(out)["meta_device_params"] == 29_408


def test_cli_config_json_path_and_run_dir(tmp_path, gptlab):
    config = GPTConfig(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128,
                       bias=False)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(config.to_dict()))
    code, out, _ = gptlab("params", str(path), "--json", "--seq-len", "16")
    assert code == 0
    data = json.loads(out)
    assert data["total"] == meta_parameter_count(config)
    assert data["seq_len"] == 16
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    code, out, _ = gptlab("params", str(run_dir), "--json")
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
    return [
        (["gpt5"], ["unknown preset 'gpt5'", "gpt2", "llama2-70b"]),
        ([str(malformed)], ["not valid JSON"]),
        ([str(tmp_path / "missing.json")], ["not found"]),
        ([str(bad_value)], ["n_embd", "n_head"]),
        ([str(unknown_field)], ["unknown config field", "n_heads"]),
        ([str(not_object)], ["JSON object"]),
        ([str(tmp_path)], ["config.json"]),
        (["gpt2", "--seq-len", "0"], ["argument --seq-len: must be >= 1, got 0"]),
        (["gpt2", "--seq-len", "4096"], ["block_size"]),
        ([""], ["give a preset name"]),
        ([str(tmp_path / "no-such-run")], ["no such run or model directory", "no-such-run"]),
        (["   "], ["give a preset name"]),
        ([str(infinite)], ["norm_eps must be a finite number > 0, got inf"]),
        # ranks: none is not one, and a number past any cluster is a typo
        (["gpt2", "--fsdp", "0"], ["argument --fsdp: must be between 1 and 1048576, got 0"]),
        (["gpt2", "--tp", "0"], ["argument --tp: must be between 1 and 1048576, got 0"]),
        (["gpt2", "--fsdp", "99999999999999999999"], ["argument --fsdp: must be between 1"]),
        (["gpt2", "--tp", "-2"], ["argument --tp: must be between 1"]),
    ]


def test_cli_argparse_error_is_one_line_exit_2(capsys):
    assert main(["params", "gpt2", "--seq-len", "many"]) == 2  # main returns argparse's code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--seq-len" in err


def test_cli_bad_input_is_one_line_exit_2(tmp_path, gptlab):
    for argv, words in bad_inputs(tmp_path):
        code, out, err = gptlab("params", *argv)
        assert code == 2, argv
        assert out == ""
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err
        for word in words:
            assert word in err, (argv, err)


@pytest.mark.slow  # seconds (a process, a timed-out body, 30 runs): make test, not make check
def test_cli_in_a_subprocess(tmp_path, gptlab_process):
    """The real entry point, a few cases (each start costs a torch import); main() above
    covers every bad input."""

    def gptlab(*argv):
        return gptlab_process("params", *argv)

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


def test_params_cli_gives_per_rank_memory(capsys):
    assert main(["params", "llama2-7b", "--fsdp", "4", "--tp", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["memory"]
    per_rank = out["training_per_rank"]
    assert (per_rank["fsdp"], per_rank["tp"]) == (4, 2)
    # no sharding: the whole model's 16 bytes per parameter, as the table already says
    whole = per_rank_memory(GPTConfig.from_preset("llama2-7b"))
    assert whole.total == out["training_adamw_fp32"]
    assert whole.total / 8 < per_rank["total"] < whole.total / 4  # TP leaves some whole
    assert main(["params", "gpt2-xl", "--tp", "8"]) != 0
    assert "--tp 8 does not divide n_head 25" in capsys.readouterr().err


def test_a_hugging_face_directory_is_counted_from_its_config(tmp_path, gptlab):
    """params takes what gptlab.load takes; of a Hugging Face directory it reads config.json
    alone (no weights there)."""
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    (hf_dir / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    code, out, err = gptlab("params", hf_dir, "--json")
    assert code == 0, err
    two_blocks = accounting(GPTConfig.from_preset("gpt2", n_layer=2)).total
    assert json.loads(out)["total"] == two_blocks == 124_439_808 - 10 * 7_087_872


def test_a_preset_a_file_a_run_and_the_shipped_model_are_counted_without_torch(tmp_path):
    """Counting reads a config: `gptlab params` imported torch for it (1.3 s of its 1.3 s
    idle, 11-27 s under load) and now does not, but for --check, which builds the model,
    and a Hugging Face model, whose config transformers reads."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    config = GPTConfig(vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=64)
    (tmp_path / "model.json").write_text(json.dumps(config.to_dict()))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps(config.to_dict()))
    argvs = [["params", "gpt2"], ["params", str(tmp_path / "model.json")],
             ["params", str(tmp_path / "run"), "--fsdp", "2"], ["params", "shakespeare"],
             ["params", "llama2-7b", "--json"]]
    code = f"""
import contextlib, io, json, sys
from gptlab.cli.main import main
codes = []
for argv in {argvs!r}:
    with contextlib.redirect_stdout(io.StringIO()):
        codes.append(main(argv))
print(json.dumps({{"codes": codes, "torch": "torch" in sys.modules}}))
"""
    src = Path(__file__).resolve().parents[2] / "src"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(src)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"codes": [0] * 5, "torch": False}


def test_the_shipped_model_is_counted_by_its_name(gptlab):
    code, out, err = gptlab("params", "shakespeare")
    assert code == 0 and err == "" and out.startswith(
        "shakespeare: 6 layers, d_model 192, 6 heads (6 kv) of 32")
