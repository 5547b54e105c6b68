"""The figures of `gptlab heads`, `lens`, `attribute` and `patch`: an attention pattern,
head-score grids, the logit lens grid, attribution bars and patching sweeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gptlab.plots import MAX_LABELLED, Figure, new_figure

if TYPE_CHECKING:
    from torch import Tensor


def attention_pattern(pattern: Tensor, title: str = "",
                      labels: Sequence[str] | None = None) -> Figure:
    """One head's attention pattern (T, T), query rows x key columns."""
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
    return Figure(fig)


def head_scores(scores: dict[str, Tensor], title: str = "") -> Figure:
    """Side-by-side (n_layer, n_head) grids, one per score name (gptlab.interp.heads)."""
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
    return Figure(fig)


def lens_grid(probs: Tensor, tokens: Sequence[Sequence[str]], rows: Sequence[str],
              columns: Sequence[str], title: str = "") -> Figure:
    """Depth x position: each cell coloured by the top token's probability and labelled
    with that token. `probs` (rows, T); `tokens[row][t]` the top token's text."""
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
    return Figure(fig)


def attribution_bars(labels: Sequence[str], values: Sequence[float], title: str = "") -> Figure:
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
    return Figure(fig)


def patch_grids(grids: dict[str, Tensor], columns: dict[str, Sequence[str]],
                title: str = "") -> Figure:
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
    return Figure(fig)
