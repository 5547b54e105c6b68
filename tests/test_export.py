"""`gptlab convert --to-hf` for every kind of model Hugging Face can hold exactly, tokenizer
included: what transformers' AutoModelForCausalLM and AutoTokenizer load from the exported
directory gives our ids, our logits (within 1e-5) and `gptlab sample --greedy`'s text. What
no architecture holds is refused in one line. No downloads."""

from __future__ import annotations

import json
import re

import pytest
import torch
import transformers  # the `gptlab[hf]` extra, part of the test extras

from gptlab.cli.main import main
from gptlab.data.tokenizer import CharTokenizer, HFTokenizer, load_tokenizer
from gptlab.files.model_dir import load_model, save_model
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.run import train
from test_hf import widen
from test_train import make_data, tiny_model, tiny_train

LOGIT_TOL = 1e-5
# Newlines, a tab, a carriage return, runs of spaces, accents, a combining mark, CJK and an
# emoji beyond the Basic Multilingual Plane: every character one id, none merged or dropped.
TEXT = "First Citizen:\nBefore we proceed,  hear me\tspeak.\r\nÀ bientôt, e\u0301té! 日本 🙂\n\n"
PROMPT = "First Citizen:\nBef"
NEW_TOKENS = 20
CHARS = CharTokenizer.from_text(TEXT)

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
def exported(request, tmp_path_factory):
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
    assert main(["sample", str(model_dir), "--greedy", "--prompt", PROMPT, "--no-prompt",
                     "--max-new-tokens", str(NEW_TOKENS), "--device", "cpu"]) == 0
    return capsys.readouterr().out.removesuffix("\n")


def generate_greedy(theirs, their_tokenizer) -> str:
    prompt = torch.tensor([their_tokenizer(PROMPT)["input_ids"]])
    with torch.no_grad():
        out = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                              max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0)
    assert out.shape[1] == prompt.shape[1] + NEW_TOKENS
    return their_tokenizer.decode(out[0, prompt.shape[1]:])


def test_logits_match_on_the_same_text(exported):
    name, ours, _, _, theirs, their_tokenizer = exported
    ids = their_tokenizer(TEXT)["input_ids"]
    assert ids == CHARS.encode(TEXT)
    worst = max_logit_diff(ours, theirs, ids)
    print(f"{name}: max |logit diff| {worst:.2e}")
    assert worst <= LOGIT_TOL


def test_transformers_generate_matches_gptlab_sample_greedy(exported, capsys):
    name, _, model_dir, out, theirs, their_tokenizer = exported
    expected = generate_greedy(theirs, their_tokenizer)
    assert sample_greedy(capsys, model_dir) == expected, name
    assert sample_greedy(capsys, out) == expected, name  # gptlab reads the export back too


def test_char_tokenizer_becomes_a_fast_tokenizer_with_our_ids(exported):
    _, _, _, out, _, their_tokenizer = exported
    assert their_tokenizer.is_fast
    ids = their_tokenizer(TEXT)["input_ids"]
    assert ids == CHARS.encode(TEXT)
    assert their_tokenizer.decode(ids) == TEXT
    assert [their_tokenizer.decode([i]) for i in range(CHARS.vocab_size)] == CHARS.chars
    assert load_tokenizer(out / "tokenizer.json").encode(TEXT) == CHARS.encode(TEXT)
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    with pytest.raises(Exception, match="UNK"):  # as ours refuses an unknown character
        their_tokenizer("Q")


def test_bpe_tokenizer_is_copied_and_gives_the_same_ids(tmp_path):
    text = TEXT * 30
    bpe = HFTokenizer.train_bpe(text, vocab_size=300)
    torch.manual_seed(0)
    model = GPT(small_config(vocab_size=bpe.vocab_size, bias=False)).eval()
    widen(model, seed=1)
    model_dir, out, theirs, their_tokenizer = export(model, bpe, tmp_path)
    assert (out / "tokenizer.json").read_bytes() == (model_dir / "tokenizer.json").read_bytes()
    ids = their_tokenizer(TEXT)["input_ids"]
    assert ids == bpe.encode(TEXT) and their_tokenizer.decode(ids) == TEXT
    assert max_logit_diff(model, theirs, ids) <= LOGIT_TOL


@pytest.mark.usefixtures("one_thread")
def test_a_trained_bias_free_run_exports(tmp_path, capsys):
    data = make_data(tmp_path / "data", n_chars=5000)
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(max_iters=8), data, run, progress=False)
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
