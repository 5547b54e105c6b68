"""`gptlab.load` (gptlab.loading): a run, its best/ and a Hugging Face directory each come
back as the model they hold with its tokenizer; what is not one is named in one line."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch

import gptlab
from gptlab import loading, model_dir, pretrained
from gptlab.convert import hf
from gptlab.errors import UsageError


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_run_and_its_best_weights(trained_run):
    model, tokenizer = gptlab.load(trained_run)
    assert not model.training and model.wte.weight.device.type == "cpu"
    assert same_weights(model, model_dir.load_model(trained_run))
    assert tokenizer.decode(tokenizer.encode("the king")) == "the king"
    best, _ = gptlab.load(trained_run / "best")
    assert same_weights(best, model_dir.load_model(trained_run / "best"))


def test_a_hugging_face_directory_with_its_tokenizer(trained_run, tmp_path):
    ours, _ = gptlab.load(trained_run)
    hf.to_hf(ours, tmp_path / "hf")
    with pytest.raises(UsageError, match=f"has no {hf.HF_TOKENIZER}"):
        gptlab.load(tmp_path / "hf")  # the format of the `tokenizers` library only
    shutil.copy(trained_run / "tokenizer.json", tmp_path / "hf" / hf.HF_TOKENIZER)
    theirs, tokenizer = gptlab.load(tmp_path / "hf")
    idx = torch.tensor([tokenizer.encode("the king")])
    with torch.no_grad():
        assert torch.allclose(theirs(idx)[0], ours(idx)[0], atol=1e-5)


def test_paths_that_hold_no_model_are_named(tmp_path, trained_run):
    with pytest.raises(UsageError, match="no such run or model directory"):
        gptlab.load(tmp_path / "nowhere")
    wider = tmp_path / "wider-tokenizer"
    shutil.copytree(trained_run, wider)
    spec = json.loads((wider / "tokenizer.json").read_text())
    (wider / "tokenizer.json").write_text(json.dumps({**spec, "chars": spec["chars"] + ["~"]}))
    with pytest.raises(UsageError, match="the tokenizer has .* tokens but the model only"):
        gptlab.load(wider)


def test_load_rejects_an_unknown_format(tiny_run):
    with pytest.raises(UsageError, match="weights must be one of"):
        gptlab.load(tiny_run, weights="fp8")


def test_a_mistyped_path_is_not_sent_to_the_hub(tmp_path, monkeypatch):
    """`runs/scc` with a runs/ folder here is a typo of a local path: said so, in one line,
    with no hub lookup (that answered with a network error). A bare org/name whose org is
    no local folder is still a hub name."""
    looked_up = []

    def hub(name, **kwargs):
        looked_up.append(name)
        raise UsageError("looked up on the hub")

    monkeypatch.setattr(hf, "resolve_hf_dir", hub)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for path in ("runs/scc", "./scc", "runs/scc/best", "~/no-such-gptlab-run/x", "scc\\x",
                 "a b/c"):
        with pytest.raises(UsageError, match=r"^no such run or model directory: "):
            gptlab.load(path)
    with pytest.raises(UsageError, match=r"gpt2-medium \(a Hugging Face hub name is "
                                         r"written owner/name\)$"):
        gptlab.load("gpt2-medium")  # a bare word never goes to the network
    assert looked_up == []
    with pytest.raises(UsageError, match="looked up on the hub"):
        gptlab.load("someone/some-model")
    assert looked_up == ["someone/some-model"]


@pytest.fixture
def no_hub(monkeypatch):
    """The hub loader made to fail the test: what is resolved here needs no network."""
    def hub(name, **kwargs):
        pytest.fail(f"{name} was sent to the hub")

    monkeypatch.setattr(hf, "resolve_hf_dir", hub)


@pytest.mark.parametrize(("typed", "meant"), [
    ("shakespear", "shakespeare (the model gptlab ships)"),
    ("Shakespeare", "shakespeare (the model gptlab ships)"),
    ("runs/dmeo", "runs/demo"),
    ("dmeo", "demo"),
])
def test_a_near_miss_is_answered_with_did_you_mean_before_any_network(typed, meant, tmp_path,
                                                                      monkeypatch, no_hub):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    (tmp_path / "demo").mkdir()
    with pytest.raises(UsageError, match=rf"^no such run or model directory: {typed}; did you "
                                         rf"mean {re.escape(meant)}\?$"):
        gptlab.load(typed)


def test_a_shipped_name_is_the_shipped_model_even_beside_a_folder_of_that_name(
        trained_run, tmp_path, monkeypatch, capsys, no_hub):
    """A folder named shakespeare (here: a copy of another run) does not shadow the
    shipped model; a line says so, and ./shakespeare loads the folder."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(trained_run, tmp_path / "shakespeare")
    shipped = loading.resolve("shakespeare")
    assert shipped.kind == loading.SHIPPED and shipped.where == pretrained.folder("shakespeare")
    assert "write ./shakespeare to load it" in capsys.readouterr().err
    model, _ = gptlab.load("shakespeare")
    assert model.config == model_dir.load_config(pretrained.folder("shakespeare"))
    mine, _ = gptlab.load("./shakespeare")
    assert mine.config == gptlab.load(trained_run)[0].config != model.config
    assert capsys.readouterr().err.count("\n") == 1  # the note once, for the bare name only


def test_resolve_names_each_kind(trained_run, tmp_path, monkeypatch, no_hub):
    monkeypatch.chdir(tmp_path)
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    (hf_dir / "config.json").write_text('{"model_type": "gpt2"}')
    assert loading.resolve(trained_run) == loading.Source(loading.GPTLAB_DIR, trained_run)
    assert loading.resolve("hf").kind == loading.HF_DIR
    assert loading.resolve("owner/name") == loading.Source(loading.HUB, "owner/name")
    assert loading.resolve("shakespeare").kind == loading.SHIPPED


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_weights_that_are_not_finite_are_refused_where_models_are_loaded(tiny_run, tmp_path,
                                                                         bad):
    """A run that diverged holds NaN weights: sampling raised in torch.multinomial, eval
    printed loss nan with exit 0, lens printed nan cells. load() refuses them, naming the
    first tensor, for every command at once."""
    from safetensors.torch import load_file, save_file

    copy = shutil.copytree(tiny_run, tmp_path / "diverged")
    state = load_file(copy / "model.safetensors")
    name = sorted(state)[3]
    state[name].view(-1)[0] = bad
    save_file(state, copy / "model.safetensors")
    with pytest.raises(UsageError, match=rf"the weights are not finite \(NaN or infinite "
                                         rf"values in {name}\)"):
        gptlab.load(copy)
    with pytest.raises(UsageError, match="the weights are not finite"):
        gptlab.load(copy, weights="fp16")


def test_a_device_this_machine_lacks_is_a_usage_error(tiny_run, monkeypatch):
    """load(p, device="cuda") without CUDA raised a bare AssertionError from torch."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("cuda", torch.device("cuda", 0)):
        with pytest.raises(UsageError, match="device 'cuda(:0)?' is not available"):
            gptlab.load(tiny_run, device=device)
    with pytest.raises(UsageError, match="unknown device 'gpu'"):
        gptlab.load(tiny_run, device="gpu")
    model, _ = gptlab.load(tiny_run, device="auto")  # auto: the CPU here
    assert model.wte.weight.device.type == "cpu"
