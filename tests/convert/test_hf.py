"""Hugging Face conversion (gptlab.convert.hf) against transformers itself: random-init
Hugging Face models of several small shapes (tests/conftest.py's random_hf_model), weights
widened so a layout mistake cannot hide under tiny values, then logits, greedy tokens and
round trips compared; every file form read; bad input refused. No downloads."""

from __future__ import annotations

import json

import pytest
import torch
import transformers  # the `gptlab[hf]` extra, part of the test extras
from safetensors.torch import save_file

from gptlab.convert import hf
from gptlab.convert.hf_config import rope_from_hf
from gptlab.data.tokenizer import CharTokenizer
from gptlab.errors import GptlabError, UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT

VOCAB = 101
LOGIT_TOL = 1e-5


@pytest.fixture(scope="module")
def converted(hf_case, random_hf_model):
    """(name, their model, ours converted from it), for each of the shapes in turn."""
    model = random_hf_model(hf_case)
    return hf_case, model, hf.from_hf(model)


@pytest.mark.oracle
def test_logits_match_transformers(converted):
    name, theirs, ours = converted
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for batch, length in ((1, 1), (3, 17), (2, 64)):
        idx = torch.randint(0, VOCAB, (batch, length), generator=g)
        with torch.no_grad():
            expected = theirs(idx).logits
            got, _ = ours(idx)
        assert expected.abs().max() > 1.0  # the widening worked: not a near-zero comparison
        worst = max(worst, (got - expected).abs().max().item())
    print(f"{name}: max |logit diff| {worst:.2e}")
    assert worst <= LOGIT_TOL


@pytest.mark.oracle
def test_greedy_tokens_match_transformers_generate(converted):
    name, theirs, ours = converted
    prompt = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = theirs.generate(prompt, attention_mask=torch.ones_like(prompt),
                                   do_sample=False, max_new_tokens=20, eos_token_id=None,
                                   pad_token_id=0)
    got = ours.generate(prompt, 20, temperature=0.0)
    assert got.shape == (2, 27)
    assert torch.equal(got, expected), name


@pytest.mark.oracle
def test_ours_to_hf_to_ours_is_exact(converted, tmp_path):
    name, _, ours = converted
    hf.to_hf(ours, tmp_path)
    back = hf.from_hf(tmp_path)
    assert back.config == ours.config
    ours_state, back_state = ours.state_dict(), back.state_dict()
    assert ours_state.keys() == back_state.keys()
    for key, tensor in ours_state.items():
        assert torch.equal(tensor, back_state[key]), key
    # What transformers itself loads from that directory computes the same logits.
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    idx = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (reloaded(idx).logits - ours(idx)[0]).abs().max() <= LOGIT_TOL


@pytest.mark.oracle
def test_to_hf_writes_transformers_format(tmp_path):
    model = GPT(GPTConfig(vocab_size=VOCAB, block_size=32, n_layer=1, n_head=4, n_kv_head=2,
                          n_embd=32, pos_encoding="rope", norm="rmsnorm", mlp="swiglu",
                          bias=False, tie_embeddings=False,
                          rope_scaling={"type": "llama3", "factor": 4.0,
                                        "original_max_position_embeddings": 8}))
    hf.to_hf(model, tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["architectures"] == ["LlamaForCausalLM"]
    assert written["num_key_value_heads"] == 2
    loaded = transformers.AutoConfig.from_pretrained(tmp_path).to_dict()
    assert rope_from_hf(loaded) == (10000.0, {
        "type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8})


def test_to_hf_writes_a_tokenizer_that_autotokenizer_reads_as_ours(tmp_path):
    text = "to be, or not to be:\nthat is the question"
    tokenizer = CharTokenizer.from_text(text)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=16, n_layer=1,
                          n_head=2, n_embd=8))
    written = hf.to_hf(model, tmp_path / "export", tokenizer)
    assert written == ["config.json", "model.safetensors", "tokenizer.json",
                       "tokenizer_config.json"]
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "export")
    assert theirs(text)["input_ids"] == tokenizer.encode(text)
    assert theirs.decode(tokenizer.encode(text)) == text
    assert hf.to_hf(model, tmp_path / "no-tokenizer") == ["config.json", "model.safetensors"]


@pytest.mark.oracle
def test_bfloat16_round_trip_keeps_dtype_and_bits(tmp_path, random_hf_model):
    ours = hf.from_hf(random_hf_model("llama-gqa4-tied-bias"), dtype=torch.bfloat16)
    assert ours.wte.weight.dtype == torch.bfloat16
    hf.to_hf(ours, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["torch_dtype"] == "bfloat16"
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert theirs.dtype == torch.bfloat16
    back = hf.from_hf(theirs, dtype=torch.bfloat16).state_dict()
    assert all(torch.equal(t, back[k]) for k, t in ours.state_dict().items())


# ----------------------------------------------------------------------------- file forms


def _save_hf(model, directory, **kwargs):
    model.save_pretrained(directory, **kwargs)
    return directory


def test_sharded_safetensors_and_pytorch_bin(tmp_path, random_hf_model):
    theirs = random_hf_model("llama-gqa2-untied")
    reference = hf.from_hf(theirs).state_dict()
    sharded = _save_hf(theirs, tmp_path / "sharded", max_shard_size="20KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    assert len(list(sharded.glob("model-*.safetensors"))) > 1
    # A plain pickled state dict, as older checkpoints ship it, read with weights_only.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "config.json").write_text(theirs.config.to_json_string())
    torch.save(theirs.state_dict(), bin_dir / "pytorch_model.bin")
    for directory in (sharded, bin_dir):
        got = hf.from_hf(directory).state_dict()
        assert all(torch.equal(got[k], reference[k]) for k in reference), directory


def test_base_model_checkpoint_without_prefix_and_old_buffers(tmp_path, random_hf_model):
    """openai-community/gpt2 ships GPT2Model's names (no `transformer.`) plus the causal-mask
    buffers `h.N.attn.bias`; both are understood."""
    theirs = random_hf_model("gpt2-tied-3heads")
    state = {k.removeprefix("transformer."): v.contiguous() for k, v in
             theirs.state_dict().items() if k != "lm_head.weight"}
    state["h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 64, 64))
    (tmp_path / "config.json").write_text(theirs.config.to_json_string())
    save_file(state, tmp_path / "model.safetensors")
    reference = hf.from_hf(theirs).state_dict()
    got = hf.from_hf(tmp_path).state_dict()
    assert all(torch.equal(got[k], reference[k]) for k in reference)


def test_hub_name_resolves_through_the_cache_offline(tmp_path, random_hf_model):
    """A hub name found in the Hugging Face cache layout is used without the network."""
    theirs = random_hf_model("gpt2-tied-3heads")
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--someone--tiny-gpt2"
    theirs.save_pretrained(repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    resolved = hf.resolve_hf_dir("someone/tiny-gpt2", cache_dir=tmp_path)
    assert resolved == repo / "snapshots" / commit
    got = hf.from_hf("someone/tiny-gpt2", cache_dir=tmp_path).state_dict()
    reference = hf.from_hf(theirs).state_dict()
    assert all(torch.equal(got[k], reference[k]) for k in reference)


# ----------------------------------------------------------------------------- bad input


def test_directory_without_config(tmp_path):
    with pytest.raises(UsageError, match="has no config.json"):
        hf.from_hf(tmp_path)


def test_missing_directory_is_not_sent_to_the_hub(tmp_path):
    with pytest.raises(UsageError, match="directory not found"):
        hf.from_hf(tmp_path / "nope")


def test_unsupported_architecture_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "mistral", "architectures": ["MistralForCausalLM"]}))
    with pytest.raises(UsageError, match="unsupported architecture 'mistral'.*MistralForCausalLM"):
        hf.from_hf(tmp_path)


def test_shapes_that_disagree_with_the_config(tmp_path, random_hf_model):
    theirs = random_hf_model("llama-gqa2-untied")
    theirs.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_key_value_heads"] = 6  # the weights hold 3 key/value heads
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError, match=r"k_proj.weight has shape \(24, 48\), "
                                         r"but its config says \(48, 48\)"):
        hf.from_hf(tmp_path)


def test_extra_weights_are_refused(tmp_path, random_hf_model):
    theirs = random_hf_model("gpt2-tied-3heads")
    theirs.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["n_layer"] = 1
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError, match="does not account for: transformer.h.1"):
        hf.from_hf(tmp_path)


class NotAStateDict:
    def __reduce__(self):  # what a malicious pickle would do, harmlessly
        return (print, ("this must never run",))


def test_pickled_object_in_bin_is_refused(tmp_path, capsys, random_hf_model):
    theirs = random_hf_model("gpt2-tied-3heads")
    (tmp_path / "config.json").write_text(theirs.config.to_json_string())
    torch.save({"transformer.wte.weight": NotAStateDict()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(UsageError, match="refused .*pytorch_model.bin: not a plain state dict"):
        hf.from_hf(tmp_path)
    assert "must never run" not in capsys.readouterr().out


def test_neox_without_attention_biases_needs_zero_mlp_biases(widen, zero_biases, neox_config):
    torch.manual_seed(0)
    theirs = transformers.AutoModelForCausalLM.from_config(neox_config(attention_bias=False))
    widen(theirs, 0)  # MLP and norm biases off zero
    with pytest.raises(UsageError, match="bias is not zero, but its config has no attention bias"):
        hf.from_hf(theirs)
    zero_biases(theirs)
    assert not hf.from_hf(theirs).config.bias


@pytest.mark.parametrize("fields, message", [
    (dict(norm_position="post", pos_encoding="rope"), "OPT, which holds gptlab's post-norm models"),
    (dict(pos_encoding="sinusoidal", norm="rmsnorm"), "no Hugging Face architecture"),
    (dict(n_kv_head=2), "no grouped-query attention"),
    (dict(pos_encoding="rope", norm="rmsnorm", mlp="swiglu",
          rope_scaling={"type": "ntk", "factor": 2.0}), "static 'ntk'"),
    (dict(pos_encoding="rope", norm="rmsnorm", mlp="swiglu",
          rope_scaling={"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}),
     "dynamic rope scaling takes max_position_embeddings"),
    (dict(pos_encoding="alibi"), "pos_encoding 'alibi' is not exported"),
])
def test_to_hf_refuses_what_hf_cannot_express(tmp_path, fields, message):
    model = GPT(GPTConfig(vocab_size=VOCAB, block_size=16, n_layer=1, n_head=4, n_embd=32,
                          **fields))
    with pytest.raises(UsageError, match=message):
        hf.to_hf(model, tmp_path)
    assert not (tmp_path / "config.json").exists()


@pytest.mark.oracle
def test_dynamic_ntk_llama_matches_transformers_past_its_training_length(tmp_path, widen):
    """transformers' dynamic rope recomputes its frequencies for a sequence longer than
    max_position_embeddings; ours, converted both ways, gives the same logits at lengths
    below, at and past it (increasing, as their module keeps the longest it has seen)."""
    config = transformers.LlamaConfig(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
        intermediate_size=48, vocab_size=VOCAB, max_position_embeddings=16,
        rope_scaling={"rope_type": "dynamic", "factor": 3.0}, bos_token_id=None,
        eos_token_id=None)
    torch.manual_seed(0)
    theirs = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    widen(theirs, 0)
    theirs.eval()
    ours = hf.from_hf(theirs)
    assert ours.config.rope_scaling == {"type": "dynamic", "factor": 3.0,
                                        "original_max_position_embeddings": 16}
    g = torch.Generator().manual_seed(4)
    for length in (9, 16, 17, 40, 64):
        idx = torch.randint(0, VOCAB, (2, length), generator=g)
        with torch.no_grad():
            diff = (theirs(idx).logits - ours(idx)[0]).abs().max().item()
        assert diff <= LOGIT_TOL, (length, diff)
    hf.to_hf(ours, tmp_path)
    assert hf.from_hf(tmp_path).config == ours.config


def test_missing_transformers_says_what_to_install(without_transformers, tmp_path):
    model = GPT(GPTConfig(vocab_size=VOCAB, block_size=16, n_layer=1, n_head=2, n_embd=16))
    with pytest.raises(hf.TransformersMissing, match=r"pip install 'gptlab\[hf\]'") as info:
        hf.to_hf(model, tmp_path)
    assert isinstance(info.value, GptlabError) and isinstance(info.value, ImportError)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(hf.TransformersMissing, match="transformers"):
        hf.from_hf(tmp_path)


def test_an_export_replaced_half_way_has_no_config_of_the_old_model(tmp_path, monkeypatch):
    """config.json is the export's commit point: a process that dies after the new weights
    leaves an export without a config (which nothing loads), never the old model's config
    over the new weights (bench/faults.py found that mix by killing `convert --to-hf`)."""
    text = "to be, or not to be"
    tokenizer = CharTokenizer.from_text(text)
    old = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=16, n_layer=2, n_head=2,
                        n_embd=8))
    hf.to_hf(old, tmp_path, tokenizer)
    new = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=16, n_layer=1, n_head=2,
                        n_embd=8))

    def dies(*args, **kwargs):
        raise KeyboardInterrupt  # as a kill between the weights and the rest

    monkeypatch.setattr(hf, "write_tokenizer_config", dies)
    with pytest.raises(KeyboardInterrupt):
        hf.to_hf(new, tmp_path, tokenizer, overwrite=True)
    assert not (tmp_path / "config.json").exists()
    monkeypatch.undo()
    hf.to_hf(new, tmp_path, tokenizer, overwrite=True)
    assert json.loads((tmp_path / "config.json").read_text())["n_layer"] == 1
