"""`gptlab.load`: any model gptlab can run, with its tokenizer, in one line.

    model, tokenizer = gptlab.load("runs/demo")          # a run: its latest weights
    model, tokenizer = gptlab.load("runs/demo/best")     # ...or its best ones
    model, tokenizer = gptlab.load("shakespeare")        # a model gptlab ships
    model, tokenizer = gptlab.load("openai-community/gpt2")  # a Hugging Face dir or hub name
    model, tokenizer = gptlab.load("runs/rope", context=256, rope_scaling="yarn:4")

What a name or path names is decided in one place, `resolve`, for every command: a model
gptlab ships by its name (gptlab.pretrained, checksums verified; a folder of the same name
here is loaded when written as a path, ./shakespeare), else a path as what it holds (a
gptlab model directory: config.json with GPTConfig fields, model.safetensors,
tokenizer.json, as every run directory is; else a Hugging Face directory, config.json with
a model_type), else a hub name written owner/name. A near miss of a shipped model or a
folder ("shakespear") is answered with "did you mean", before any network access.

Importing this module loads no torch: what a name names (resolve) and a model's config
(config_of) are read from files alone, so `gptlab params RUN` answers without it; torch,
the model and the converters are imported by the functions that build a model.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gptlab import model_dir
from gptlab.convert.hf_config import config_from_hf
from gptlab.errors import GptlabError, Setting, SettingError, UsageError
from gptlab.files import kinds
from gptlab.inference.formats import WEIGHT_CHOICES
from gptlab.model.config import GPTConfig, with_rope_scaling
from gptlab.pretrained import NAMES, folder, is_shipped, sha256_of, verified

if TYPE_CHECKING:
    import torch

    from gptlab.data.tokenizer import Tokenizer
    from gptlab.model.gpt import GPT


def load(path: str | Path, device: str | torch.device | None = None,
         weights: str | None = None, require_tokenizer: bool = True,
         context: int | None = None, rope_scaling: str | dict[str, Any] | None = None
         ) -> tuple[GPT, Tokenizer | None]:
    """(model in eval mode on `device`, its tokenizer), from a run or model directory, a
    directory `gptlab convert` wrote, a shipped model's name ("shakespeare"), a Hugging
    Face directory or a hub name. device None: the CPU ("auto": CUDA if there is one; a
    device this machine lacks is a UsageError). Weights that are not all finite are
    refused (require_finite). The tokenizer has encode, decode and vocab_size, whatever
    its kind.

    weights: None keeps the weights as saved; fp32, fp16, bf16, int8 or auto makes the
    model an inference model with its matrices in that format (gptlab.inference.quantize; auto: the
    fastest on this machine), and `model.decode_choice` says what was picked and why.

    require_tokenizer False: a gptlab model directory without tokenizer.json gives
    (model, None) instead of a UsageError (for work on token ids alone).

    context: the longest text the model then runs at by default (GPT.set_context): past
    block_size with a ContextWarning, refused for learned positions. rope_scaling:
    "linear:F", "ntk:F", "yarn:F", "dynamic:F" (gptlab.model.config.rope_scaling_from_spec)
    or a rope_scaling dict, applied at inference time, no retraining: the model is built
    from a new config (with_rope_scaling), the saved one unchanged."""
    # start-up time: torch, the model and the converters load here, not on import
    from gptlab.convert import hf
    from gptlab.distributed.process import pick_device
    from gptlab.inference import quantize

    device = pick_device("cpu" if device is None else device)
    if weights is not None and weights not in WEIGHT_CHOICES:
        raise SettingError(Setting("weights"),
                           f" must be one of {', '.join(WEIGHT_CHOICES)}, got {weights!r}")
    found, is_hf, kind = _locate(path)
    if is_hf:
        model = hf.from_hf(found).to(device)
    else:
        model = model_dir.load_model(found, device=device)
    require_finite(model, path)
    tokenizer = None
    if require_tokenizer or is_hf or (found / model_dir.TOKENIZER_FILE).is_file():
        tokenizer = _tokenizer(found, is_hf, path, model.config)
    if rope_scaling is not None:
        model = with_config(model, with_rope_scaling(model.config, rope_scaling))
    if context is not None:
        model.set_context(context)
    model.eval()
    if weights is not None:
        model.decode_choice = quantize.quantize(model, weights)
    model.source = Source(kind, found)  # what was read: the record a figure keeps (provenance)
    return model, tokenizer


def require_finite(model: torch.nn.Module, path: str | Path) -> None:
    """A UsageError naming the tensors unless every weight is a finite number: a model with
    a NaN or an infinity (a run that diverged) answers NaN to everything."""
    import torch  # start-up time: only where a model is

    bad = [name for name, p in model.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        raise UsageError(f"{path}: the weights are not finite (NaN or infinite values in "
                         f"{bad[0]}{more}): the model cannot be used; load an earlier "
                         f"checkpoint (a run's best/) or train it again")


def with_config(model: GPT, config: GPTConfig) -> GPT:
    """A new GPT of `config` (derived from model's, changing no weight's shape: a RoPE
    scaling, say) holding model's weights, on its device; model is left as it is."""
    import torch  # start-up time: only where a model is

    from gptlab.model.gpt import GPT

    with torch.device(model.wte.weight.device):
        rebuilt = GPT(config)
    model_dir.load_state(rebuilt, model_dir.weights_state(model), "the loaded model")
    return rebuilt.to(model.wte.weight.dtype)


def describe(path: str | Path) -> tuple[GPTConfig, Tokenizer]:
    """(config, tokenizer) of the model `load(path)` gives, checked as load checks them,
    without reading its weights (a fine-tune's plan needs only these)."""
    found, is_hf, _ = _locate(path, weights=False)
    config = _config(found, is_hf)
    return config, _tokenizer(found, is_hf, path, config)


def config_of(path: str | Path) -> GPTConfig:
    """The config of the model `load(path)` gives, from its config.json alone (for a hub
    model, only that file is fetched)."""
    return _config(*_locate(path, weights=False)[:2])


def _config(found: Path, is_hf: bool) -> GPTConfig:
    if not is_hf:
        return model_dir.load_config(found)
    from gptlab.convert import hf  # start-up time: transformers reads it, with torch

    return config_from_hf(hf.read_hf_config(found))[0]


# What a model name or path names (resolve): a gptlab model directory (a run, RUN/best, a
# model `convert` wrote), a Hugging Face directory, a model gptlab ships, a hub name.
GPTLAB_DIR, HF_DIR, SHIPPED, HUB = "gptlab", "hf", "shipped", "hub"


@dataclass(frozen=True)
class Source:
    """What resolve() found: `kind` (GPTLAB_DIR, HF_DIR, SHIPPED or HUB) and `where`, the
    directory (for SHIPPED, unchecked: see pretrained.verified) or the hub name."""

    kind: str
    where: Path | str


def resolve(path: str | Path, quiet: bool = False) -> Source:
    """What `path` names, decided here for every command, before any network access:

    - a shipped model's name (shakespeare) is that model, even where a folder of that name
      is here (a line on stderr says so, unless quiet: write ./shakespeare for the folder);
    - a path that exists is the directory it is (a gptlab one, else a Hugging Face one);
    - a near miss of a shipped model or of a folder beside the path is a UsageError with
      "did you mean" (difflib), never a hub lookup;
    - owner/name, whose owner is no folder here, is a hub name; anything else is a
      UsageError ("no such run or model directory").
    """
    text = str(path)
    source = Path(path).expanduser()
    if is_shipped(text):  # never written as a path: "./shakespeare" has a slash
        if source.exists() and not quiet:
            print(f"{text}: the model gptlab ships (a folder {text} is here too: write "
                  f"./{text} to load it)", file=sys.stderr)
        return Source(SHIPPED, folder(text))
    if source.is_file():
        raise UsageError(f"{source} is a file; give a run or model directory, a Hugging Face "
                         f"directory or a hub name")
    if source.is_dir():
        is_gptlab = (source / model_dir.CONFIG_FILE).is_file() and not kinds.is_hf_dir(source)
        return Source(GPTLAB_DIR if is_gptlab else HF_DIR, source)
    missing = f"no such run or model directory: {text}"
    near = _near_miss(text, source)
    if near:
        raise UsageError(f"{missing}; did you mean {near}?")
    from gptlab.convert import hf  # start-up time: torch, for a name that is no path here

    if "/" in text and hf.is_hub_name(text):
        return Source(HUB, text)
    if hf.is_hub_name(text):  # a bare word: the hub's own names are owner/name
        missing += " (a Hugging Face hub name is written owner/name)"
    raise UsageError(missing)


def _near_miss(text: str, source: Path) -> str | None:
    """The shipped model or the folder beside `source` whose name is closest to the one
    typed, if one is close (a typo), as it would be written."""
    shipped = get_close_matches(text, NAMES, n=1, cutoff=NEAR)
    if shipped:
        return f"{shipped[0]} (the model gptlab ships)"
    parent = source.parent
    try:
        beside = [p.name for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
    except OSError:  # a folder we may not list: no suggestion
        return None
    close = get_close_matches(source.name, beside, n=1, cutoff=NEAR)
    if not close:
        return None
    return close[0] if parent == Path(".") and "/" not in text else str(parent / close[0])


NEAR = 0.75  # difflib's ratio from which a name counts as a typo (shakespear: 0.95)


def gptlab_dir(path: str | Path, found: Source | None = None) -> Path | None:
    """The gptlab model directory `path` names (a shipped model's once its checksums are
    verified), or None where it names a Hugging Face model. found: resolve(path), if known."""
    found = found or resolve(path)
    if found.kind == SHIPPED:
        return verified(str(path))
    return found.where if found.kind == GPTLAB_DIR else None


def _locate(path: str | Path, weights: bool = True) -> tuple[Path, bool, str]:
    """(the directory to read, whether it is a Hugging Face one, resolve()'s kind), as
    resolve() says: a shipped model with its checksums verified, a hub model fetched if need
    be (weights False: without its weights)."""
    found = resolve(path)
    directory = gptlab_dir(path, found)
    if directory is not None:
        return directory, False, found.kind
    from gptlab.convert import hf  # start-up time: the hub's client, with torch

    try:
        return hf.resolve_hf_dir(found.where, weights=weights), True, found.kind
    except GptlabError as exc:  # a mistyped path first, then what the hub said
        message = str(exc).replace("no such local directory:", "no such run or model "
                                   "directory:", 1)
        raise type(exc)(message) from None


def provenance(model: torch.nn.Module, given: str | Path) -> dict[str, Any]:
    """What a figure's record says of the model it describes: the name or path as given,
    what it named (resolve's kind: "shipped", "gptlab", "hf" or "hub"), the folder read
    (absolute) and the sha256 of each weights file in it. A model load() did not give
    (built in memory) is named as given only."""
    source = getattr(model, "source", None)
    if not isinstance(source, Source):
        return {"model": str(given)}
    folder = Path(source.where)
    if source.kind in (SHIPPED, GPTLAB_DIR):
        files = [folder / model_dir.WEIGHTS_FILE]
    else:
        from gptlab.convert import hf  # start-up time: a Hugging Face model loaded it already

        files = hf.weight_files(folder)
    return {"model": str(given), "kind": source.kind, "path": str(folder.resolve()),
            "sha256": {f.name: sha256_of(f) for f in files}}


def _tokenizer(found: Path, is_hf: bool, path: str | Path, config: GPTConfig) -> Tokenizer:
    from gptlab.data.tokenizer import load_tokenizer  # start-up time: tokenizers, numpy

    if not is_hf:
        tokenizer = model_dir.load_tokenizer_of(found)
    elif not (found / kinds.TOKENIZER_FILE).is_file():  # a Hugging Face one's name too
        raise UsageError(f"{found} has no {kinds.TOKENIZER_FILE}: gptlab reads tokenizers in "
                         f"the `tokenizers` library's format only")
    else:
        tokenizer = load_tokenizer(found / kinds.TOKENIZER_FILE)
    if tokenizer.vocab_size > config.vocab_size:
        raise UsageError(f"{path}: the tokenizer has {tokenizer.vocab_size:,} tokens but the model "
                         f"only {config.vocab_size}")
    return tokenizer
