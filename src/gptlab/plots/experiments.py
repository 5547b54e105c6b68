"""The experiments' figures (gptlab.experiments): panels of lines, each panel its own axes
and scale, for any measurement against any x (a layer, a step, a head dimension)."""

from __future__ import annotations

import math
from typing import Any

from gptlab.plots import Figure, legend_below, new_figure


def line_panels(panels: list[dict[str, Any]], title: str = "") -> Figure:
    """One panel per dict, side by side: {"title", "xlabel", "ylabel", "lines": {label:
    [(x, y), ...]}, "log_y": bool (optional), "log_x": bool (optional)}. Points whose y is
    not finite are left out (a diverged run's line stops where it did)."""
    n_lines = max((len(p["lines"]) for p in panels), default=0)
    fig = new_figure(figsize=(5.2 * len(panels), 4.0 + 0.16 * n_lines))
    for i, panel in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for label, points in panel["lines"].items():
            kept = [(x, y) for x, y in points if y is not None and math.isfinite(y)]
            ax.plot([x for x, _ in kept], [y for _, y in kept], "o-", ms=3, lw=1.2,
                    label=label)
        if panel.get("log_y"):
            ax.set_yscale("log")
        if panel.get("log_x"):
            ax.set_xscale("log", base=2)
        ax.set_xlabel(panel["xlabel"])
        ax.set_ylabel(panel["ylabel"])
        ax.set_title(panel["title"], fontsize=10)
        ax.grid(alpha=0.3)
        legend_below(ax, len(panel["lines"]))
    if title:
        fig.suptitle(title, fontsize=10)
    return Figure(fig, dpi=100)
