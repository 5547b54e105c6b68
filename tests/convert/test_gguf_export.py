"""GGUF export (gptlab.convert.gguf_export), proven by llama.cpp itself (llama-cpp-python):
its logits for a prompt are gptlab's within 1e-3 at f32, its greedy tokens are gptlab's, its
tokenizer gives gptlab's ids; gguf's own reader gives back every tensor and key. What
`convert --to-gguf` refuses: tests/cli/test_convert.py."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
import torch
from llama_cpp import Llama

import gptlab
from gptlab.cli.main import main
from gptlab.convert.gguf_export import gguf_tensors, write_gguf
from gptlab.data.prepared import prepare
from gptlab.data.tokenizer import CharTokenizer, HFTokenizer
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.config import recipe
from gptlab.training.run import train

# llama.cpp, and a training run: the slow tier.
pytestmark = [pytest.mark.slow, pytest.mark.oracle, pytest.mark.usefixtures("one_thread")]

PROMPT = "ROMEO:\nBut soft, what light"
# Every character of the corpus's vocabulary that is not a letter, and a few that are.
TEST_TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\n'Tis 3 & $! ?-;"
GREEDY_STEPS = 32
LOGIT_TOLERANCE = 1e-3
GGML_F32 = 0  # ggml's type ids, as llama_cpp.GGML_TYPE_F32 and GGML_TYPE_F16
GGML_F16 = 1
# q8_0 on the trained run: greedy tokens from the prompt that must equal f32 gptlab's.
Q8_0_AGREEMENT = 32


@pytest.fixture(scope="module")
def text(tiny_shakespeare):
    return tiny_shakespeare.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def char_tokenizer(text):
    return CharTokenizer.from_text(text)


@pytest.fixture(scope="module")
def bpe_tokenizer(text):
    return HFTokenizer.train_bpe(text[:200_000], 512)


def random_model(seed: int, scale: float = 0.3, **fields) -> GPT:
    """A random model with weights large enough that its logits differ by whole units, not
    hundredths: agreement then says something, and greedy choices are not near-ties."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**fields)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
            elif p.ndim == 1:  # norm gains around 1
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0, scale)
    return model


LLAMA = dict(n_layer=2, n_head=4, n_embd=64, block_size=64, pos_encoding="rope",
             norm="rmsnorm", mlp="swiglu", ffn_hidden=96, bias=False)
# llama.cpp's CPU GELU looks gelu(fp16(x)) up in an fp16 table: its error grows with the
# activations, 4e-3 in the logits at weights of std 0.3, where emulating the table in gptlab
# brings the gap back to 6e-4. GPT-2-style models are tested at weights that keep it in 1e-3.
GELU_SCALE = 0.05
GPT2_STYLE = dict(n_layer=2, n_head=4, n_embd=64, block_size=64, pos_encoding="learned",
                  norm="layernorm", mlp="gelu_tanh")

# name: (model fields, tokenizer); vocab_size above the tokenizer's pads the GGUF vocabulary.
MODELS = {
    "llama-gqa-untied": (dict(LLAMA, n_kv_head=2, tie_embeddings=False), "bpe"),
    "llama-mqa-tied-llama3-rope": (
        dict(LLAMA, n_kv_head=1, tie_embeddings=True, rope_base=500000.0,
             rope_scaling={"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
        "char"),
    "llama-linear-rope-bias": (
        dict(LLAMA, tie_embeddings=False, bias=True,
             rope_scaling={"type": "linear", "factor": 2.0}), "char"),
    "llama-ntk-rope": (dict(LLAMA, rope_scaling={"type": "ntk", "factor": 4.0}), "char"),
    "gpt2": (dict(GPT2_STYLE), "bpe"),
    "gpt2-bias-free-sinusoidal-gqa-untied": (
        dict(GPT2_STYLE, bias=False, pos_encoding="sinusoidal", n_kv_head=2,
             tie_embeddings=False), "char"),
}


def llama_cpp(path, n_ctx: int = 64, kv_type: int = GGML_F32) -> Llama:
    """llama.cpp on one thread, with its key/value cache in f32 (its default is f16, which
    rounds every key and value to 11 significant bits)."""
    return Llama(model_path=str(path), n_ctx=n_ctx, logits_all=True, verbose=False, seed=0,
                 n_threads=1, n_batch=n_ctx, type_k=kv_type, type_v=kv_type)


def their_logits(llm: Llama, ids: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float64)


def our_logits(model: GPT, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids]))
    return logits[0].double().numpy()


def our_greedy(model: GPT, ids: list[int], steps: int) -> list[int]:
    ids = list(ids)
    for _ in range(steps):
        ids.append(int(our_logits(model, ids)[-1].argmax()))
    return ids[-steps:]


def their_greedy(llm: Llama, ids: list[int], steps: int) -> list[int]:
    llm.reset()
    out = []
    # top_k=1: llama.cpp's sampler keeps the one most likely token; generate() does not
    # stop at an end-of-text token, so every step is the model's choice.
    for token in llm.generate(ids, top_k=1, temp=0.0, reset=True):
        out.append(token)
        if len(out) == steps:
            break
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory, char_tokenizer, bpe_tokenizer):
    """name -> (model, tokenizer, f32 GGUF path) for every model in MODELS."""
    root = tmp_path_factory.mktemp("gguf")
    tokenizers = {"char": char_tokenizer, "bpe": bpe_tokenizer}
    out = {}
    for seed, (name, (fields, kind)) in enumerate(MODELS.items()):
        tokenizer = tokenizers[kind]
        model = random_model(seed, scale=GELU_SCALE if fields["mlp"] == "gelu_tanh" else 0.3,
                             vocab_size=tokenizer.vocab_size + 3, **fields)
        path = root / f"{name}.gguf"
        write_gguf(model, tokenizer, path)
        out[name] = model, tokenizer, path
    return out


@pytest.mark.parametrize("name", MODELS)
def test_llama_cpp_computes_our_logits_and_greedy_tokens(exported, name):
    model, tokenizer, path = exported[name]
    llm = llama_cpp(path)
    ids = tokenizer.encode(PROMPT)
    ours, theirs = our_logits(model, ids), their_logits(llm, ids)
    assert theirs.shape == ours.shape
    assert np.abs(ours).max() > 1.0  # logits of some size: the comparison has teeth
    diff = np.abs(ours - theirs).max()
    assert diff < LOGIT_TOLERANCE, (name, diff)
    assert their_greedy(llm, ids, GREEDY_STEPS) == our_greedy(model, ids, GREEDY_STEPS)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, text, bpe_tokenizer):
    """A Llama-style run (GQA, untied) trained briefly on tiny Shakespeare with gptlab's BPE:
    a model whose greedy choices are decided by training, not by noise."""
    root = tmp_path_factory.mktemp("bpe-run")
    prepare(text, root / "data", bpe_tokenizer, source="tiny shakespeare")
    config = GPTConfig(vocab_size=bpe_tokenizer.vocab_size, n_kv_head=2,
                       tie_embeddings=False, **LLAMA)
    settings = recipe("shakespeare-char-cpu-fast", max_iters=60, eval_interval=60,
                      eval_iters=2, whole_val=False, batch_size=8)
    train(config, settings, root / "data", root / "run", progress=False)
    return root / "run"


@pytest.fixture(scope="module")
def trained_gguf(trained_run, tmp_path_factory):
    """The trained run through the CLI at each dtype: dtype -> path."""
    root = tmp_path_factory.mktemp("trained-gguf")
    paths = {}
    for dtype in ("f32", "f16", "q8_0"):
        paths[dtype] = root / f"run-{dtype}.gguf"
        assert main(["convert", "--to-gguf", str(trained_run), "--out", str(paths[dtype]),
                     "--dtype", dtype]) == 0
    return paths


def test_trained_run_f32_matches_and_q8_0_keeps_greedy_tokens(trained_run, trained_gguf):
    model, tokenizer = gptlab.load(trained_run)
    ids = tokenizer.encode(PROMPT)
    ours = our_greedy(model, ids, Q8_0_AGREEMENT)
    f32 = llama_cpp(trained_gguf["f32"], n_ctx=64)
    assert tokenizer.decode([f32.token_eos()]) == "\ufffd"  # byte 0xFF alone: no character
    assert np.abs(our_logits(model, ids) - their_logits(f32, ids)).max() < LOGIT_TOLERANCE
    assert their_greedy(f32, ids, GREEDY_STEPS) == ours[:GREEDY_STEPS]
    for dtype in ("f16", "q8_0"):
        assert their_greedy(llama_cpp(trained_gguf[dtype]), ids, Q8_0_AGREEMENT) == ours, dtype
    sizes = {d: p.stat().st_size for d, p in trained_gguf.items()}
    assert sizes["q8_0"] < sizes["f16"] < sizes["f32"]


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_llama_cpp_tokenizes_as_we_do(exported, kind):
    name = next(n for n, (_, k) in MODELS.items() if k == kind)
    _, tokenizer, path = exported[name]
    llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
    for text in (TEST_TEXT, PROMPT, " leading  and trailing spaces \n\n"):
        ids = tokenizer.encode(text)
        assert llm.tokenize(text.encode("utf-8"), add_bos=False, special=True) == ids
        assert llm.detokenize(ids).decode("utf-8") == text


def test_char_tokenizer_with_characters_of_every_utf8_length(tmp_path):
    """1-, 2-, 3- and 4-byte characters: each one token, in llama.cpp as in gptlab, for any
    text of them (merges join bytes only inside a character)."""
    text = "abc é ü ñ — “quoted” € 😀 漢字\n"
    tokenizer = CharTokenizer.from_text(text)
    model = random_model(0, vocab_size=tokenizer.vocab_size, **GPT2_STYLE)
    write_gguf(model, tokenizer, tmp_path / "m.gguf")
    llm = Llama(model_path=str(tmp_path / "m.gguf"), vocab_only=True, verbose=False)
    for sample in (text, "éé——😀😀漢字字", "a—é€😀\n\n", text[::-1]):
        ids = tokenizer.encode(sample)
        assert llm.tokenize(sample.encode("utf-8"), add_bos=False, special=True) == ids, sample


@pytest.mark.parametrize("dtype", ["f32", "f16", "q8_0"])
def test_gguf_reader_gives_back_every_tensor_and_key(exported, trained_run, trained_gguf,
                                                     dtype):
    model, tokenizer = gptlab.load(trained_run)
    reader = gguf.GGUFReader(trained_gguf[dtype])
    written = gguf_tensors(model, "llama")
    read = {t.name: t for t in reader.tensors}
    assert set(read) == set(written)
    worst = {"f32": 0.0, "f16": 1e-3, "q8_0": 1e-2}[dtype]  # of each tensor's largest |w|
    for name, expected in written.items():
        tensor = read[name]
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(expected.shape)
        assert np.abs(values - expected).max() <= worst * np.abs(expected).max(), name
    fields = reader.fields

    def value(key):
        return fields[key].contents()

    config = model.config
    assert value("general.architecture") == "llama"
    assert value("general.name") == trained_run.name
    assert value("gptlab.version") == gptlab.__version__
    assert GPTConfig.from_dict(json.loads(value("gptlab.config"))) == config
    assert value("llama.context_length") == config.block_size
    assert value("llama.embedding_length") == config.n_embd
    assert value("llama.block_count") == config.n_layer
    assert value("llama.feed_forward_length") == config.ffn_hidden
    assert value("llama.attention.head_count") == config.n_head
    assert value("llama.attention.head_count_kv") == config.n_kv_head
    assert value("llama.rope.dimension_count") == config.head_dim
    assert value("llama.rope.freq_base") == config.rope_base
    assert value("llama.attention.layer_norm_rms_epsilon") == pytest.approx(config.norm_eps)
    assert value("tokenizer.ggml.model") == "gpt2"
    assert value("tokenizer.ggml.pre") == "gpt-2"
    tokens = value("tokenizer.ggml.tokens")
    assert len(tokens) == config.vocab_size
    assert tokens[: tokenizer.vocab_size] == [
        tokenizer.tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)]
    assert tokens[tokenizer.vocab_size:] == []
    assert len(value("tokenizer.ggml.merges")) == tokenizer.vocab_size - 256
    # No end-of-text token in gptlab's BPE: llama.cpp's is the byte 0xFF, which no text has
    # (without one it would stop at id 11, a comma).
    assert tokens[value("tokenizer.ggml.eos_token_id")] == "ÿ"
    file_types = {"f32": 0, "f16": 1, "q8_0": 7}
    assert value("general.file_type") == file_types[dtype]


def test_cli_writes_a_gpt2_style_char_run_and_reports_it(tmp_path, capsys, tiny_run,
                                                        tiny_text):
    run, TEXT = tiny_run, tiny_text
    out = tmp_path / "tiny.gguf"
    assert main(["convert", "--to-gguf", str(run), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "gpt2" in printed and f"wrote {out}" in printed
    model, tokenizer = gptlab.load(run)
    ids = tokenizer.encode(TEXT[:20])
    diff = np.abs(our_logits(model, ids) - their_logits(llama_cpp(out, n_ctx=32), ids)).max()
    assert diff < LOGIT_TOLERANCE


def test_the_demos_model_trained_with_mlp_gelu_tanh_runs_in_llama_cpp(tmp_path, capsys,
                                                                     char_tokenizer, text):
    """The demo's preset (exact GELU) is refused by --to-gguf, which names the flag that
    trains one llama.cpp computes; with it, llama.cpp's logits are gptlab's. (llama.cpp's
    graphs take ggml_gelu, tanh's table, in every architecture llama-cpp-python 0.3.36
    builds: libllama imports no ggml_gelu_erf.)"""
    prepare(text[:20_000], tmp_path / "data", char_tokenizer, source="tiny shakespeare")
    common = ["train", "--preset", "shakespeare-char-cpu-speedrun", "--data",
              str(tmp_path / "data"), "--n-layer", "1", "--max-iters", "3", "--eval-iters",
              "1", "--batch-size", "2", "--no-whole-val", "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "exact")]) == 0
    assert main(["convert", "--to-gguf", str(tmp_path / "exact"), "--out",
                 str(tmp_path / "exact.gguf")]) == 2
    assert "(gptlab train ... --mlp gelu_tanh)" in capsys.readouterr().err
    assert main([*common, "--mlp", "gelu_tanh", "--out", str(tmp_path / "tanh")]) == 0
    out = tmp_path / "tanh.gguf"
    assert main(["convert", "--to-gguf", str(tmp_path / "tanh"), "--out", str(out)]) == 0
    model, tokenizer = gptlab.load(tmp_path / "tanh")
    assert model.config.mlp == "gelu_tanh"
    ids = tokenizer.encode(PROMPT)
    llm = llama_cpp(out, n_ctx=64)
    assert np.abs(our_logits(model, ids) - their_logits(llm, ids)).max() < LOGIT_TOLERANCE
