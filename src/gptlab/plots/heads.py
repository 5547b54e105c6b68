"""The figures of `gptlab experiment heads` (pruning heads, Michel et al. 2019) and `gptlab
experiment phase` (the induction-head phase change, Olsson et al. 2022)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gptlab.plots import Figure, new_figure

Points = Sequence[tuple[float, float]]


def pruning_curves(curves: dict[str, dict[str, Points]], single: dict[str, Sequence[float]],
                   threshold: float, title: str = "") -> Figure:
    """Left: loss against the fraction of heads pruned, {order: {model: [(fraction,
    loss)]}}, a colour per order and a line style per model. Right: each single head's
    removal, the relative loss change sorted, one line per {model: [change]}, the
    threshold shaded."""
    fig = new_figure(figsize=(11, 4.6))
    ax = fig.add_subplot(1, 2, 1)
    styles = ("o-", "s--", "^:", "d-.")
    for i, (order, models) in enumerate(curves.items()):
        for j, (model, points) in enumerate(models.items()):
            ax.plot([100 * f for f, _ in points], [v for _, v in points],
                    styles[j % len(styles)], color=f"C{i}", ms=3, lw=1.2,
                    label=f"{order}, {model}")
    _finish_axes(ax, "heads pruned (%)", "validation loss (nats / token)",
                 "heads pruned in three orders", legend=7)
    ax = fig.add_subplot(1, 2, 2)
    for label, changes in single.items():
        values = sorted(100 * c for c in changes)
        ax.plot(range(1, len(values) + 1), values, "o-", ms=3, lw=1.0, label=label)
    ax.axhspan(-100 * threshold, 100 * threshold, color="0.85", zorder=0,
               label=f"within {100 * threshold:g}%")
    _finish_axes(ax, "heads, sorted by the change their removal makes",
                 "loss change when removed alone (%)", "one head at a time")
    if title:
        fig.suptitle(title, fontsize=10)
    return Figure(fig, dpi=100)


def _finish_axes(ax: Any, xlabel: str, ylabel: str, title: str, legend: int | None = 8) -> None:
    """Axis labels, a small title, a light grid and (legend: its font size) the legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if legend is not None:
        ax.legend(fontsize=legend)


def phase_curves(series: dict[str, dict[str, Any]], threshold: float, title: str = "") -> Figure:
    """Four panels over training steps, a line per run ({run: {"loss", "induction",
    "previous_token", "icl": [(step, value)], "crossing": step or None, "layers": n}}):
    the training loss, the best head's induction score (the threshold dotted, each run's
    crossing marked), the best previous-token score and the in-context-learning score.
    One-layer runs dashed."""
    fig = new_figure(figsize=(11, 7.5))
    panels = (("loss", "training loss (nats / token)"),
              ("induction", "best head's induction score"),
              ("previous_token", "best head's previous-token score"),
              ("icl", "ICL score: late-token loss - early-token loss"))
    for p, (key, label) in enumerate(panels):
        ax = fig.add_subplot(2, 2, p + 1)
        for i, (run, data) in enumerate(series.items()):
            points = data[key]
            style = "--" if data["layers"] == 1 else "-"
            ax.plot([s for s, _ in points], [v for _, v in points], style, color=f"C{i}",
                    lw=1.2, label=run)
            if key == "induction" and data["crossing"] is not None:
                ax.axvline(data["crossing"], color=f"C{i}", lw=0.8, alpha=0.6)
        if key == "induction":
            ax.axhline(threshold, color="0.3", ls=":", lw=1.0, label="5x chance")
        _finish_axes(ax, "step", label, label, legend=7 if p == 1 else None)
    if title:
        fig.suptitle(title, fontsize=10)
    return Figure(fig, dpi=100)
