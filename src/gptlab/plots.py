"""Every PNG gptlab draws: the loss curve, attention patterns, head-score grids, and the
logit lens, attribution and patching figures of `gptlab lens`, `attribute` and `patch`.

Figures are built on matplotlib's `Figure` directly, not pyplot: no global figure state,
no backend switch (a user's notebook keeps its own), and nothing needs a display. Every
file goes through `save_figure`, one atomic write.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gptlab.files.atomic import atomic_write_bytes

if TYPE_CHECKING:
    from torch import Tensor

# Token labels stop being readable past this many positions; larger patterns go unlabelled.
MAX_LABELLED = 64


def new_figure(**kwargs: Any) -> Any:
    """A matplotlib Figure (kwargs as Figure's: figsize=(w, h) in inches)."""
    # start-up time: matplotlib takes ~0.3 s to import; only a drawing waits for it
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> None:
    """Lay out a matplotlib Figure and write it as a PNG, atomically."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)  # a Figure draws itself with Agg for PNG
    atomic_write_bytes(path, buffer.getvalue())


def plot_losses(records: list[dict], path: str | Path, title: str = "") -> None:
    """Train loss per logged step (thin) and the evaluated train/val losses (markers)."""
    steps = [r["step"] for r in records if r.get("kind") == "train"]
    losses = [r["loss"] for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    fig = new_figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    if steps:
        ax.plot(steps, losses, lw=0.8, alpha=0.5, color="tab:blue", label="train (batch)")
    if evals:
        es = [r["step"] for r in evals]
        ax.plot(es, [r["train_loss"] for r in evals], "o-", color="tab:blue", label="train")
        ax.plot(es, [r["val_loss"] for r in evals], "o-", color="tab:orange", label="val")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats / token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if steps or evals:
        ax.legend()
    save_figure(fig, path, dpi=100)


def save_pattern(
    pattern: Tensor, path: str | Path, title: str, labels: Sequence[str] | None = None
) -> None:
    """One head's attention pattern (T, T), query rows x key columns, as a PNG."""
    T = pattern.shape[-1]
    size = min(12.0, 3.0 + 0.16 * T)
    fig = new_figure(figsize=(size + 1.2, size))
    ax = fig.add_subplot()
    image = ax.imshow(pattern.detach().float().cpu().numpy(), cmap="viridis", vmin=0.0,
                      vmax=1.0, interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("key position (attended to)")
    ax.set_ylabel("query position")
    if labels is not None and T <= MAX_LABELLED:
        ticks = list(range(T))
        font = max(4, min(8, int(400 / T)))
        ax.set_xticks(ticks, [str(s) for s in labels], rotation=90, fontsize=font)
        ax.set_yticks(ticks, [str(s) for s in labels], fontsize=font)
    save_figure(fig, path)


def save_score_grid(scores: dict[str, Tensor], path: str | Path, title: str = "") -> None:
    """Side-by-side (n_layer, n_head) grids, one per score name, as a PNG."""
    n_layer, n_head = next(iter(scores.values())).shape
    panel_w = min(8.0, 1.5 + 0.45 * n_head)
    fig = new_figure(figsize=(panel_w * len(scores) + 0.5, min(10.0, 1.8 + 0.4 * n_layer)))
    for i, (name, grid) in enumerate(scores.items()):
        ax = fig.add_subplot(1, len(scores), i + 1)
        image = ax.imshow(grid.detach().float().cpu().numpy(), cmap="magma", vmin=0.0,
                          vmax=max(1e-6, float(grid.max())), interpolation="nearest",
                          aspect="auto")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        ax.set_title(name.replace("_", " "), fontsize=10)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        if n_head <= 32:
            ax.set_xticks(range(n_head))
        if n_layer <= 32:
            ax.set_yticks(range(n_layer))
    if title:
        fig.suptitle(title, fontsize=10)
    save_figure(fig, path)

def save_lens_grid(probs: Tensor, tokens: Sequence[Sequence[str]], rows: Sequence[str],
                   columns: Sequence[str], path: str | Path, title: str = "") -> None:
    """Depth x position: each cell coloured by the top token's probability and labelled
    with that token. probs (rows, T); tokens[row][t] the top token's text."""
    n_rows, T = probs.shape
    fig = new_figure(figsize=(min(24.0, 2.5 + 0.75 * T), min(14.0, 1.5 + 0.45 * n_rows)))
    ax = fig.add_subplot()
    image = ax.imshow(probs.float().numpy(), cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto",
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="top token's probability")
    if T <= MAX_LABELLED:
        font = max(4, min(8, int(300 / T)))
        for r in range(n_rows):
            for t in range(T):
                dark = float(probs[r, t]) > 0.6
                ax.text(t, r, tokens[r][t], ha="center", va="center", fontsize=font,
                        color="white" if dark else "black")
        ax.set_xticks(range(T), list(columns), rotation=90, fontsize=font)
    ax.set_yticks(range(n_rows), list(rows), fontsize=8)
    ax.set_xlabel("position (input token)")
    ax.set_title(title, fontsize=10)
    save_figure(fig, path)


def save_attribution_bars(labels: Sequence[str], values: Sequence[float], path: str | Path,
                          title: str = "") -> None:
    """One horizontal bar per part of the stream, in the order given."""
    n = len(labels)
    fig = new_figure(figsize=(7.0, min(20.0, 1.2 + 0.22 * n)))
    ax = fig.add_subplot()
    colors = ["tab:blue" if v >= 0 else "tab:red" for v in values]
    ax.barh(range(n), list(values), color=colors)
    ax.set_yticks(range(n), list(labels), fontsize=max(4, min(8, int(600 / max(n, 1)))))
    ax.invert_yaxis()  # the first part on top
    ax.axvline(0.0, color="black", lw=0.6)
    ax.set_xlabel("direct contribution to the logit")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=10)
    save_figure(fig, path)


def save_patch_grids(grids: dict[str, Tensor], columns: dict[str, Sequence[str]],
                     path: str | Path, title: str = "") -> None:
    """Side-by-side (n_layer, columns) sweeps, one per site kind, on one shared colour
    scale centred at zero."""
    top = max(1e-6, max(float(g.abs().max()) for g in grids.values()))
    widths = [g.shape[1] for g in grids.values()]
    n_layer = next(iter(grids.values())).shape[0]
    fig = new_figure(figsize=(min(24.0, 2.0 + sum(1.5 + 0.3 * w for w in widths)),
                          min(10.0, 2.0 + 0.4 * n_layer)))
    for i, (name, grid) in enumerate(grids.items()):
        ax = fig.add_subplot(1, len(grids), i + 1)
        image = ax.imshow(grid.float().numpy(), cmap="RdBu", vmin=-top, vmax=top,
                          aspect="auto", interpolation="nearest")
        labels = list(columns[name])
        if len(labels) <= MAX_LABELLED:
            ax.set_xticks(range(len(labels)), labels, rotation=90,
                          fontsize=max(4, min(8, int(300 / max(len(labels), 1)))))
        if n_layer <= 32:
            ax.set_yticks(range(n_layer))
        ax.set_ylabel("layer")
        ax.set_title(name, fontsize=10)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if title:
        fig.suptitle(title, fontsize=10)
    save_figure(fig, path)


def plot_by_position(series: dict[str, dict], path: str | Path, trained: int,
                     title: str = "") -> None:
    """Loss per position bucket, one line per model or method: each series is a
    PositionScore.to_dict (gptlab.inference.evaluate); the trained length is marked."""
    fig = new_figure(figsize=(7.5, 4.0 + 0.18 * len(series)))
    ax = fig.add_subplot()
    for label, by_position in series.items():
        points = [((b["first"] + b["last"]) / 2, b["loss"]) for b in by_position["buckets"]
                  if b["loss"] is not None]
        ax.plot([x for x, _ in points], [y for _, y in points], "o-", ms=3, lw=1.2,
                label=label)
    _mark_trained(ax, trained)
    ax.set_xlabel("position in the window (tokens of context before the scored one)")
    ax.set_ylabel("loss (nats / token)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    _legend_below(ax, len(series))
    save_figure(fig, path, dpi=100)


def plot_loss_by_length(panels: dict[str, dict[str, list[tuple[int, float]]]],
                        path: str | Path, trained: int, title: str = "") -> None:
    """Loss against the evaluation length, one panel per evaluation mode and one line per
    method ({panel: {method: [(length, loss)]}}), the trained length marked: the figure of
    Press et al. 2021 (their Figure 1) for any set of models."""
    n_lines = max(len(lines) for lines in panels.values())
    fig = new_figure(figsize=(6.0 * len(panels), 4.2 + 0.18 * n_lines))
    for i, (panel, lines) in enumerate(panels.items()):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for label, points in lines.items():
            ax.plot([x for x, _ in points], [y for _, y in points], "o-", ms=3, lw=1.2,
                    label=label)
        _mark_trained(ax, trained)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("evaluation length (tokens)")
        ax.set_ylabel("loss (nats / token)")
        ax.set_title(panel, fontsize=10)
        ax.grid(alpha=0.3)
        _legend_below(ax, len(lines))
    if title:
        fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=100)


def _mark_trained(ax: Any, trained: int) -> None:
    ax.axvline(trained, color="black", lw=0.8, ls="--")
    ax.annotate(f"trained length {trained}", (trained, 1.0), xycoords=("data", "axes fraction"),
                xytext=(3, -12), textcoords="offset points", fontsize=7)


def _legend_below(ax: Any, n: int) -> None:
    """The legend under the plot, two entries a row, so that no line hides behind it."""
    if n:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
                  frameon=False)
