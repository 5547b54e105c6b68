"""The model gptlab ships (gptlab.pretrained): loaded by name in float32, sampled by name from
the CLI, listed first in the lab; its files checked against the manifest's sha256 on every
load (a damaged or missing file is a one-line error, exit 1); its stated losses measured
again with `gptlab eval` (on the val split's first tokens here, on the whole split in the
slow tier); its manifest names the recipe and command that made it."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors import safe_open

import gptlab
from gptlab import pretrained
from gptlab.cli.main import main
from gptlab.data.corpus import shakespeare_text
from gptlab.data.text import split_text
from gptlab.errors import GptlabError, UsageError
from gptlab.lab.runs import Runs
from gptlab.model.config import GPTConfig
from gptlab.model.presets import PRESETS
from gptlab.training.recipes import RECIPES

NAME = "shakespeare"


@pytest.fixture(scope="module")
def manifest() -> dict:
    return pretrained.manifest(NAME)


@pytest.fixture
def shipped_copy(tmp_path, monkeypatch):
    """The shipped folder copied under tmp_path, which gptlab.pretrained then reads from (so a
    test may damage it)."""
    shutil.copytree(pretrained.folder(NAME), tmp_path / NAME)
    monkeypatch.setattr(pretrained, "HERE", tmp_path)
    return tmp_path / NAME


def eval_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(["eval", NAME, *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_loads_by_name_in_float32_as_its_preset(manifest, one_thread):
    model, tokenizer = gptlab.load(NAME)
    want = GPTConfig.from_preset(manifest["preset"], vocab_size=tokenizer.vocab_size)
    assert model.config.to_dict() == want.to_dict()
    assert tokenizer.vocab_size == 76  # the embedded corpus's characters
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert model.num_parameters() == manifest["parameters"]
    assert not model.training
    with safe_open(str(pretrained.folder(NAME) / "model.safetensors"), "pt") as f:
        stored = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safetensors' API)
    assert {t.dtype for t in stored.values()} == {torch.float16}
    for name, p in model.state_dict().items():  # the float16 numbers, widened exactly
        assert torch.equal(p, stored[name].float()), name


def test_sample_by_name(capsys, one_thread):
    assert main(["sample", NAME, "--prompt", "ROMEO:", "--max-new-tokens", "30",
                 "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ROMEO:") and len(out) >= len("ROMEO:") + 30


def test_the_manifest_says_how_it_was_made(manifest):
    assert manifest["preset"] in PRESETS and manifest["recipe"] in RECIPES
    assert manifest["make"].startswith("make pretrained")
    train = next(c for c in manifest["commands"] if c.startswith("gptlab train"))
    assert f"--preset {manifest['preset']}" in train and f"--seed {manifest['seed']}" in train
    full = RECIPES[manifest["recipe"]]["max_iters"]
    assert manifest["placeholder"] == (manifest["steps"] != full)
    assert ("--max-iters" in train) == manifest["placeholder"]
    assert set(manifest["sha256"]) == set(pretrained.FILES)
    assert 0 < manifest["val_loss"] < 4.34  # below uniform over 76 symbols, ln 76


def test_a_damaged_or_missing_file_is_one_line(shipped_copy, capsys):
    weights = shipped_copy / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0xFF
    weights.write_bytes(bytes(raw))
    with pytest.raises(GptlabError, match="'shakespeare' is damaged: model.safetensors has "
                                          "sha256 .* its manifest says"):
        gptlab.load(NAME)
    assert main(["sample", NAME, "--max-new-tokens", "5"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "damaged" in err and "reinstall" in err
    with pytest.raises(UsageError, match="damaged"):  # the lab: a 400, not a 500
        Runs(shipped_copy.parent / "empty-runs").load(NAME)
    weights.write_bytes(bytes(raw[:-1] + bytes([raw[-1] ^ 0xFF])))  # mended: the next file
    (shipped_copy / "tokenizer.json").unlink()
    with pytest.raises(GptlabError, match="cannot read tokenizer.json"):
        pretrained.verified(NAME)


def test_the_lab_lists_it_first_and_a_run_of_its_name_as_a_path(tmp_path, save_char_model,
                                                                one_thread):
    runs = Runs(tmp_path)
    assert runs.list() == [NAME]
    shipped = GPTConfig.from_preset(pretrained.manifest(NAME)["preset"])
    assert runs.load(NAME).model.config.n_layer == shipped.n_layer != 2
    save_char_model(tmp_path / "mine", "abc abc", preset="tiny-gpt2")
    assert runs.list() == [NAME, "mine"]
    save_char_model(tmp_path / NAME, "abc abc", preset="tiny-gpt2")  # a run of the same name
    # the name stays the shipped model's, as in every command; the run is ./NAME
    assert runs.list() == [NAME, "mine", f"./{NAME}"]
    assert runs.load(NAME).model.config.n_layer == shipped.n_layer
    assert runs.load(f"./{NAME}").model.config.n_layer == 2


def test_the_name_is_the_shipped_model_and_a_folder_of_that_name_is_written_as_a_path(
        tmp_path, monkeypatch, save_char_model, capsys):
    save_char_model(tmp_path / NAME, "abc abc", preset="tiny-gpt2")
    monkeypatch.chdir(tmp_path)
    model, _ = gptlab.load(NAME)
    assert model.config.n_layer == 6  # the shipped model, checksums verified, not the folder
    assert capsys.readouterr().err == (f"{NAME}: the model gptlab ships (a folder {NAME} is here "
                                       f"too: write ./{NAME} to load it)\n")
    model, _ = gptlab.load(f"./{NAME}")
    assert model.config.n_layer == 2  # the folder here


def test_stated_loss_on_the_val_splits_first_tokens(manifest, tmp_path, capsys, one_thread):
    piece = manifest["val_slice"]
    _, val = split_text(shakespeare_text(), 0.1)  # what `gptlab prepare shakespeare` keeps
    path = tmp_path / "val-slice.txt"
    path.write_text(val[: piece["tokens"]], encoding="utf-8")  # char-level: tokens = chars
    score = eval_json(capsys, "--text", str(path))
    assert score["tokens_scored"] == piece["scored"] == piece["tokens"] - 1
    assert score["loss"] == pytest.approx(piece["loss"], abs=6e-5)  # stated to 4 decimals


@pytest.mark.slow
def test_stated_loss_on_the_whole_val_split(manifest, tmp_path, capsys):
    assert main(["prepare", "shakespeare", "--out", str(tmp_path / "data")]) == 0
    score = eval_json(capsys, "--data", str(tmp_path / "data"))
    assert score["tokens_scored"] == manifest["val_tokens_scored"]
    assert score["loss"] == pytest.approx(manifest["val_loss"], abs=6e-5)
