"""Hugging Face GPT-2, Llama, GPT-NeoX and OPT weights in and out.

`from_hf(model_or_dir)` builds our GPT from a `transformers` GPT2LMHeadModel,
LlamaForCausalLM, GPTNeoXForCausalLM or OPTForCausalLM: an instance, a local directory
(config.json plus model.safetensors, sharded safetensors with an index, or
pytorch_model.bin read with weights_only loading), or a hub name already in the Hugging
Face cache (or downloadable, when online).
`to_hf(model, out_dir, tokenizer=None)` writes config.json + model.safetensors that
`transformers.AutoModelForCausalLM.from_pretrained(out_dir)` loads (and the tokenizer's files
for AutoTokenizer), for every model one of them computes exactly
(gptlab.convert.hf_config.keymap_for says which, or why none).

Where each weight goes is data, in gptlab.convert.hf_keymap; configs translate in
gptlab.convert.hf_config; this module moves tensors, reads and writes the files, and checks
every shape. `transformers` is optional (`pip install 'gptlab[hf]'`) and imported only when a
conversion runs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from gptlab.convert.formats import HF_HINT
from gptlab.convert.hf_config import (
    ROPE_4X_KEYS,
    config_from_hf,
    config_to_hf,
)
from gptlab.convert.hf_keymap import KEYMAPS, KeyMap
from gptlab.data.tokenizer import Tokenizer
from gptlab.errors import GptlabError, Setting, SettingError, UsageError
from gptlab.files import kinds
from gptlab.files.atomic import atomic_path, atomic_write_text, read_json
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model.inputs import unwrap
from gptlab.model_dir import weights_state

HF_CONFIG = "config.json"
HF_TOKENIZER = "tokenizer.json"
HF_TOKENIZER_CONFIG = "tokenizer_config.json"
SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_BIN = "pytorch_model.bin"
PYTORCH_BIN_INDEX = "pytorch_model.bin.index.json"

class TransformersMissing(GptlabError, ImportError):
    """`transformers` is not installed; the message says what to install."""


def _transformers() -> Any:
    try:
        import transformers  # the optional 'hf' extra, imported only when a conversion runs
    except ImportError:
        raise TransformersMissing(
            f"Hugging Face conversion needs the `transformers` package: {HF_HINT}"
        ) from None
    return transformers


# ----------------------------------------------------------------------------- weights


def _their_names(ours: str, keymap: KeyMap) -> tuple[tuple[str, ...], str | None]:
    """Their full names for one of our weights, and its name inside a block (or None)."""
    if ours in keymap.top:
        return (keymap.top[ours],), None
    match = re.fullmatch(r"blocks\.(\d+)\.(.+)", ours)
    if match is None or match.group(2) not in keymap.block:
        raise GptlabError(f"no {keymap.model_type} name for our weight {ours}")
    prefix = keymap.base_prefix + keymap.block_prefix.format(i=match.group(1))
    local = match.group(2)
    return tuple(prefix + name for name in keymap.block[local]), local


def _part_sizes(config: GPTConfig, n_parts: int) -> list[int]:
    """Rows of each of their tensors in one of ours; only qkv is made of several."""
    assert n_parts == 3, "only the fused qkv projection is split"
    return [config.n_head * config.head_dim, config.kv_dim, config.kv_dim]


def _with_prefix(state: dict[str, Tensor], keymap: KeyMap) -> dict[str, Tensor]:
    """A base model's checkpoint (GPT2Model, LlamaModel; openai-community/gpt2 is one) names
    its weights without the LM-head model's prefix; give them the prefix."""
    lm_head = keymap.top["lm_head.weight"]
    return {
        name if name.startswith(keymap.base_prefix) or name == lm_head
        else keymap.base_prefix + name: tensor
        for name, tensor in state.items()
    }


def state_from_hf(
    theirs: dict[str, Tensor], model: GPT, keymap: KeyMap, source: str
) -> dict[str, Tensor]:
    """Their state dict -> ours for `model`, checking names and every shape."""
    theirs = _with_prefix(theirs, keymap)
    config = model.config
    ours: dict[str, Tensor] = {}
    used: set[str] = set()
    for name, expected in weights_state(model).items():
        names, local = _their_names(name, keymap)
        missing = [n for n in names if n not in theirs]
        if missing:
            raise UsageError(f"{source} has no {missing[0]} (needed for {name})")
        transposed = local in keymap.transposed
        rows_before = keymap.position_offset if name == "wpe.weight" else 0
        wanted = expected.split(_part_sizes(config, len(names))) if len(names) > 1 else [expected]
        parts = []
        for their_name, want in zip(names, wanted, strict=True):
            tensor = theirs[their_name]
            want_shape = tuple(want.t().shape if transposed else want.shape)
            want_shape = (want_shape[0] + rows_before, *want_shape[1:])
            if tuple(tensor.shape) != want_shape:
                raise UsageError(f"{source}: {their_name} has shape {tuple(tensor.shape)}, "
                                 f"but its config says {want_shape}")
            parts.append(tensor.t() if transposed else tensor[rows_before:])
            used.add(their_name)
        ours[name] = torch.cat(parts, dim=0) if len(parts) > 1 else parts[0]
        if local in keymap.head_interleaved:
            ours[name] = _heads_grouped(ours[name], config.n_head)
    for name in _always_present(config, keymap):
        if name in ours:
            continue
        (their_name,), _ = _their_names(name, keymap)
        if their_name in theirs and theirs[their_name].any():
            raise UsageError(f"{source}: {their_name} is not zero, but its config has no "
                             "attention biases and gptlab has one `bias` for every layer")
        used.add(their_name)  # zeros: the model without it computes the same
    if config.tie_embeddings:
        used.add(keymap.top["lm_head.weight"])  # tied: their copy of wte, if they saved one
    unexpected = sorted(n for n in set(theirs) - used if not n.endswith(keymap.ignored))
    if unexpected:
        more = f" (+{len(unexpected) - 3} more)" if len(unexpected) > 3 else ""
        raise UsageError(f"{source} has weights its config does not account for: "
                         f"{', '.join(unexpected[:3])}{more}")
    return ours


def state_to_hf(model: GPT, keymap: KeyMap) -> dict[str, Tensor]:
    """Our weights under their names and layouts (a tied lm_head is left out, as they do),
    with what their architecture always has and ours lacks (see `stand_ins`)."""
    theirs: dict[str, Tensor] = {}
    ours = weights_state(model)
    ours.update(stand_ins(model, ours, keymap))
    for name, tensor in ours.items():
        names, local = _their_names(name, keymap)
        parts = tensor.split(_part_sizes(model.config, len(names))) if len(names) > 1 else [tensor]
        for their_name, part in zip(names, parts, strict=True):
            part = part.t() if local in keymap.transposed else part
            if local in keymap.head_interleaved:
                part = _heads_interleaved(part, model.config.n_head)
            if name == "wpe.weight" and keymap.position_offset:  # rows no position of ours uses
                part = torch.cat([part.new_zeros(keymap.position_offset, part.shape[1]), part])
            theirs[their_name] = part.contiguous().clone()  # own storage: safetensors insists
    return theirs


def _always_present(config: GPTConfig, keymap: KeyMap) -> list[str]:
    """Our full names for keymap.always_present: what their model has whatever ours has."""
    names = [n for n in keymap.top if n in keymap.always_present]
    return names + [f"blocks.{i}.{n}" for i in range(config.n_layer) for n in keymap.block
                    if n in keymap.always_present]


def stand_ins(model: GPT, ours: dict[str, Tensor], keymap: KeyMap) -> dict[str, Tensor]:
    """keymap.always_present weights that our model has none of, as what it computes in their
    place: zero biases, and the absolute positions it adds (zeros for none) as a table."""
    weight = model.wte.weight.detach()
    made = {}
    for name in (n for n in _always_present(model.config, keymap) if n not in ours):
        if name == "wpe.weight":
            positions = torch.arange(model.config.block_size, device=weight.device)
            table = (model.wpe(positions) if model.wpe is not None
                     else torch.zeros(len(positions), model.config.n_embd))
            made[name] = table.to(weight)  # as forward casts it: to the embeddings' dtype
        elif name.removesuffix(".bias") + ".weight" in ours:  # not a post-norm model's ln_f
            rows = ours[name.removesuffix(".bias") + ".weight"].shape[0]
            made[name] = weight.new_zeros(rows)  # as many zeros as its layer has outputs
    return made


def _heads_interleaved(qkv: Tensor, n_head: int) -> Tensor:
    """Our fused qkv rows (q of every head, then k, then v; bias or weight) -> GPT-NeoX's
    (q_h, k_h, v_h for head 0, then head 1, ...)."""
    rest = qkv.shape[1:]
    return qkv.reshape(3, n_head, -1, *rest).transpose(0, 1).reshape(qkv.shape)


def _heads_grouped(qkv: Tensor, n_head: int) -> Tensor:
    """GPT-NeoX's head-by-head qkv rows -> ours; undoes `_heads_interleaved`."""
    rest = qkv.shape[1:]
    return qkv.reshape(n_head, 3, -1, *rest).transpose(0, 1).reshape(qkv.shape)


# ----------------------------------------------------------------------------- files


# A hub model's id: `name` or `org/name`, of letters, digits, '-', '_' and '.'.
HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?", re.ASCII)


def is_hub_name(name: str) -> bool:
    """Whether `name`, which is no local file or directory, may name a Hugging Face hub
    model: a bare `name` or `org/name`, whose org is not a local folder (`runs/scc`, with
    runs/ here, is a mistyped path, not a model of a user called runs)."""
    if not HUB_NAME.fullmatch(name) or name.endswith((".", "-")):
        return False
    org, _, rest = name.partition("/")
    return not rest or not Path(org).exists()


def resolve_hf_dir(name_or_dir: str | os.PathLike[str], cache_dir: str | Path | None = None,
                   weights: bool = True) -> Path:
    """A local Hugging Face model directory, or a hub name resolved through the Hugging Face
    cache (downloading only when it is not cached and the hub can be reached). weights
    False: a hub model's config.json and tokenizer.json are enough (no weights fetched)."""
    path = Path(name_or_dir).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise UsageError(f"{path} is a file; give a Hugging Face model directory or hub name")
    name = str(name_or_dir)
    if not is_hub_name(name):
        raise UsageError(f"directory not found: {path}")
    _transformers()  # the hub client comes with it
    from huggingface_hub import snapshot_download  # the 'hf' extra, as transformers

    safetensors = ["*.safetensors", SAFETENSORS_INDEX]
    pickled = [PYTORCH_BIN, "pytorch_model-*.bin", PYTORCH_BIN_INDEX]
    last_error: Exception | None = None
    for local_only in (True, False):  # the cache first: no network when it is there
        # .bin only when there are no safetensors; without weights, the config alone
        for patterns in ((safetensors, pickled) if weights else ([],)):
            try:
                snapshot = Path(snapshot_download(
                    name, allow_patterns=[HF_CONFIG, HF_TOKENIZER, *patterns],
                    cache_dir=cache_dir, local_files_only=local_only))
            except Exception as exc:  # the hub client's errors share no useful base class
                last_error = exc
                continue
            if (snapshot / HF_CONFIG).is_file() and (not weights or weight_files(snapshot)):
                return snapshot
    from huggingface_hub.errors import (  # the 'hf' extra, as transformers
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if last_error is None:
        raise UsageError(f"{name!r} on the Hugging Face hub has no {HF_CONFIG} with weights")
    why = f"{type(last_error).__name__}: {_one_line(last_error)}"
    if isinstance(last_error, (HFValidationError, RepositoryNotFoundError,
                               RevisionNotFoundError)):
        raise UsageError(f"no such local directory: {name}, and the Hugging Face hub has "
                         f"no such model ({why})")
    # Most likely the network (offline, DNS, a timeout, the hub down): a failure, not bad input.
    raise GptlabError(f"no such local directory: {name}, and as a hub name it is not in the "
                      f"Hugging Face cache and could not be fetched ({why})")


def weight_files(hf_dir: Path) -> list[Path]:
    """The files holding the weights, in the order transformers prefers them."""
    for single, index in ((SAFETENSORS, SAFETENSORS_INDEX), (PYTORCH_BIN, PYTORCH_BIN_INDEX)):
        if (hf_dir / single).is_file():
            return [hf_dir / single]
        if (hf_dir / index).is_file():
            try:
                weight_map = json.loads((hf_dir / index).read_text(encoding="utf-8"))["weight_map"]
                return [hf_dir / shard for shard in sorted(set(weight_map.values()))]
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise UsageError(f"{hf_dir / index} is not a valid weight index ({exc})") from None
    return []


def read_hf_config(hf_dir: Path) -> dict[str, Any]:
    """config.json through transformers' own config class, so defaults and old spellings
    are filled in as transformers fills them."""
    path = hf_dir / HF_CONFIG
    if not path.is_file():
        raise UsageError(f"{hf_dir} has no {HF_CONFIG}: not a Hugging Face model directory")
    raw = read_json(path, "Hugging Face config")
    if isinstance(raw, dict) and "model_type" not in raw and "pos_encoding" in raw:
        raise SettingError(f"{hf_dir} is a gptlab model directory, not a Hugging Face one (",
                           Setting("to_hf"), " / `gptlab convert --to-hf` converts it)")
    if not isinstance(raw, dict) or raw.get("model_type") not in KEYMAPS:
        model_type = raw.get("model_type") if isinstance(raw, dict) else None
        names = ", ".join(raw.get("architectures") or []) if isinstance(raw, dict) else ""
        raise UsageError(f"unsupported architecture {model_type!r}"
                         f"{f' ({names})' if names else ''} in {path}; "
                         f"gptlab converts: {', '.join(KEYMAPS)}")
    transformers = _transformers()
    try:
        return transformers.AutoConfig.for_model(**raw).to_dict()
    except Exception as exc:  # their validation raises ValueError, TypeError, ...
        raise UsageError(f"{path} is not a valid {raw['model_type']} config: "
                         f"{_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    """The whole message of exc on one line (a library's multi-line message cut at its first
    line loses the part that names the field), or its type when it has none."""
    return " ".join(str(exc).split()) or type(exc).__name__


def read_hf_weights(hf_dir: Path) -> dict[str, Tensor]:
    files = weight_files(hf_dir)
    if not files:
        raise UsageError(f"{hf_dir} has no weights ({SAFETENSORS}, {SAFETENSORS_INDEX}, "
                         f"{PYTORCH_BIN} or {PYTORCH_BIN_INDEX})")
    state: dict[str, Tensor] = {}
    for path in files:
        state.update(_read_weight_file(path))
    return state


def _read_weight_file(path: Path) -> dict[str, Tensor]:
    if not path.is_file():
        raise UsageError(f"weights file not found: {path}")
    if path.suffix == ".safetensors":
        try:
            return load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise UsageError(f"{path} is not a readable safetensors file ({exc})") from None
    try:
        # weights_only: tensors and plain containers only; any other pickled object is refused.
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError, RuntimeError, EOFError, ...
        raise UsageError(f"refused {path}: not a plain state dict of tensors "
                         f"({_one_line(exc)})") from None
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        raise UsageError(f"refused {path}: not a plain state dict of tensors")
    return state


def write_tokenizer_config(out_dir: Path, model_max_length: int) -> None:
    """tokenizer_config.json, so AutoTokenizer loads out_dir/tokenizer.json as it is: the
    generic fast tokenizer (not the one config.json's model_type suggests, which may add
    tokens), with no clean-up of spaces on decoding (it would change the text)."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
              "model_max_length": model_max_length}
    atomic_write_text(out_dir / HF_TOKENIZER_CONFIG, json.dumps(config, indent=2) + "\n")


# ----------------------------------------------------------------------------- public


def from_hf(
    model_or_dir: Any, *, dtype: torch.dtype = torch.float32,
    cache_dir: str | Path | None = None,
) -> GPT:
    """Our GPT (eval mode, on the CPU, in `dtype`) with the weights of a Hugging Face GPT-2
    or Llama: a `transformers` model instance, a local directory, or a hub name."""
    if isinstance(model_or_dir, (str, os.PathLike)):
        hf_dir = resolve_hf_dir(model_or_dir, cache_dir)
        hf_config, theirs, source = read_hf_config(hf_dir), read_hf_weights(hf_dir), str(hf_dir)
    elif hasattr(model_or_dir, "config") and hasattr(model_or_dir, "state_dict"):
        hf_config = model_or_dir.config.to_dict()
        theirs = {k: v.detach() for k, v in model_or_dir.state_dict().items()}
        source = type(model_or_dir).__name__
    else:
        raise SettingError(Setting("from_hf"), " takes a transformers model, a directory or a "
                           f"hub name, not {type(model_or_dir).__name__}")
    config, keymap = config_from_hf(hf_config)
    model = GPT(config)
    model.load_state_dict(state_from_hf(theirs, model, keymap, source),
                          strict=not config.tie_embeddings)  # tied: lm_head is wte
    return model.to(dtype).eval()


def to_hf(model: torch.nn.Module, out_dir: str | Path, tokenizer: Tokenizer | None = None,
          *, overwrite: bool = False) -> list[str]:
    """Write out_dir/config.json (Hugging Face format) and out_dir/model.safetensors, which
    `transformers.AutoModelForCausalLM.from_pretrained(out_dir)` loads, and with a tokenizer
    its tokenizer.json and tokenizer_config.json, which AutoTokenizer loads. Returns the
    names of the files written.

    out_dir is an export (gptlab.files.kinds): absent, empty, or with overwrite an export
    already there, which it replaces; never another kind of folder."""
    gpt = unwrap(model)
    fields, keymap = config_to_hf(gpt.config)
    transformers = _transformers()
    hf_config = transformers.AutoConfig.for_model(keymap.model_type, **fields)
    hf_config.architectures = [keymap.architecture]
    config_json = json.loads(hf_config.to_json_string(use_diff=True))
    # Also spelled the 4.x way, so an older transformers reads the same RoPE (5.x reads both).
    config_json.update({k: v for k, v in fields.items() if k in ROPE_4X_KEYS})
    config_json["torch_dtype"] = str(gpt.wte.weight.dtype).removeprefix("torch.")
    kinds.claim(out_dir, kinds.EXPORT, force=overwrite)
    out_dir = Path(out_dir)
    kinds.mark(out_dir, kinds.EXPORT, "convert")
    # config.json is the commit point: gone first and written last, so that an export
    # replaced by a process that dies half-way is never another model's config over these
    # weights (a mix) but an export without a config, which nothing loads.
    (out_dir / HF_CONFIG).unlink(missing_ok=True)
    if tokenizer is None:  # an export replaced: no tokenizer of another model stays
        for name in (HF_TOKENIZER, HF_TOKENIZER_CONFIG):
            (out_dir / name).unlink(missing_ok=True)
    with atomic_path(out_dir / SAFETENSORS) as tmp:
        save_file(state_to_hf(gpt, keymap), str(tmp), metadata={"format": "pt"})
    written = [HF_CONFIG, SAFETENSORS]
    if tokenizer is not None:
        atomic_write_text(out_dir / HF_TOKENIZER, tokenizer.hf_json())
        write_tokenizer_config(out_dir, gpt.config.block_size)
        written += [HF_TOKENIZER, HF_TOKENIZER_CONFIG]
    atomic_write_text(out_dir / HF_CONFIG, json.dumps(config_json, indent=2, sort_keys=True) + "\n")
    return written
