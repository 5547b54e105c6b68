"""GGUF export: a gptlab model and its tokenizer as one file llama.cpp runs (and Ollama and
LM Studio, which run llama.cpp).

Two of llama.cpp's architectures compute what a gptlab model does: "llama" (pre-norm
RMSNorm, SwiGLU, RoPE, any grouped-query attention, tied or untied head) and "gpt2"
(pre-norm LayerNorm, tanh GELU, a learned position table, which also holds sinusoidal or no
positions, and biases, written as zeros for a bias-free model). The tokenizer goes in as
llama.cpp's byte-level BPE ("gpt2" tokenizer model): a byte-level BPE tokenizer.json as its
vocabulary and merges, and gptlab's character tokenizer as one byte-level token per
character, with merges only inside a character's UTF-8 bytes (see `char_vocab`).
Anything else is refused, saying why, before a byte is written.

The `gguf` package (the writer maintained in the llama.cpp repository) is optional
(`pip install 'gptlab[gguf]'`) and imported only when an export runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gptlab.convert.formats import GGUF_DTYPES, GGUF_HINT
from gptlab.convert.hf import stand_ins
from gptlab.convert.hf_keymap import GPT2
from gptlab.data.tokenizer import CharTokenizer, HFTokenizer, Tokenizer
from gptlab.errors import GptlabError, UsageError
from gptlab.files.atomic import atomic_path
from gptlab.files.authorship import GGUF_KEY
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model.rope_scaling import rope_inverse_frequencies
from gptlab.model_dir import weights_state
from gptlab.version import __version__

# The GGUF metadata key that holds the whole GPTConfig (beside GGUF_KEY, the version).
GGUF_CONFIG_KEY = "gptlab.config"

# Q8_0 packs 32 weights per block: a row of another length is written as f16 instead.
Q8_0_BLOCK = 32
# HF's ByteLevel(use_regex=True) applies GPT-2's pre-tokenizer regex, llama.cpp's "gpt-2"
# the same; Llama 3's, as its tokenizer.json spells it, is llama.cpp's "llama-bpe".
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}"
                r"\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# The end-of-text id llama.cpp's BPE takes when a file names none.
LLAMA_CPP_EOS = 11
# Byte 0xFF twice, in byte-level characters: no UTF-8 text has the byte 0xFF.
NEVER_MERGES = "ÿ ÿ"
# llama.cpp's token types (gguf.TokenType), here so the vocabulary code needs no import.
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5


class GGUFMissing(GptlabError, ImportError):
    """`gguf` is not installed; the message says what to install."""


def _gguf() -> Any:
    try:
        import gguf  # the optional 'gguf' extra, imported only when an export runs
    except ImportError:
        raise GGUFMissing(f"GGUF export needs the `gguf` package: {GGUF_HINT}") from None
    return gguf


# ----------------------------------------------------------------------------- architecture


def gguf_architecture(config: GPTConfig) -> str:
    """llama.cpp's architecture that computes what a model of `config` does: "llama" or
    "gpt2"; a one-line error naming what neither can hold."""
    if config.later_options():
        raise UsageError(f"no llama.cpp architecture computes "
                         f"{', '.join(config.later_options())}; export a model without them")
    if config.norm_position != "pre":
        raise UsageError("llama.cpp runs pre-norm models only; this one is post-norm "
                         "(norm_position='post')")
    if config.pos_encoding == "alibi":
        raise UsageError("pos_encoding 'alibi' is not exported to GGUF: gptlab writes "
                         "llama.cpp's llama and gpt2 architectures, neither of which has "
                         "ALiBi (its mpt and bloom ones do, with their own layers)")
    if (config.norm, config.mlp, config.pos_encoding) == ("rmsnorm", "swiglu", "rope"):
        _rope_scaling_keys(config)  # refuses a scaling llama.cpp does not compute
        return "llama"
    if config.norm == "layernorm" and config.mlp == "gelu_tanh" and config.pos_encoding != "rope":
        return "gpt2"
    if config.norm == "layernorm" and config.mlp == "gelu":
        raise UsageError("llama.cpp's GPT-2 computes the tanh approximation of GELU "
                         "(mlp='gelu_tanh'); this model uses the exact erf GELU (mlp='gelu'), "
                         "which no llama.cpp architecture with LayerNorm computes: train one "
                         "with mlp='gelu_tanh' to export it (gptlab train ... --mlp gelu_tanh)")
    raise UsageError(f"no llama.cpp architecture for norm={config.norm!r}, mlp={config.mlp!r}, "
                     f"pos_encoding={config.pos_encoding!r}: llama is rmsnorm + swiglu + rope, "
                     "gpt2 is layernorm + gelu_tanh with learned, sinusoidal or no positions")


def _rope_scaling_keys(config: GPTConfig) -> dict[str, Any]:
    """rope.freq_base and the scaling keys llama.cpp reads; the llama3 rule goes in a
    tensor instead (see `_rope_factors`)."""
    scaling = config.rope_scaling
    kind = scaling["type"] if scaling else None
    if kind is None or kind == "llama3":
        return {"freq_base": config.rope_base}
    if kind == "ntk":  # static NTK-aware: only the base changes, as gptlab.model.positional does
        d = config.head_dim
        return {"freq_base": config.rope_base * scaling["factor"] ** (d / (d - 2))}
    if kind == "linear":
        return {"freq_base": config.rope_base, "linear_factor": float(scaling["factor"])}
    if kind == "dynamic":
        raise UsageError("gptlab's 'dynamic' rope scaling is not exported to GGUF: llama.cpp "
                         "has no dynamic NTK (its base would not grow with the length)")
    raise UsageError(f"gptlab's {kind!r} rope scaling is not exported to GGUF: llama.cpp's own "
                     "YaRN computes its ramp and temperature differently")


def _rope_factors(config: GPTConfig) -> np.ndarray | None:
    """Llama 3.1's rule as llama.cpp takes it: a divisor for each frequency (rope_freqs)."""
    if not config.rope_scaling or config.rope_scaling["type"] != "llama3":
        return None
    plain, _ = rope_inverse_frequencies(config.head_dim, config.rope_base)
    scaled, _ = rope_inverse_frequencies(config.head_dim, config.rope_base, config.rope_scaling)
    return (plain / scaled).numpy().astype(np.float32)


# ----------------------------------------------------------------------------- tensors

_TOP = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
        "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias",
        "lm_head.weight": "output.weight"}
_BLOCK = {"norm_1": "attn_norm", "attn.qkv": "attn_qkv", "attn.proj": "attn_output",
          "norm_2": "ffn_norm", "mlp.fc": "ffn_up", "mlp.gate": "ffn_gate", "mlp.up": "ffn_up",
          "mlp.proj": "ffn_down"}


def gguf_tensors(model: GPT, arch: str) -> dict[str, np.ndarray]:
    """Every weight under llama.cpp's name, float32, in torch's (out, in) layout, which the
    gguf writer turns into ggml's (in, out). A tied head is left out: llama.cpp then reuses
    token_embd, as gptlab does."""
    config = model.config
    ours = weights_state(model)
    if arch == "gpt2":  # GPT-2 always has biases and a position table: what computes the same
        ours.update(stand_ins(model, ours, GPT2))
    tensors: dict[str, np.ndarray] = {}
    for name, tensor in ours.items():
        array = tensor.detach().to("cpu", torch.float32).numpy()
        match = re.fullmatch(r"blocks\.(\d+)\.(.+)\.(weight|bias)", name)
        if match is None:
            tensors[_TOP[name]] = array
            continue
        i, local, kind = match.groups()
        if arch == "llama" and local == "attn.qkv":
            tensors.update(_llama_qkv(array, config, f"blk.{i}", kind))
        else:
            tensors[f"blk.{i}.{_BLOCK[local]}.{kind}"] = array
    factors = _rope_factors(config)
    if factors is not None:
        tensors["rope_freqs.weight"] = factors
    return tensors


def _llama_qkv(qkv: np.ndarray, config: GPTConfig, prefix: str, kind: str
               ) -> dict[str, np.ndarray]:
    """Our fused q, k, v rows split into llama.cpp's three, q and k reordered from our
    rotate-half RoPE pairs (i, i + d/2) to llama.cpp's adjacent ones (2i, 2i + 1)."""
    q_dim = config.n_head * config.head_dim
    q, k, v = np.split(qkv, [q_dim, q_dim + config.kv_dim])
    return {f"{prefix}.attn_q.{kind}": _pairs_adjacent(q, config.n_head),
            f"{prefix}.attn_k.{kind}": _pairs_adjacent(k, config.n_kv_head),
            f"{prefix}.attn_v.{kind}": v}


def _pairs_adjacent(rows: np.ndarray, n_head: int) -> np.ndarray:
    """Within each head, rows (0..d/2-1, d/2..d-1) -> (0, d/2, 1, d/2+1, ...): the
    permutation llama.cpp's convert_hf_to_gguf.py applies to Hugging Face Llama."""
    rest = rows.shape[1:]
    return rows.reshape(n_head, 2, -1, *rest).swapaxes(1, 2).reshape(rows.shape).copy()


def _encoded(gguf: Any, array: np.ndarray, dtype: str) -> tuple[np.ndarray, Any]:
    """(data, its GGML type) for one tensor at --dtype: vectors (norms, biases, rope factors)
    stay f32, as llama.cpp's own converter keeps them; a matrix whose rows Q8_0 cannot
    block goes in f16."""
    types = gguf.GGMLQuantizationType
    if array.ndim == 1 or dtype == "f32":
        return array, types.F32
    if dtype == "q8_0" and array.shape[-1] % Q8_0_BLOCK == 0:
        return gguf.quants.quantize(array, types.Q8_0), types.Q8_0
    return array.astype(np.float16), types.F16


# ----------------------------------------------------------------------------- tokenizer


@dataclass
class GGUFVocab:
    tokens: list[str]  # one per model row, in id order
    types: list[int]
    merges: list[str]  # "left right", by rank
    pre: str  # llama.cpp's pre-tokenizer name
    eos_id: int | None  # the end-of-text token, where the tokenizer has one


def byte_chars() -> dict[int, str]:
    """GPT-2's byte -> printable character table (bytes_to_unicode), which byte-level
    BPE vocabularies, HF's and llama.cpp's, spell their tokens in."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def gguf_vocab(tokenizer: Tokenizer, vocab_size: int) -> GGUFVocab:
    """The tokenizer as llama.cpp's byte-level BPE, padded with unused tokens to the model's
    vocab_size; a one-line error for a tokenizer it cannot reproduce exactly."""
    if isinstance(tokenizer, CharTokenizer):
        vocab = char_vocab(tokenizer)
    elif isinstance(tokenizer, HFTokenizer):
        vocab = bpe_vocab(tokenizer)
    else:
        raise UsageError(f"no GGUF vocabulary for a {type(tokenizer).__name__}")
    if vocab.eos_id is None:
        vocab.eos_id = _never_said(vocab.tokens, vocab_size)
    for i in range(len(vocab.tokens), vocab_size):
        vocab.tokens.append(f"[PAD{i}]")
        vocab.types.append(UNUSED)
    return vocab


def _never_said(tokens: list[str], vocab_size: int) -> int | None:
    """An id for llama.cpp's end-of-text token where the vocabulary has none: without the
    key it takes id 11, a real token (',' in gptlab's BPE), and stops there. The token for
    byte 0xFF, which no UTF-8 text has, so no trained model says it (every byte-level BPE
    has one); else the first padding row. None: a char vocabulary without padding, where
    every id is a character and llama.cpp stops at LLAMA_CPP_EOS (`llama-cli --ignore-eos`)."""
    never = byte_chars()[0xFF]
    if never in tokens:
        return tokens.index(never)
    return len(tokens) if len(tokens) < vocab_size else None


def char_vocab(tokenizer: CharTokenizer) -> GGUFVocab:
    """One token per character, spelled as its UTF-8 bytes in byte-level characters. A
    character of several bytes gets the merges that join its bytes left to right; no merge
    can join two characters (its right side is always a continuation byte), so every text
    made of the vocabulary's characters gets exactly our ids, whatever llama.cpp's
    pre-tokenizer splits. (A text with any other character is an error in gptlab; llama.cpp
    cannot encode it either.)"""
    table = byte_chars()
    tokens, merges = [], {}
    for char in tokenizer.chars:
        pieces = [table[b] for b in char.encode("utf-8")]
        for end in range(1, len(pieces)):
            merges.setdefault(f"{''.join(pieces[:end])} {pieces[end]}", None)
        tokens.append("".join(pieces))
    return GGUFVocab(tokens, [NORMAL] * len(tokens), list(merges), "gpt-2", None)


def bpe_vocab(tokenizer: HFTokenizer) -> GGUFVocab:
    """A byte-level BPE tokenizer.json (gptlab's `prepare --tokenizer bpe`, GPT-2's, Llama
    3's) as its tokens, types and merges; the pre-tokenizer must be one llama.cpp has."""
    spec = json.loads(tokenizer.tokenizer.to_str())
    model = spec["model"]
    what = f"the {model.get('type')} tokenizer"
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        raise UsageError(f"{what}: GGUF export takes byte-level BPE or gptlab's char tokenizer "
                         "(SentencePiece-style and WordPiece vocabularies are not exported)")
    if spec.get("normalizer") is not None:
        raise UsageError(f"{what} has a normalizer; llama.cpp's byte-level BPE has none")
    if not _is_byte_level(spec.get("decoder")):
        raise UsageError(f"{what} does not decode byte-level; llama.cpp's BPE does")
    pre = _pre_tokenizer_name(spec.get("pre_tokenizer"))
    ids = dict(model["vocab"])
    added = {t["content"]: t for t in spec.get("added_tokens", [])}
    ids.update({content: t["id"] for content, t in added.items()})
    tokens: list[str | None] = [None] * tokenizer.vocab_size
    for token, i in ids.items():
        tokens[i] = token
    if None in tokens:
        raise UsageError(f"{what}: no token has id {tokens.index(None)}")
    types = [(CONTROL if added[t]["special"] else USER_DEFINED) if t in added else NORMAL
             for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    eos = next((added[t]["id"] for t in ("<|endoftext|>", "<|end_of_text|>") if t in added),
               None)
    return GGUFVocab(tokens, types, merges, pre, eos)


def _is_byte_level(part: dict | None) -> bool:
    return part is not None and part.get("type") == "ByteLevel"


def _pre_tokenizer_name(pre: dict | None) -> str:
    """llama.cpp's name for the pre-tokenizer: "gpt-2" for ByteLevel with its own regex
    (GPT-2, gptlab's BPE), "llama-bpe" for Llama 3's Split then ByteLevel."""
    if _is_byte_level(pre) and pre.get("use_regex", True) and not pre.get("add_prefix_space"):
        return "gpt-2"
    if pre is not None and pre.get("type") == "Sequence":
        parts = pre.get("pretokenizers", [])
        if (len(parts) == 2 and parts[0].get("type") == "Split"
                and parts[0].get("pattern", {}).get("Regex") == LLAMA3_SPLIT
                and _is_byte_level(parts[1]) and not parts[1].get("use_regex", True)):
            return "llama-bpe"
    kind = pre.get("type") if pre else None
    raise UsageError(f"the tokenizer's pre-tokenizer ({kind}) is not one llama.cpp has: GGUF "
                     "export takes GPT-2's byte-level one or Llama 3's")


# ----------------------------------------------------------------------------- the file


def model_name(source: str | Path) -> str:
    """general.name: the model directory's name; RUN/best is "RUN-best"."""
    path = Path(source).expanduser()
    path = path.resolve() if path.exists() else path  # "." and "runs/x/." have names too
    return f"{path.parent.name}-{path.name}" if path.name == "best" else path.name


def write_gguf(model: GPT, tokenizer: Tokenizer, out: str | Path, *, dtype: str = "f32",
               name: str = "gptlab") -> GGUFVocab:
    """Write `model` and `tokenizer` to the GGUF file `out`, atomically (a temp file beside
    it, renamed when complete). Everything is checked before the first byte; returns the
    vocabulary written."""
    gguf = _gguf()
    if dtype not in GGUF_DTYPES:
        raise UsageError(f"unknown GGUF dtype {dtype!r}; expected one of: "
                         f"{', '.join(GGUF_DTYPES)}")
    config = model.config
    arch = gguf_architecture(config)
    vocab = gguf_vocab(tokenizer, config.vocab_size)
    tensors = gguf_tensors(model, arch)
    with atomic_path(out) as tmp:
        writer = gguf.GGUFWriter(tmp, arch)
        _add_metadata(gguf, writer, config, arch, dtype, name)
        _add_vocab(gguf, writer, vocab)
        for tensor_name, array in tensors.items():
            data, ggml_type = _encoded(gguf, array, dtype)
            writer.add_tensor(tensor_name, data, raw_dtype=ggml_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return vocab


_FILE_TYPES = {"f32": "ALL_F32", "f16": "MOSTLY_F16", "q8_0": "MOSTLY_Q8_0"}


def _add_metadata(gguf: Any, writer: Any, config: GPTConfig, arch: str, dtype: str,
                  name: str) -> None:
    writer.add_type("model")
    writer.add_name(name)
    writer.add_file_type(getattr(gguf.LlamaFileType, _FILE_TYPES[dtype]))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    # Who wrote the file and the config it came from, so it can be traced back.
    writer.add_string(GGUF_KEY, __version__)  # also what lets --force replace the file
    writer.add_string(GGUF_CONFIG_KEY, json.dumps(config.to_dict()))
    writer.add_context_length(config.block_size)
    writer.add_embedding_length(config.n_embd)
    writer.add_block_count(config.n_layer)
    writer.add_feed_forward_length(config.ffn_hidden)
    writer.add_head_count(config.n_head)
    writer.add_head_count_kv(config.n_kv_head)
    writer.add_vocab_size(config.vocab_size)
    if arch == "gpt2":
        writer.add_layer_norm_eps(config.norm_eps)
        return
    writer.add_layer_norm_rms_eps(config.norm_eps)
    writer.add_rope_dimension_count(config.head_dim)
    rope = _rope_scaling_keys(config)
    writer.add_rope_freq_base(rope["freq_base"])
    if "linear_factor" in rope:
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(rope["linear_factor"])


def _add_vocab(gguf: Any, writer: Any, vocab: GGUFVocab) -> None:
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    # llama.cpp's BPE refuses a file without merges and the writer an empty list: a
    # vocabulary without any (an ASCII char one) gets one that no text can use.
    writer.add_token_merges(vocab.merges or [NEVER_MERGES])
    writer.add_add_bos_token(False)  # gptlab adds nothing to a prompt
    if vocab.eos_id is not None:
        writer.add_eos_token_id(vocab.eos_id)
