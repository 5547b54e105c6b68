"""Every figure gptlab draws, as `Figure` objects: they show themselves inline in Jupyter
(`_repr_png_` and `_repr_svg_`: drawn here, no script, no CDN, no network) and save as PNG
or SVG with one call, `fig.save(path)`. The CLI writes its files through the same objects,
so a notebook shows exactly the drawing `gptlab heads` or `gptlab train` writes.

  gptlab.plots.training   loss_curves (a run's loss.png), compare_runs (`gptlab runs --plot`)
  gptlab.plots.interp     attention_pattern, head_scores, lens_grid, attribution_bars,
                          patch_grids (`gptlab heads`, `lens`, `attribute`, `patch`)
  gptlab.plots.positions  sinusoidal_table, sinusoidal_similarity, rope_scores (the
                          positions the chapter shows, as the lab's view 4 computes them)
  gptlab.plots.experiments line_panels (the experiments' figures: `gptlab experiment`)

Figures are built on matplotlib's `Figure` directly, not pyplot: no global figure state, no
backend switch (a user's notebook keeps its own), and nothing needs a display. matplotlib is
imported when a figure is drawn, never by `import gptlab`.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from gptlab.errors import UsageError
from gptlab.files.atomic import atomic_write_bytes
from gptlab.files.authorship import FIGURE_CREATOR

# Token labels stop being readable past this many positions; larger patterns go unlabelled.
MAX_LABELLED = 64
FORMATS = ("png", "svg")


def new_figure(**kwargs: Any) -> Any:
    """A matplotlib Figure (kwargs as Figure's: figsize=(w, h) in inches)."""
    # start-up time: matplotlib takes ~0.3 s to import; only a drawing waits for it
    from matplotlib.figure import Figure as MatplotlibFigure

    return MatplotlibFigure(**kwargs)


def legend_below(ax: Any, n: int) -> None:
    """The legend under the plot, two entries a row, so that no line hides behind it."""
    if n:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
                  frameon=False)


class Figure:
    """A finished drawing: `save(path)` writes it (PNG or SVG, by the suffix), `to_bytes`
    gives either, and Jupyter shows it inline through `_repr_png_` / `_repr_svg_`.

    `matplotlib` is the underlying matplotlib Figure, for anyone who wants to change it
    before saving. dpi: the PNG's resolution (SVG is vector, text as paths: it needs no
    fonts where it is shown)."""

    def __init__(self, fig: Any, dpi: int = 110) -> None:
        fig.tight_layout()
        self.matplotlib, self.dpi = fig, dpi

    def to_bytes(self, format: str = "png") -> bytes:
        if format not in FORMATS:
            raise UsageError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
        # start-up time: matplotlib loads with a figure (new_figure), never with gptlab
        from matplotlib import rc_context

        buffer = io.BytesIO()
        # No date and a fixed salt for the SVG's ids: the same drawing gives the same file.
        # gptlab's mark as its creator: what lets --force replace a figure (and only one
        # gptlab drew: gptlab.files.authorship).
        metadata = ({"Date": None, "Creator": FIGURE_CREATOR} if format == "svg"
                    else {"Software": FIGURE_CREATOR})
        with rc_context({"svg.hashsalt": "gptlab"}):
            self.matplotlib.savefig(buffer, format=format, dpi=self.dpi, metadata=metadata)
        return buffer.getvalue()

    def save(self, path: str | Path) -> Path:
        """Write the figure to path, atomically: .png or .svg (by the suffix)."""
        path = Path(path)
        format = path.suffix.lower().lstrip(".")
        if format not in FORMATS:
            raise UsageError(f"{path}: a figure is saved as .png or .svg, not "
                             f"{path.suffix or 'a file without a suffix'}")
        atomic_write_bytes(path, self.to_bytes(format))
        return path

    def __repr__(self) -> str:
        width, height = self.matplotlib.get_size_inches()
        return f"<gptlab figure, {width:.1f} x {height:.1f} in: .save(path) as .png or .svg>"

    def _repr_png_(self) -> bytes:
        return self.to_bytes("png")

    def _repr_svg_(self) -> str:
        return self.to_bytes("svg").decode("utf-8")


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> None:
    """Lay out a matplotlib Figure and write it as path's format (PNG or SVG), atomically."""
    Figure(fig, dpi=dpi).save(path)
