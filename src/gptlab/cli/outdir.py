"""The checks every command that writes an --out makes before any work. A folder of a kind
(a run, data, a model, an export) is claimed with gptlab.files.kinds.claim; these are for
the rest: loose files in a folder, and one file."""

from __future__ import annotations

from pathlib import Path

from gptlab.errors import UsageError
from gptlab.files.atomic import check_dir
from gptlab.files.kinds import check_loose


def check_out_dir(out: str | Path) -> Path:
    """--out receives loose files (figures, scores): creatable, writable, and not one of
    gptlab's kinds of folder, whose files they would mix with (kinds.check_loose)."""
    return check_loose(out)


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
