"""`gptlab sample`: streaming, stop strings, seeds, several samples, reduced-precision
weights, and bad input."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gptlab import probe
from gptlab.cli.main import main
from gptlab.cli.sample import SEPARATOR
from gptlab.data.tokenizer import CharTokenizer
from gptlab.inference import sampling
from gptlab.model.config import GPTConfig
from gptlab.model_dir import load_model

CHARS = sorted(set("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ:.,\n"))


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, save_char_model) -> Path:
    """A random-weight char model saved as a plain model directory."""
    directory, *_ = save_char_model(tmp_path_factory.mktemp("model") / "m", "".join(CHARS),
                                    block_size=32, n_layer=1, n_head=2, n_embd=16)
    return directory



def test_seed_reproduces_and_differs(model_dir, gptlab):
    a = gptlab("sample", model_dir, "--seed", 1, "--max-new-tokens", 60)
    b = gptlab("sample", model_dir, "--seed", 1, "--max-new-tokens", 60)
    c = gptlab("sample", model_dir, "--seed", 2, "--max-new-tokens", 60)
    assert a[0] == 0 and a == b and a[1] != c[1]
    assert len(a[1]) == 1 + 60 + 1  # the prompt "\n", 60 chars, a final newline


def test_num_samples_and_prompt(model_dir, gptlab):
    code, out, _ = gptlab("sample", model_dir, "--prompt", "KING:", "--num-samples", 3,
                          "--max-new-tokens", 20, "--seed", 0)
    parts = out.split(f"\n{SEPARATOR}\n")
    assert code == 0 and len(parts) == 3
    assert all(p.startswith("KING:") and len(p.rstrip("\n")) >= 5 for p in parts)
    assert len({p for p in parts}) == 3  # one generator runs on: three different samples


def test_greedy_equals_model_generate(model_dir, gptlab):
    code, out, _ = gptlab("sample", model_dir, "--prompt", "ab", "--greedy",
                          "--max-new-tokens", 50, "--no-prompt")
    model = load_model(model_dir)
    tok = CharTokenizer(CHARS)
    ids = model.generate(torch.tensor([tok.encode("ab")]), 50, temperature=0.0)
    assert code == 0 and out == tok.decode(ids[0, 2:].tolist()) + "\n"


def test_stop_strings(model_dir, gptlab):
    _, full, _ = gptlab("sample", model_dir, "--greedy", "--max-new-tokens", 80, "--no-prompt")
    stop = full[10:12]
    code, out, _ = gptlab("sample", model_dir, "--greedy", "--max-new-tokens", 80, "--no-prompt",
                          "--stop", "never-there", "--stop", stop)
    assert code == 0 and out == full[: full.find(stop)] + "\n"


def test_output_streams_as_tokens_arrive(model_dir, monkeypatch):
    """Each token's text is written and flushed before the next token is computed."""
    written = io.StringIO()
    seen_at_token = []
    real = sampling.generate_tokens

    def spy(*args, **kwargs):
        for token in real(*args, **kwargs):
            seen_at_token.append(len(written.getvalue()))
            yield token

    monkeypatch.setattr(sampling, "generate_tokens", spy)
    monkeypatch.setattr(sys, "stdout", written)
    assert main(["sample", str(model_dir), "--max-new-tokens", "30", "--seed", "3"]) == 0
    # when token i is yielded, the prompt and the i previous tokens are already out
    assert seen_at_token == [1 + i for i in range(30)]


def test_streams_through_a_pipe(model_dir, tmp_path):
    """Run as a program: the first characters arrive while generation is still going."""
    cmd = [sys.executable, "-m", "gptlab", "sample", str(model_dir), "--max-new-tokens",
           "100000", "--seed", "0", "--device", "cpu"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = proc.stdout.read(20)
        assert len(first) == 20 and proc.poll() is None  # text, and still generating
    finally:
        proc.kill()
        proc.communicate()


def test_long_prompt_is_cropped_with_a_warning(model_dir, gptlab):
    code, out, err = gptlab("sample", model_dir, "--prompt", "abc " * 20, "--max-new-tokens", 5,
                            "--no-prompt", "--seed", 0)
    assert code == 0 and len(out) == 6
    assert "warning: prompt of 80 tokens cropped to the last 32" in err


def test_model_directory_without_training_files(model_dir):
    assert not (model_dir / "state.pt").exists()  # a plain model dir, as `convert` writes


@pytest.mark.parametrize("argv, message", [
    (["--prompt", "héllo€"], "characters not in the vocabulary: 'é', '€'"),
    # the library names its parameters; the CLI says the flags
    (["--temperature", "-1"], "error: --temperature must be a finite number >= 0"),
    (["--temperature", "nan"], "argument --temperature: must be a finite number, got 'nan'"),
    (["--temperature", "inf"], "argument --temperature: must be a finite number, got 'inf'"),
    (["--temperature=-inf"], "argument --temperature: must be a finite number, got '-inf'"),
    (["--temperature", "1e400"], "argument --temperature: must be a finite number"),
    (["--top-k", "0"], "error: --top-k must be an integer >= 1"),
    (["--top-k", "-5"], "error: --top-k must be an integer >= 1"),
    (["--top-p", "1.5"], "error: --top-p must be in (0, 1]"),
    (["--top-p", "nan"], "argument --top-p: must be a finite number, got 'nan'"),
    (["--top-p", "0"], "error: --top-p must be in (0, 1]"),
    (["--num-samples", "0"], "argument --num-samples: must be >= 1"),
    (["--max-new-tokens", "-1"], "argument --max-new-tokens: must be >= 0"),
    # checked before any work: the prompt was printed before this error
    (["--stop", ""], "argument --stop: must not be empty"),
    pytest.param(["--prompt", ""], "the prompt is empty", id="empty-prompt"),
    (["--seed", "-1"], "argument --seed: must be between 0 and 2**64 - 1, got -1"),
    (["--seed", str(2**64)], "argument --seed: must be between 0 and 2**64 - 1"),
    (["--seed", str(2**70)], "argument --seed: must be between 0 and 2**64 - 1"),
    (["--seed", "1.5"], "argument --seed: must be an integer, got '1.5'"),
    pytest.param(["--prompt", "ab\udcff"],
                 "argument --prompt: not UTF-8 text: byte 0xff at offset 2", id="prompt-not-utf8"),
    pytest.param(["--stop", "\udc80"],
                 "argument --stop: not UTF-8 text: byte 0x80 at offset 0", id="stop-not-utf8"),
    (["--device", "garbage"], "unknown device 'garbage'; available here: auto, cpu"),
    (["--device", ""], "unknown device ''"),
    (["--device", "meta"], "device 'meta' is not available"),
    (["--context", "33"], "block_size = 32 rows, for positions 0..31, and there is no row for "
                          "position 32"),
    (["--context", "0"], "argument --context: must be >= 1"),
    (["--rope-scaling", "yarn:2"], "this model's pos_encoding is 'learned'"),
    (["--rope-scaling", "yarn"], "argument --rope-scaling: rope scaling must be KIND:FACTOR"),
])
def test_bad_arguments(model_dir, argv, message, gptlab):
    code, out, err = gptlab("sample", model_dir, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


@pytest.mark.parametrize("device", ["mps", "xpu", "cuda", "cuda:7", "hpu"])
def test_a_device_this_machine_lacks_is_one_line(model_dir, device, gptlab):
    kind, _, index = device.partition(":")
    backend = getattr(torch, kind, None)
    if backend is not None and getattr(backend, "is_available", lambda: False)() and (
            not index or backend.device_count() > int(index)):
        pytest.skip(f"this machine has {device}")
    code, out, err = gptlab("sample", model_dir, "--device", device, "--max-new-tokens", 1)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"device {device!r}" in err and "Traceback" not in err


def test_the_largest_seed_works(model_dir, gptlab):
    code, out, _ = gptlab("sample", model_dir, "--seed", 2**64 - 1, "--max-new-tokens", 5)
    assert code == 0 and len(out) == 1 + 5 + 1


def test_a_tiny_temperature_is_greedy_not_nan(model_dir, gptlab):
    _, greedy, _ = gptlab("sample", model_dir, "--greedy", "--max-new-tokens", 20)
    for temperature in ("1e-300", "5e-324", "1e-45"):
        code, out, err = gptlab("sample", model_dir, "--temperature", temperature,
                                "--max-new-tokens", 20, "--seed", 0)
        assert (code, out, err) == (0, greedy, "")


def test_stop_takes_one_value_and_repeats(model_dir, gptlab):
    """`--stop STR RUN_DIR` reads RUN_DIR as the run, not as a second stop string."""
    _, full, _ = gptlab("sample", "--greedy", model_dir, "--max-new-tokens", 80, "--no-prompt")
    code, out, _ = gptlab("sample", "--stop", full[10:12], model_dir, "--greedy",
                          "--max-new-tokens", 80, "--no-prompt")
    assert code == 0 and out == full[: full.find(full[10:12])] + "\n"
    code, out, _ = gptlab("sample", "--stop", "zzzz", "--stop", full[10:12], model_dir,
                          "--greedy", "--max-new-tokens", 80, "--no-prompt")
    assert code == 0 and out == full[: full.find(full[10:12])] + "\n"


def test_escapes_in_prompt_and_stop(model_dir, gptlab):
    code, out, _ = gptlab("sample", model_dir, "--prompt", r"ab\nc", "--max-new-tokens", 0)
    assert code == 0 and out == "ab\nc\n"
    code, out, err = gptlab("sample", model_dir, "--prompt", r"a\\n", "--max-new-tokens", 0)
    assert code == 2 and "characters not in the vocabulary: '\\\\'" in err  # a\n: a, \, n
    same = ("--seed", 0, "--temperature", 1, "--max-new-tokens", 300, "--no-prompt")
    _, full, _ = gptlab("sample", model_dir, *same)
    assert "\n" in full[:-1], "the sample should hold a newline to stop at"
    code, out, _ = gptlab("sample", model_dir, *same, "--stop", r"\n")
    assert code == 0 and out == full[: full.index("\n")] + "\n"



def test_default_prompt_comes_from_the_vocabulary(tmp_path, gptlab, save_char_model):
    """A vocabulary without a newline: the default prompt is its first token."""
    save_char_model(tmp_path, "abcdefgh ", block_size=16, n_layer=1, n_head=2, n_embd=16)
    code, out, err = gptlab("sample", tmp_path, "--max-new-tokens", 10, "--seed", 0)
    assert code == 0 and err == "" and out.startswith(" ") and len(out) == 1 + 10 + 1
    assert sampling.default_prompt(CharTokenizer(CHARS).encode, None) == "\n"


def broken_copy(model_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "m"
    copy.mkdir()
    for f in model_dir.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    return copy


def test_bad_model_directories(model_dir, tmp_path, gptlab):
    code, _, err = gptlab("sample", tmp_path / "missing")
    assert code == 2 and "no such run or model directory" in err
    m = broken_copy(model_dir, tmp_path)
    weights = (m / "model.safetensors").read_bytes()
    (m / "model.safetensors").write_bytes(weights[: len(weights) // 2])  # truncated
    code, out, err = gptlab("sample", m)
    assert code == 2 and "is not a readable safetensors file" in err and out == ""
    (m / "model.safetensors").write_bytes(b"\x00" * 64)  # garbage
    code, _, err = gptlab("sample", m)
    assert code == 2 and "is not a readable safetensors file" in err
    (m / "model.safetensors").write_bytes(weights)
    cfg = json.loads((m / "config.json").read_text())
    (m / "config.json").write_text(json.dumps({**cfg, "n_embd": 32}))  # disagrees
    code, _, err = gptlab("sample", m)
    assert code == 2 and "does not match its config" in err and err.count("\n") == 1
    (m / "config.json").write_text(json.dumps(cfg))
    (m / "tokenizer.json").unlink()
    code, _, err = gptlab("sample", m)
    assert code == 2 and "has no tokenizer.json" in err


def test_a_run_with_a_flipped_bit_in_its_weights_is_one_line_naming_the_file(
        trained_run, tmp_path, gptlab, one_line):
    """safetensors has no checksum of its own: before the one gptlab records, this sampled
    garbage with exit 0. Its best/ weights, unchanged, still sample."""
    run = Path(shutil.copytree(trained_run, tmp_path / "run"))
    weights = run / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) - 1000] ^= 0x40  # in the tensor data, past the header
    weights.write_bytes(bytes(data))
    err = one_line(gptlab("sample", run, "--max-new-tokens", 5))
    assert f"{weights} is damaged: its tensors' sha256" in err
    err = one_line(gptlab("eval", run, "--text", "the king"))
    assert f"{weights} is damaged" in err
    assert gptlab("sample", run / "best", "--max-new-tokens", 5)[0] == 0


def test_samples_a_trained_run(tmp_path, gptlab):
    """A run directory from `gptlab train` samples, and so does its best/."""
    from gptlab.data.prepared import prepare
    from gptlab.training.config import TrainConfig
    from gptlab.training.run import train

    text = "to be or not to be, that is the question.\n" * 200
    prepare(text, tmp_path / "data", CharTokenizer.from_text(text), source="t")
    start = time.perf_counter()
    train(GPTConfig(vocab_size=1, block_size=16, n_layer=1, n_head=2, n_embd=32),
          TrainConfig(batch_size=8, max_iters=150, warmup_iters=5, learning_rate=1e-2,
                      eval_interval=150, eval_iters=1), tmp_path / "data", tmp_path / "run",
          progress=False)
    assert time.perf_counter() - start < 120
    for run in (tmp_path / "run", tmp_path / "run" / "best"):
        code, out, _ = gptlab("sample", run, "--prompt", "to be or", "--greedy",
                              "--max-new-tokens", 20)
        assert code == 0 and out.startswith("to be or not to be")


def test_sample_cli_weights(tiny_run, capsys, monkeypatch, tmp_path, probing):
    """On a quiet machine a probe says it runs, once; on a busy one none runs (each call
    spent most of its time on one, for nothing) and the default, fp32, says nothing."""
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(probe, "machine_load", lambda: 0.0)
    sample = ["sample", str(tiny_run), "--greedy", "--prompt", "the ", "--max-new-tokens", "20"]
    timing = ("gptlab sample: timing {} decoding kernels ({}) on this machine, once (cached in "
              f"{tmp_path / probe.PROBES_FILE} when the timings are steady)")
    code = main([*sample, "--weights", "int8"])
    out, err = capsys.readouterr()
    announced, reason = err.splitlines()
    assert code == 0 and out.startswith("the ") and len(out) > 10
    assert announced == timing.format(3, "int8/bf16_input, int8/fp32_input, int8/dynamic")
    assert reason.startswith("gptlab sample: weights int8/") and "ms per token" in reason
    assert main(sample) == 0
    assert capsys.readouterr().err == timing.format(2, "fp32/linear, fp32/matmul_t") + "\n"
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(probe, "machine_load", lambda: 9.0)
    assert main(sample) == 0 and capsys.readouterr().err == ""
    assert main([*sample, "--weights", "int8"]) == 0
    assert capsys.readouterr().err.startswith("gptlab sample: weights int8/bf16_input (not "
                                              "timed, load average 9.00 on ")
    assert main(["sample", str(tiny_run), "--weights", "int4"]) == 2
    assert "invalid choice: 'int4'" in capsys.readouterr().err


def test_a_typo_of_the_shipped_model_is_did_you_mean_not_a_hub_lookup(gptlab, monkeypatch):
    from gptlab.convert import hf

    def hub(name, **kwargs):
        pytest.fail(f"{name} was sent to the hub")

    monkeypatch.setattr(hf, "resolve_hf_dir", hub)
    code, out, err = gptlab("sample", "shakespear", "--max-new-tokens", "5")
    assert (code, out) == (2, "")
    assert err == ("gptlab sample: error: no such run or model directory: shakespear; did you "
                   "mean shakespeare (the model gptlab ships)?\n")
