"""The check every command that writes an --out directory makes before any work."""

from __future__ import annotations

from pathlib import Path

from gptlab.errors import UsageError
from gptlab.files.atomic import check_dir
from gptlab.files.kinds import CONFIG_FILE, META_FILE, WEIGHTS_FILE


def check_out_dir(out: str | Path, *, model_ok: bool = False, data_ok: bool = False) -> Path:
    """--out must be creatable and writable (io.check_dir), and not a directory of another
    kind whose files the command would replace (tokenizer.json) or mix its own with: a model
    or run directory unless model_ok, a data directory unless data_ok."""
    out = Path(out)
    check_dir(out)
    if not model_ok and ((out / CONFIG_FILE).exists() or (out / WEIGHTS_FILE).exists()):
        raise UsageError(f"--out {out} holds a model; give a directory of its own")
    if not data_ok and (out / META_FILE).exists():
        raise UsageError(f"--out {out} is a data directory ({META_FILE}); give a directory "
                         "of its own")
    return out


def check_out_file(out: str | Path, force: bool) -> Path:
    """--out names one file to write: not a directory, its directory creatable and
    writable, and not already there unless force (then it is replaced whole)."""
    out = Path(out)
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory; give the file to write")
    if out.exists() and not force:
        raise UsageError(f"{out} already exists; pass --force to overwrite")
    check_dir(out.parent)
    return out
