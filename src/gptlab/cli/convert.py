"""`gptlab convert`: Hugging Face GPT-2 / Llama / GPT-NeoX / OPT <-> a gptlab model directory,
with its tokenizer (see gptlab.convert.hf)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gptlab.convert.formats import GGUF_DTYPES, GGUF_HINT, HF_HINT
from gptlab.convert.hf_config import keymap_for
from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.files.atomic import copy_file
from gptlab.files.authorship import GGUF
from gptlab.files.kinds import CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE
from gptlab.model.config import GPTConfig
from gptlab.model.params import counted


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "convert",
        help="convert Hugging Face GPT-2 / Llama / GPT-NeoX / OPT weights to and from gptlab",
        description=(
            "--from-hf: a Hugging Face GPT-2, Llama, GPT-NeoX or OPT (a directory with "
            "config.json and safetensors or pytorch_model.bin, or a hub name already in the "
            "Hugging Face cache) "
            f"-> a gptlab model directory ({CONFIG_FILE}, {WEIGHTS_FILE}, {TOKENIZER_FILE} if "
            "there is one). --to-hf: a gptlab model directory -> a directory that "
            "transformers' AutoModelForCausalLM and AutoTokenizer load: GPT-2 for LayerNorm + "
            "GELU with learned, sinusoidal or no positions, OPT for the same post-norm, GPT-NeoX "
            "for the same with RoPE (all with biases or without); Llama for RoPE + RMSNorm + "
            "SwiGLU; anything else is refused, saying why. Needs "
            f"`{HF_HINT}`. --to-gguf: a model (run directory, RUN/best, model or "
            "converted directory) and its tokenizer -> one GGUF file llama.cpp runs (Llama or "
            f"GPT-2 architecture, byte-level BPE or char tokenizer). Needs `{GGUF_HINT}`."
        ),
        examples=[
            "gptlab convert --from-hf openai-community/gpt2 --out runs/gpt2",
            "gptlab convert --to-hf runs/demo --out runs/demo-hf",
            "gptlab convert --to-gguf runs/tiny-llama --out tiny-llama.gguf --dtype q8_0",
        ],
    )
    direction = p.add_mutually_exclusive_group(required=True)
    direction.add_argument("--from-hf", metavar="HF_DIR_OR_NAME",
                           help="a Hugging Face model directory or hub name to read")
    direction.add_argument("--to-hf", metavar="MODEL_DIR",
                           help="a gptlab model directory to read, or a shipped model: "
                                "shakespeare")
    direction.add_argument("--to-gguf", metavar="PATH",
                           help="a model (whatever gptlab.load takes) to write as one GGUF file "
                                "for llama.cpp (--out FILE.gguf)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory to write (with --to-gguf: the .gguf file)")
    p.add_argument("--dtype", choices=GGUF_DTYPES,
                   help="--to-gguf only: the weight type (default f32; f16, q8_0 keep "
                        "vectors f32)")
    p.add_argument("--force", action="store_true",
                   help="replace a model (--from-hf) or an export (--to-hf) already in --out, "
                        "or a .gguf file gptlab exported (--to-gguf); never another kind of "
                        "folder or file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.to_gguf is not None:
        return convert_to_gguf(args.to_gguf, out, args.dtype or GGUF_DTYPES[0], args.force)
    if args.dtype is not None:  # HF files keep the model's own dtype: nothing to choose
        raise UsageError(f"--dtype {args.dtype} applies to --to-gguf only (--to-hf and "
                         f"--from-hf write float32 weights)")
    # Before any work: a model (--from-hf) or an export (--to-hf), never another kind.
    kinds.claim(out, kinds.MODEL if args.from_hf is not None else kinds.EXPORT,
                force=args.force)
    if args.from_hf is not None:
        return convert_from_hf(args.from_hf, out, args.force)
    return convert_to_hf(args.to_hf, out, args.force)


def convert_from_hf(source: str, out: Path, force: bool) -> int:
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.convert import hf
    from gptlab.model_dir import save_model

    hf_dir = hf.resolve_hf_dir(source)
    model = hf.from_hf(hf_dir)
    kinds.claim(out, kinds.MODEL, force=force)  # again: the conversion took a while
    kinds.mark(out, kinds.MODEL, "convert")
    save_model(model, out)
    written = [CONFIG_FILE, WEIGHTS_FILE]
    if (hf_dir / hf.HF_TOKENIZER).is_file():
        copy_file(hf_dir / hf.HF_TOKENIZER, out / TOKENIZER_FILE)
        written.append(TOKENIZER_FILE)
    else:  # a model replaced: no tokenizer of another model stays beside it
        (out / TOKENIZER_FILE).unlink(missing_ok=True)
    config = model.config
    print(f"{source}: {_architecture(config)}, {model.num_parameters():,} parameters, "
          f"{counted(config.n_layer, 'layer')}, vocab {config.vocab_size:,}")
    print(f"wrote {out}/: {' '.join(written)}")
    return 0


def convert_to_hf(name: str, out: Path, force: bool) -> int:
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.convert import hf
    from gptlab.data.tokenizer import load_tokenizer
    from gptlab.loading import HF_DIR, gptlab_dir, resolve
    from gptlab.model_dir import load_model

    source = resolve(name)  # a run, a model directory or a shipped model's name
    model_dir = gptlab_dir(name, source)
    if model_dir is None:
        what = "model directory" if source.kind == HF_DIR else "hub name"
        raise UsageError(f"{name} is a Hugging Face {what}, not a gptlab one (--from-hf "
                         "converts it)")
    model = load_model(model_dir)
    source = model_dir / TOKENIZER_FILE
    tokenizer = load_tokenizer(source) if source.is_file() else None  # bad: before any write
    written = hf.to_hf(model, out, tokenizer, overwrite=force)  # once the config converts
    print(f"{name}: {_architecture(model.config)}, {model.num_parameters():,} parameters")
    print(f"wrote {out}/: {' '.join(written)}")
    return 0


def convert_to_gguf(source: str, out: Path, dtype: str, force: bool) -> int:
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.convert.gguf_export import LLAMA_CPP_EOS, gguf_architecture, model_name, write_gguf
    from gptlab.loading import load

    kinds.claim_file(out, GGUF, force=force, sources=(source,))
    model, tokenizer = load(source)
    kinds.claim_file(out, GGUF, force=force, sources=(source,))  # again: the load took a while
    vocab = write_gguf(model, tokenizer, out, dtype=dtype, name=model_name(source))
    print(f"{source}: {gguf_architecture(model.config)}, {model.num_parameters():,} parameters, "
          f"vocab {model.config.vocab_size:,}, {dtype}")
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")
    if vocab.eos_id is None and LLAMA_CPP_EOS < tokenizer.vocab_size:
        print(f"note: no end-of-text token, so llama.cpp stops at id {LLAMA_CPP_EOS} "
              f"({tokenizer.decode([LLAMA_CPP_EOS])!r}); run llama-cli with --ignore-eos")
    return 0


def _architecture(config: GPTConfig) -> str:
    return keymap_for(config).architecture
