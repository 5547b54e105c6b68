"""The check every command that writes figures into an --out folder (gptlab heads, lens,
patch, attribute) makes before any work, and again before it writes. gptlab.files.kinds
decides, as it does for one file (eval --plot, runs --plot, convert --to-gguf:
kinds.claim_file)."""

from __future__ import annotations

from pathlib import Path

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
