"""`gptlab convert` both ways, end to end: --from-hf writes a model directory that generates
as transformers does; --to-hf, for every kind of model Hugging Face holds exactly, writes
what transformers' AutoModelForCausalLM and AutoTokenizer load as our ids, our logits
(within 1e-5) and `gptlab sample --greedy`'s text; --to-gguf refuses what llama.cpp cannot
run. Every error is one line and leaves nothing behind. No downloads. (llama.cpp's side of
--to-gguf: tests/convert/test_gguf_export.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import gguf
import pytest
import torch
import transformers  # the `gptlab[hf]` extra, part of the test extras
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from gptlab.cli.main import main
from gptlab.data.tokenizer import CharTokenizer, HFTokenizer, load_tokenizer
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model_dir import load_model, save_model

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


@pytest.fixture(scope="session")
def run_gptlab(gptlab_process):
    """`python -m gptlab ...` with the Hugging Face hub offline."""
    return lambda *args: gptlab_process(*args, HF_HUB_OFFLINE="1")


@pytest.mark.oracle
def test_from_hf_writes_a_model_directory_that_generates_like_transformers(hf_dir, tmp_path,
                                                                          run_gptlab):
    out = tmp_path / "model"
    result = run_gptlab("convert", "--from-hf", str(hf_dir), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        ".gptlab.json", "config.json", "model.safetensors", "tokenizer.json"]  # and its mark
    model = load_model(out)
    tokenizer = load_tokenizer(out / "tokenizer.json")
    prompt = torch.tensor([tokenizer.encode(PROMPT)])
    ours = model.generate(prompt, 5, temperature=0.0)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval().generate(
        prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=5,
        eos_token_id=None, pad_token_id=0)
    assert torch.equal(ours, theirs)
    assert tokenizer.decode(ours[0].tolist()).startswith(PROMPT)


def test_sample_runs_on_a_converted_directory(hf_dir, tmp_path, run_gptlab):
    out = tmp_path / "model"
    assert main(["convert", "--from-hf", str(hf_dir), "--out", str(out)]) == 0
    result = run_gptlab("sample", str(out), "--prompt", PROMPT, "--max-new-tokens", "5")
    assert result.returncode == 0, result.stderr
    assert PROMPT in result.stdout


@pytest.mark.oracle
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
    (data / "meta.json").write_text('{"version": 1, "vocab_size": 3, "train_tokens": 9}')
    (data / "tokenizer.json").write_text("ours")
    for force in ([], ["--force"]):
        err = _one_line_error(capsys, ["convert", "--from-hf", str(hf_dir), "--out", str(data),
                                       *force])
        assert "is a data directory" in err and (data / "tokenizer.json").read_text() == "ours"
        assert sorted(p.name for p in data.iterdir()) == ["meta.json", "tokenizer.json"]


def test_force_never_turns_one_kind_of_folder_into_another(hf_dir, tmp_path, capsys,
                                                           trained_run, tree):
    """Issue 23, reproduction 5: `convert --to-hf RUN --out RUN --force` wrote a Hugging Face
    config and weights over the run's, so sample and resume failed. --force replaces a
    model with a model and an export with an export, nothing else."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    before = tree(run)
    for argv, message in [
        (["--to-hf", str(run), "--out", str(run)], "is a training run"),
        (["--from-hf", str(hf_dir), "--out", str(run)], "is a training run"),
        (["--to-hf", str(run), "--out", str(run / "best")], "is part of the training run"),
        (["--from-hf", str(hf_dir), "--out", str(hf_dir)], "is a Hugging Face model directory"),
    ]:
        err = _one_line_error(capsys, ["convert", *argv, "--force"])
        assert message in err and "give the" in err, err
        assert tree(run) == before
    # an export replaced by an export, a model by a model: with --force, as asked
    export, model = tmp_path / "export", tmp_path / "model"
    assert main(["convert", "--to-hf", str(run), "--out", str(export)]) == 0
    assert main(["convert", "--from-hf", str(hf_dir), "--out", str(model)]) == 0
    capsys.readouterr()
    assert "already holds a Hugging Face model directory" in _one_line_error(
        capsys, ["convert", "--to-hf", str(run), "--out", str(export)])
    assert main(["convert", "--to-hf", str(run / "best"), "--out", str(export), "--force"]) == 0
    assert main(["convert", "--to-hf", str(model), "--out", str(export), "--force"]) == 0
    assert "is a model directory" in _one_line_error(
        capsys, ["convert", "--to-hf", str(run), "--out", str(model), "--force"])
    assert json.loads((export / ".gptlab.json").read_text())["kind"] == "export"
    assert json.loads((model / ".gptlab.json").read_text())["kind"] == "model"


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
    assert message in err and "no such local directory: someone/some-model" in err


# ----------------------------------------------------------------------------- --to-hf, each kind

LOGIT_TOL = 1e-5
# Newlines, a tab, a carriage return, runs of spaces, accents, a combining mark, CJK and an
# emoji beyond the Basic Multilingual Plane: every character one id, none merged or dropped.
KIND_TEXT = ("First Citizen:\nBefore we proceed,  hear me\tspeak.\r\nÀ bientôt, e\u0301té! "
             "日本 🙂\n\n")
KIND_PROMPT = "First Citizen:\nBef"
NEW_TOKENS = 20
CHARS = CharTokenizer.from_text(KIND_TEXT)

# Each kind Hugging Face holds, in small shapes (block_size 96, 2 layers, 4 heads of 8).
KINDS = {
    # The README's default recipe (shakespeare-char-cpu): bias-free GPT-2 with exact GELU.
    "gpt2-bias-free-erf-gelu-tied": dict(bias=False),
    "gpt2-biases-tanh-gelu-untied-ffn72": dict(mlp="gelu_tanh", tie_embeddings=False,
                                               ffn_hidden=72, norm_eps=1e-6),
    "gpt2-sinusoidal-bias-free": dict(pos_encoding="sinusoidal", bias=False),
    "gpt2-no-positions": dict(pos_encoding="none", mlp="gelu_tanh"),
    "neox-bias-free-erf-gelu-tied": dict(pos_encoding="rope", bias=False),
    "neox-biases-tanh-gelu-untied-yarn": dict(
        pos_encoding="rope", mlp="gelu_tanh", tie_embeddings=False, rope_base=500.0,
        rope_scaling={"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 48}),
    "opt-post-norm-bias-free-tied": dict(norm_position="post", bias=False),
    "opt-post-norm-sinusoidal-tanh-untied": dict(norm_position="post", pos_encoding="sinusoidal",
                                                 mlp="gelu_tanh", tie_embeddings=False),
    "llama-gqa-untied": dict(pos_encoding="rope", norm="rmsnorm", mlp="swiglu", n_kv_head=2,
                             bias=False, tie_embeddings=False, ffn_hidden=88, rope_base=500.0),
}

def small_config(**fields) -> GPTConfig:
    return GPTConfig(**{"vocab_size": CHARS.vocab_size, "block_size": 96, "n_layer": 2,
                        "n_head": 4, "n_embd": 32, **fields})

def export(model: GPT, tokenizer, tmp_path) -> tuple:
    """Save model + tokenizer as a gptlab model directory, convert it, and load what
    transformers makes of the result: (model_dir, out, their model, their tokenizer)."""
    model_dir, out = tmp_path / "ours", tmp_path / "hf"
    save_model(model, model_dir)
    tokenizer.save(model_dir / "tokenizer.json")
    assert main(["convert", "--to-hf", str(model_dir), "--out", str(out)]) == 0
    theirs = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    return model_dir, out, theirs, transformers.AutoTokenizer.from_pretrained(out)

@pytest.fixture(scope="module", params=list(KINDS))
def exported(request, tmp_path_factory, widen):
    torch.manual_seed(0)
    model = GPT(small_config(**KINDS[request.param])).eval()
    widen(model, seed=len(request.param))
    return (request.param, model, *export(model, CHARS, tmp_path_factory.mktemp("export")))

def max_logit_diff(ours: GPT, theirs, ids: list[int]) -> float:
    idx = torch.tensor([ids])
    with torch.no_grad():
        expected, _ = ours(idx)
        got = theirs(idx).logits
    assert expected.abs().max() > 1.0  # not a near-zero comparison
    return (got - expected).abs().max().item()

def sample_greedy(capsys, model_dir) -> str:
    capsys.readouterr()
    assert main(["sample", str(model_dir), "--greedy", "--prompt", KIND_PROMPT, "--no-prompt",
                     "--max-new-tokens", str(NEW_TOKENS), "--device", "cpu"]) == 0
    return capsys.readouterr().out.removesuffix("\n")

def generate_greedy(theirs, their_tokenizer) -> str:
    prompt = torch.tensor([their_tokenizer(KIND_PROMPT)["input_ids"]])
    with torch.no_grad():
        out = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                              max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0)
    assert out.shape[1] == prompt.shape[1] + NEW_TOKENS
    return their_tokenizer.decode(out[0, prompt.shape[1]:])

@pytest.mark.oracle
def test_logits_match_on_the_same_text(exported):
    name, ours, _, _, theirs, their_tokenizer = exported
    ids = their_tokenizer(KIND_TEXT)["input_ids"]
    assert ids == CHARS.encode(KIND_TEXT)
    worst = max_logit_diff(ours, theirs, ids)
    print(f"{name}: max |logit diff| {worst:.2e}")
    assert worst <= LOGIT_TOL

@pytest.mark.oracle
def test_transformers_generate_matches_gptlab_sample_greedy(exported, capsys):
    name, _, model_dir, out, theirs, their_tokenizer = exported
    expected = generate_greedy(theirs, their_tokenizer)
    assert sample_greedy(capsys, model_dir) == expected, name
    assert sample_greedy(capsys, out) == expected, name  # gptlab reads the export back too

@pytest.mark.oracle
def test_char_tokenizer_becomes_a_fast_tokenizer_with_our_ids(exported):
    _, _, _, out, _, their_tokenizer = exported
    assert their_tokenizer.is_fast
    ids = their_tokenizer(KIND_TEXT)["input_ids"]
    assert ids == CHARS.encode(KIND_TEXT)
    assert their_tokenizer.decode(ids) == KIND_TEXT
    assert [their_tokenizer.decode([i]) for i in range(CHARS.vocab_size)] == CHARS.chars
    assert load_tokenizer(out / "tokenizer.json").encode(KIND_TEXT) == CHARS.encode(KIND_TEXT)
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    with pytest.raises(Exception, match="UNK"):  # as ours refuses an unknown character
        their_tokenizer("Q")

@pytest.mark.oracle
def test_bpe_tokenizer_is_copied_and_gives_the_same_ids(tmp_path, widen):
    text = KIND_TEXT * 30
    bpe = HFTokenizer.train_bpe(text, vocab_size=300)
    torch.manual_seed(0)
    model = GPT(small_config(vocab_size=bpe.vocab_size, bias=False)).eval()
    widen(model, seed=1)
    model_dir, out, theirs, their_tokenizer = export(model, bpe, tmp_path)
    assert (out / "tokenizer.json").read_bytes() == (model_dir / "tokenizer.json").read_bytes()
    ids = their_tokenizer(KIND_TEXT)["input_ids"]
    assert ids == bpe.encode(KIND_TEXT) and their_tokenizer.decode(ids) == KIND_TEXT
    assert max_logit_diff(model, theirs, ids) <= LOGIT_TOL

@pytest.mark.oracle
@pytest.mark.usefixtures("one_thread")
def test_a_trained_bias_free_run_exports(tmp_path, capsys, trained_run):
    run = trained_run
    ours = load_model(run)
    assert not ours.config.bias and ours.config.mlp == "gelu"
    out = tmp_path / "hf"
    assert main(["convert", "--to-hf", str(run), "--out", str(out)]) == 0
    theirs = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    their_tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    text = "land.\nThe king a"  # block_size 16
    ids = their_tokenizer(text)["input_ids"]
    assert ids == load_tokenizer(run / "tokenizer.json").encode(text)
    idx = torch.tensor([ids])
    with torch.no_grad():
        worst = (theirs(idx).logits - ours(idx)[0]).abs().max().item()
    with capsys.disabled():
        print(f"trained bias-free run: max |logit diff| {worst:.2e}")
    assert worst <= LOGIT_TOL
    prompt = torch.tensor([their_tokenizer("The king")["input_ids"]])
    expected = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                               max_new_tokens=8, eos_token_id=None, pad_token_id=0)
    capsys.readouterr()
    assert main(["sample", str(run), "--greedy", "--prompt", "The king", "--no-prompt",
                     "--max-new-tokens", "8", "--device", "cpu"]) == 0
    got = capsys.readouterr().out.removesuffix("\n")
    assert got == their_tokenizer.decode(expected[0, prompt.shape[1]:])

@pytest.mark.parametrize("fields, message", [
    (dict(norm_position="post", pos_encoding="rope"), "OPT, which holds .*, is layernorm"),
    (dict(norm_position="post", norm_eps=1e-6), "OPT.* fixes LayerNorm's epsilon at 1e-05"),
    (dict(pos_encoding="rope", n_kv_head=2), "GPT-NeoX has no grouped-query attention"),
    (dict(norm="rmsnorm"), "no Hugging Face architecture for norm='rmsnorm', mlp='gelu'"),
    (dict(pos_encoding="rope", norm="rmsnorm", mlp="gelu"), "Llama is rmsnorm \\+ swiglu"),
    (dict(pos_encoding="learned", norm="rmsnorm", mlp="swiglu"), "pos_encoding='learned'"),
    (dict(n_kv_head=2), "GPT-2 has no grouped-query attention"),
    (dict(pos_encoding="rope", norm="rmsnorm", mlp="swiglu",
          rope_scaling={"type": "ntk", "factor": 2.0}), "static 'ntk'"),
])
def test_what_no_architecture_holds_is_refused_in_one_line(tmp_path, capsys, fields, message):
    model_dir = tmp_path / "ours"
    save_model(GPT(small_config(**fields)), model_dir)
    CHARS.save(model_dir / "tokenizer.json")
    out = tmp_path / "hf"
    assert main(["convert", "--to-hf", str(model_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gptlab convert: error: "), err
    assert re.search(message, err), err
    assert not out.exists()


# ----------------------------------------------------------------------------- --to-gguf refusals

# What llama.cpp's CPU backend runs, and what it does not (each refused by name).
GPT2_STYLE = dict(n_layer=2, n_head=4, n_embd=64, block_size=64, pos_encoding="learned",
                  norm="layernorm", mlp="gelu_tanh")
LLAMA = dict(n_layer=2, n_head=4, n_embd=64, block_size=64, pos_encoding="rope",
             norm="rmsnorm", mlp="swiglu", ffn_hidden=96, bias=False)


@pytest.mark.parametrize("fields, message", [
    (dict(GPT2_STYLE, norm_position="post"), "pre-norm models only"),
    (dict(GPT2_STYLE, mlp="gelu"), "exact erf GELU (mlp='gelu')"),
    (dict(GPT2_STYLE, pos_encoding="rope"), "no llama.cpp architecture"),
    (dict(LLAMA, rope_scaling={"type": "yarn", "factor": 2.0,
                               "original_max_position_embeddings": 32}), "'yarn' rope scaling"),
    (dict(LLAMA, rope_scaling={"type": "dynamic", "factor": 2.0,
                               "original_max_position_embeddings": 64}),
     "llama.cpp has no dynamic NTK"),
    (dict(GPT2_STYLE, pos_encoding="alibi"), "pos_encoding 'alibi' is not exported to GGUF"),
])
def test_to_gguf_refuses_unsupported_architectures_in_one_line_and_no_file(tmp_path, capsys,
                                                                          fields, message,
                                                                          save_char_model):
    source, *_ = save_char_model(tmp_path / "model", KIND_TEXT, **fields)
    out = tmp_path / "out.gguf"
    assert main(["convert", "--to-gguf", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert list(tmp_path.iterdir()) == [source]

def test_to_gguf_of_the_shipped_model_names_the_flag_that_trains_one_it_exports(tmp_path,
                                                                                 gptlab,
                                                                                 one_line):
    """The shipped model and the demo's use the exact GELU, which no architecture of
    llama.cpp computes: the refusal named no way forward."""
    err = one_line(gptlab("convert", "--to-gguf", "shakespeare", "--out", tmp_path / "s.gguf"))
    assert err.endswith("exact erf GELU (mlp='gelu'), which no llama.cpp architecture with "
                        "LayerNorm computes: train one with mlp='gelu_tanh' to export it "
                        "(gptlab train ... --mlp gelu_tanh)\n")
    assert not (tmp_path / "s.gguf").exists()


def test_to_gguf_refuses_an_unsupported_tokenizer_in_one_line(tmp_path, capsys):
    from tokenizers import Tokenizer, models, pre_tokenizers

    word_level = Tokenizer(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    word_level.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = HFTokenizer(word_level)
    source = tmp_path / "model"
    save_model(GPT(GPTConfig(vocab_size=tokenizer.vocab_size, **GPT2_STYLE)), source)
    tokenizer.save(source / "tokenizer.json")
    out = tmp_path / "out.gguf"
    assert main(["convert", "--to-gguf", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "WordLevel tokenizer" in err, err
    assert not out.exists()

def test_to_gguf_bad_outputs_are_one_line_and_leave_no_partial_file(tmp_path, capsys, tiny_run):
    run = tiny_run
    existing = tmp_path / "existing.gguf"
    existing.write_text("not mine")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    ours = tmp_path / "ours.gguf"
    for out, force, message in [
        (existing, False, "already exists and is not a GGUF file gptlab wrote"),
        (existing, True, "already exists and is not a GGUF file gptlab wrote"),
        (tmp_path, True, "is a directory"),
        (a_file / "m.gguf", False, "exists and is not a directory"),
        (run / "state.pt", True, "what the GGUF file is made from"),
        (run / "new.gguf", True, "what the GGUF file is made from"),
    ]:
        assert main(["convert", "--to-gguf", str(run), "--out", str(out)]
                    + ["--force"] * force) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (out, err)
    assert existing.read_text() == "not mine"
    assert main(["convert", "--to-gguf", str(run), "--out", str(ours)]) == 0
    assert main(["convert", "--to-gguf", str(run), "--out", str(ours)]) == 2
    assert "already exists: --force replaces it" in capsys.readouterr().err
    assert main(["convert", "--to-gguf", str(run), "--out", str(ours), "--force"]) == 0
    assert gguf.GGUFReader(ours).fields["general.architecture"].contents() == "gpt2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "existing.gguf",
                                                          "ours.gguf"]


def test_to_gguf_takes_a_char_model_back_from_hugging_face(tmp_path, capsys, tiny_run):
    """Through HF and back, the char tokenizer is a word-level tokenizer.json; it is the
    same char tokenizer, so the GGUF file gets the same vocabulary as the run's own."""
    hf_dir, back = tmp_path / "hf", tmp_path / "back"
    assert main(["convert", "--to-hf", str(tiny_run), "--out", str(hf_dir)]) == 0
    assert main(["convert", "--from-hf", str(hf_dir), "--out", str(back)]) == 0
    assert json.loads((back / "tokenizer.json").read_text())["model"]["type"] == "WordLevel"
    files = {}
    for name, source in (("run", tiny_run), ("hf", hf_dir), ("back", back)):
        files[name] = tmp_path / f"{name}.gguf"
        assert main(["convert", "--to-gguf", str(source), "--out", str(files[name])]) == 0
    capsys.readouterr()
    tokens = {name: gguf.GGUFReader(f).fields["tokenizer.ggml.tokens"].contents()
              for name, f in files.items()}
    assert tokens["run"] == tokens["hf"] == tokens["back"] and len(tokens["run"]) == 14


def test_dtype_is_for_gguf_only(tmp_path, capsys, tiny_run):
    """--to-hf --dtype q8_0 wrote float32 weights and said nothing."""
    err = _one_line_error(capsys, ["convert", "--to-hf", str(tiny_run), "--out",
                                   str(tmp_path / "hf"), "--dtype", "q8_0"])
    assert "--dtype q8_0 applies to --to-gguf only" in err
    assert not (tmp_path / "hf").exists()


class _Response:  # what RepositoryNotFoundError reads from an httpx response
    status_code = 404
    headers: dict = {}
    request = None

    def json(self):
        return {}


class _Evil:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_to_hf_takes_the_shipped_models_name_as_every_command_does(tmp_path, gptlab):
    from gptlab import pretrained

    out = tmp_path / "shakespeare-hf"
    code, printed, err = gptlab("convert", "--to-hf", "shakespeare", "--out", out)
    assert code == 0, err
    assert printed.startswith("shakespeare: ") and (out / "model.safetensors").is_file()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    ours = load_model(pretrained.folder("shakespeare")).eval()
    idx = torch.arange(20).unsqueeze(0)
    with torch.no_grad():
        assert torch.allclose(theirs(idx).logits, ours(idx)[0], atol=1e-4)
