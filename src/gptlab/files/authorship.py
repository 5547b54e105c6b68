"""Whether gptlab wrote a file, read from the file itself: the mark each single-file output
carries in its own metadata (no sidecar, which a copy or a rename would lose).

  figure  a PNG's tEXt "Software" or an SVG's dc:creator is FIGURE_CREATOR
          (gptlab.plots.Figure writes it through matplotlib's savefig metadata)
  gguf    a GGUF file with gptlab's own key, GGUF_KEY (gptlab.convert.gguf_export writes it)

gptlab.files.kinds.claim_file asks this before it lets --force replace a file. Anything that
cannot be read, or is not of the format, answers no: refusing a file of ours costs a new
name, replacing one of the user's costs the file.
"""

from __future__ import annotations

import re
from pathlib import Path

FIGURE, GGUF = "figure", "gguf"
OUTPUTS = (FIGURE, GGUF)
DESCRIPTION = {FIGURE: "figure", GGUF: "GGUF file"}
FIGURE_CREATOR = "gptlab figure"
GGUF_KEY = "gptlab.version"
# Figures an earlier gptlab drew carry matplotlib's own mark: in a folder of figures
# (kinds.FIGURES), where the names are gptlab's too, that is enough to take them as ours.
MATPLOTLIB_CREATOR = "Matplotlib"
SVG_HEAD_BYTES = 4096  # matplotlib writes its metadata block first
_SVG_CREATOR = re.compile(r"<dc:creator>\s*<cc:Agent>\s*<dc:title>([^<]*)</dc:title>")


def figure_creator(path: str | Path) -> str | None:
    """Who a PNG or SVG says created it (None: not a readable PNG or SVG, or no one)."""
    path = Path(path)
    if path.suffix.lower() == ".svg":
        try:
            with open(path, "rb") as f:
                head = f.read(SVG_HEAD_BYTES).decode("utf-8", "replace")
        except OSError:
            return None
        found = _SVG_CREATOR.search(head)
        return found.group(1) if found else None
    # PIL comes with matplotlib, which gptlab requires; it reads the chunks before IDAT
    from PIL import Image

    try:
        with Image.open(path, formats=["PNG"]) as image:
            return image.info.get("Software")
    except Exception:  # not a PNG, truncated, unreadable: PIL raises many kinds
        return None


def is_gptlab_figure(path: str | Path, *, earlier: bool = False) -> bool:
    """A PNG or SVG gptlab drew (earlier: or matplotlib, as gptlab's figures once were)."""
    creator = figure_creator(path) or ""
    return creator == FIGURE_CREATOR or (earlier and creator.startswith(MATPLOTLIB_CREATOR))


def is_gptlab_gguf(path: str | Path) -> bool:
    """A GGUF file gptlab exported (it holds GGUF_KEY). Read with the `gguf` package's own
    reader; without it installed nothing can be told, and the answer is no."""
    try:
        from gguf import GGUFReader  # the optional 'gguf' extra
    except ImportError:
        return False
    try:
        return GGUF_KEY in GGUFReader(path).fields
    except Exception:  # not a GGUF file, truncated: the reader raises many kinds
        return False


def written_by_gptlab(path: str | Path, output: str) -> bool:
    """Whether `path` is a file gptlab wrote as `output` (OUTPUTS)."""
    if output == FIGURE:
        return is_gptlab_figure(path)
    if output == GGUF:
        return is_gptlab_gguf(path)
    raise ValueError(f"unknown kind of output {output!r}")
