"""`gptlab convert` both ways, end to end, and its one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers  # the `gptlab[hf]` extra, part of the test extras
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from gptlab.cli.main import main
from gptlab.data.tokenizer import load_tokenizer
from gptlab.files.model_dir import load_model, save_model
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT

TEXT = ("To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer "
        "the slings and arrows of outrageous fortune, or to take arms against a sea of "
        "troubles, and by opposing end them. ") * 20
PROMPT = "To be, or not"


def train_tokenizer(path: Path) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT], trainer=trainer)
    tok.save(str(path))
    return tok


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    """A Hugging Face GPT-2 directory, as save_pretrained writes it, with a tokenizer.json."""
    directory = tmp_path_factory.mktemp("hf-gpt2")
    tok = train_tokenizer(directory / "tokenizer.json")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=64, n_embd=32,
                                     n_layer=2, n_head=4, bos_token_id=None, eos_token_id=None)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    model.save_pretrained(directory)
    return directory


def run_gptlab(*args: str) -> subprocess.CompletedProcess:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "gptlab", *args], capture_output=True,
                           text=True, env=env, timeout=120)


def test_from_hf_writes_a_model_directory_that_generates_like_transformers(hf_dir, tmp_path):
    out = tmp_path / "model"
    result = run_gptlab("convert", "--from-hf", str(hf_dir), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json"]
    model = load_model(out)
    tokenizer = load_tokenizer(out / "tokenizer.json")
    prompt = torch.tensor([tokenizer.encode(PROMPT)])
    ours = model.generate(prompt, 5, temperature=0.0)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval().generate(
        prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=5,
        eos_token_id=None, pad_token_id=0)
    assert torch.equal(ours, theirs)
    assert tokenizer.decode(ours[0].tolist()).startswith(PROMPT)


def test_sample_runs_on_a_converted_directory(hf_dir, tmp_path):
    out = tmp_path / "model"
    assert main(["convert", "--from-hf", str(hf_dir), "--out", str(out)]) == 0
    result = run_gptlab("sample", str(out), "--prompt", PROMPT, "--max-new-tokens", "5")
    assert result.returncode == 0, result.stderr
    assert PROMPT in result.stdout


def test_to_hf_writes_what_transformers_loads(hf_dir, tmp_path, capsys):
    torch.manual_seed(1)
    config = GPTConfig(vocab_size=300, block_size=32, n_layer=2, n_head=4, n_kv_head=2,
                       n_embd=32, pos_encoding="rope", norm="rmsnorm", mlp="swiglu", bias=False,
                       tie_embeddings=False)
    model = GPT(config).eval()
    model_dir = tmp_path / "ours"
    save_model(model, model_dir)
    (model_dir / "tokenizer.json").write_bytes((hf_dir / "tokenizer.json").read_bytes())
    out = tmp_path / "hf"
    assert main(["convert", "--to-hf", str(model_dir), "--out", str(out)]) == 0
    assert "tokenizer.json" in capsys.readouterr().out
    assert (out / "tokenizer.json").read_bytes() == (hf_dir / "tokenizer.json").read_bytes()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(theirs).__name__ == "LlamaForCausalLM"
    idx = torch.randint(0, 300, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (theirs(idx).logits - model(idx)[0]).abs().max() <= 1e-5


def _one_line_error(capsys, argv: list[str], expected_code: int = 2) -> str:
    assert main(argv) == expected_code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gptlab convert: error: "), err
    return err


def test_errors_are_one_line(hf_dir, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert "has no config.json" in _one_line_error(
        capsys, ["convert", "--from-hf", str(tmp_path), "--out", out])
    assert "directory not found" in _one_line_error(
        capsys, ["convert", "--from-hf", str(tmp_path / "missing"), "--out", out])

    other = tmp_path / "bert"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "bert",
                                                   "architectures": ["BertModel"]}))
    err = _one_line_error(capsys, ["convert", "--from-hf", str(other), "--out", out])
    assert "unsupported architecture 'bert'" in err and "BertModel" in err

    bad = tmp_path / "bad-shapes"
    bad.mkdir()
    config = json.loads((hf_dir / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**config, "n_embd": 48, "n_head": 4}))
    (bad / "model.safetensors").write_bytes((hf_dir / "model.safetensors").read_bytes())
    assert "has shape" in _one_line_error(capsys, ["convert", "--from-hf", str(bad), "--out", out])

    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text(json.dumps(config))
    torch.save({"transformer.wte.weight": _Evil()}, pickled / "pytorch_model.bin")
    assert "not a plain state dict" in _one_line_error(
        capsys, ["convert", "--from-hf", str(pickled), "--out", out])

    post_norm = tmp_path / "post-norm"
    save_model(GPT(GPTConfig(vocab_size=50, block_size=8, n_layer=1, n_head=2, n_embd=16,
                             norm_position="post", norm_eps=1e-6)), post_norm)
    assert "post-norm" in _one_line_error(capsys, ["convert", "--to-hf", str(post_norm),
                                                   "--out", out])
    assert "gptlab model directory" in _one_line_error(
        capsys, ["convert", "--from-hf", str(post_norm), "--out", out])
    assert not Path(out).exists()  # nothing half-written


def test_refuses_to_overwrite_without_force(hf_dir, tmp_path, capsys):
    out = tmp_path / "model"
    assert main(["convert", "--from-hf", str(hf_dir), "--out", str(out)]) == 0
    assert "--force" in _one_line_error(capsys, ["convert", "--from-hf", str(hf_dir),
                                                 "--out", str(out)])
    assert main(["convert", "--from-hf", str(hf_dir), "--out", str(out), "--force"]) == 0


def test_without_transformers_the_cli_says_what_to_install(hf_dir, tmp_path, capsys,
                                                           without_transformers):
    err = _one_line_error(capsys, ["convert", "--from-hf", str(hf_dir), "--out",
                                   str(tmp_path / "out")], expected_code=1)
    assert "pip install 'gptlab[hf]'" in err


def test_an_out_that_cannot_be_created_is_one_line(hf_dir, tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for out, message in ((a_file / "sub", f"{a_file} is a file"),
                         (a_file, "exists and is not a directory"),
                         (Path("/proc/gptlab-no/such"), "cannot create directory")):
        for direction in ("--from-hf", "--to-hf"):
            source = hf_dir if direction == "--from-hf" else tmp_path / "ours"
            if direction == "--to-hf" and not source.exists():
                assert main(["convert", "--from-hf", str(hf_dir), "--out", str(source)]) == 0
                capsys.readouterr()
            err = _one_line_error(capsys, ["convert", direction, str(source), "--out", str(out)])
            assert message in err
    assert a_file.read_text() == "x"


def test_an_out_that_is_a_data_directory_is_refused(hf_dir, tmp_path, capsys):
    """Its tokenizer.json would be replaced by the model's."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.json").write_text("{}")
    (data / "tokenizer.json").write_text("ours")
    err = _one_line_error(capsys, ["convert", "--from-hf", str(hf_dir), "--out", str(data)])
    assert "is a data directory" in err and (data / "tokenizer.json").read_text() == "ours"
    assert sorted(p.name for p in data.iterdir()) == ["meta.json", "tokenizer.json"]


def test_to_hf_of_a_hugging_face_directory_says_so(hf_dir, tmp_path, capsys):
    err = _one_line_error(capsys, ["convert", "--to-hf", str(hf_dir), "--out",
                                   str(tmp_path / "out")])
    assert "is a Hugging Face model directory, not a gptlab one (--from-hf converts it)" in err
    assert not (tmp_path / "out").exists()


def test_a_wrong_type_in_an_hf_config_is_named_in_full(hf_dir, tmp_path, capsys):
    bad = tmp_path / "bad-type"
    bad.mkdir()
    config = json.loads((hf_dir / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**config, "n_layer": "abc"}))
    (bad / "model.safetensors").write_bytes((hf_dir / "model.safetensors").read_bytes())
    err = _one_line_error(capsys, ["convert", "--from-hf", str(bad), "--out",
                                   str(tmp_path / "out")])
    # transformers' message is two lines; the second, which says what is wrong, is kept
    assert "n_layer" in err and "expected int, got str" in err and "'abc'" in err


@pytest.mark.parametrize("error, code, message", [
    ("network", 1, "could not be fetched"),
    ("not_found", 2, "the Hugging Face hub has no such model"),
    ("bad_name", 2, "the Hugging Face hub has no such model"),
])
def test_hub_failures_exit_with_the_documented_codes(tmp_path, capsys, monkeypatch, error, code,
                                                     message):
    """Offline (or the hub unreachable) is a failure, exit 1; a name the hub refuses is bad
    input, exit 2 (README, "Exit codes")."""
    import huggingface_hub
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    def fake_snapshot_download(name, **kwargs):
        if error == "network" or kwargs.get("local_files_only"):
            raise LocalEntryNotFoundError("cannot reach the hub\nand nothing cached")
        if error == "bad_name":
            raise HFValidationError(f"Repo id must use alphanumeric chars: {name!r}")
        raise huggingface_hub.errors.RepositoryNotFoundError("404 no such repo",
                                                             response=_Response())

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    err = _one_line_error(capsys, ["convert", "--from-hf", "someone/some-model", "--out",
                                   str(tmp_path / "out")], expected_code=code)
    assert message in err and "'someone/some-model'" in err


class _Response:  # what RepositoryNotFoundError reads from an httpx response
    status_code = 404
    headers: dict = {}
    request = None

    def json(self):
        return {}


class _Evil:
    def __reduce__(self):
        return (print, ("this must never run",))
