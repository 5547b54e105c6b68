"""Text from a file, read strictly as UTF-8, and split into train and val parts."""

from __future__ import annotations

from pathlib import Path

from gptlab.errors import Setting, SettingError, UsageError


def read_text(path: str | Path) -> str:
    """A UTF-8 text file, or a folder's .txt files in name order joined by newlines."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"input not found: {path}")
    if path.is_dir():
        files = sorted(p for p in path.glob("*.txt") if p.is_file())
        if not files:
            raise UsageError(f"no .txt files in folder {path}")
    else:
        files = [path]
    parts = [_read_utf8(f) for f in files]
    # Files that end without a newline still start the next one on a new line.
    return "".join(p if p.endswith("\n") or i == len(parts) - 1 else p + "\n"
                   for i, p in enumerate(parts))


def _read_utf8(path: Path) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}"
        ) from None
    return text.removeprefix("\ufeff")  # a byte-order mark is not part of the text


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """First (1 - val_fraction) of the characters for training, the rest for validation."""
    if not 0.0 < val_fraction < 1.0:
        raise SettingError(Setting("val_fraction"),
                           f" must be between 0 and 1 (exclusive), got {val_fraction}")
    if not text.strip():
        raise UsageError("the corpus is empty (or only whitespace)")
    n = len(text)
    cut = int(n * (1.0 - val_fraction))
    if cut == 0 or cut == n:
        raise UsageError(
            f"the corpus has {n} characters, too few to split with --val-fraction {val_fraction}"
        )
    return text[:cut], text[cut:]
