"""The check every command that writes figures into an --out folder (gptlab heads, lens,
patch, attribute) makes before any work, and again before it writes. gptlab.files.kinds
decides, as it does for one file (eval --plot, runs --plot, convert --to-gguf:
kinds.claim_file). Where a command writes without --out (`gptlab heads RUN`: RUN/heads)
follows the model it loads, as gptlab.loading.resolve names it, never a folder that only
shares its name."""

from __future__ import annotations

from pathlib import Path

from gptlab.errors import UsageError
from gptlab.files import kinds


def check_out_dir(out: str | Path) -> Path:
    """--out receives a command's figures and scores: a new or empty folder, or one of
    figures gptlab wrote (kinds.FIGURES), inside no other kind of folder but right inside a
    model's (RUN/heads)."""
    kinds.claim(out, kinds.FIGURES)
    return Path(out)


def open_out_dir(out: str | Path, by: str) -> Path:
    """check_out_dir again (the work took a while), then the folder made and marked as
    figures written by command `by`, before its files."""
    check_out_dir(out)
    kinds.mark(out, kinds.FIGURES, by)
    return Path(out)


def beside_model(model: str, name: str) -> Path:
    """MODEL/name, the default --out of a command that writes a model's own figures, for
    the directory MODEL resolves to (gptlab.loading.resolve: a run, a model or a Hugging
    Face directory). A shipped model or a hub name is no folder of the user's: a UsageError
    asks for --out (a folder here named like a shipped model is not the model loaded)."""
    from gptlab.loading import GPTLAB_DIR, HF_DIR, SHIPPED, resolve  # start-up time: parsers

    found = resolve(model, quiet=True)  # the refusal below says it, in its one line
    if found.kind == SHIPPED:
        here = (f" (the folder {model} here is another model: write ./{model} to use it)"
                if Path(model).exists() else "")
        raise UsageError(f"{model} is the model gptlab ships, not a folder of yours, so there "
                         f"is no {model}/{name} to write into: give --out DIR{here}")
    if found.kind not in (GPTLAB_DIR, HF_DIR):
        raise UsageError(f"{model} is not a local directory, so there is no {model}/{name} "
                         f"to write into: give --out DIR")
    return Path(found.where) / name
