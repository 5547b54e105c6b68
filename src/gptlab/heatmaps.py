"""PNG heatmaps of attention patterns and head scores (matplotlib's Agg canvas, no pyplot,
so no global backend is set and nothing needs a display). Every file is written atomically."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from torch import Tensor

from gptlab.io import atomic_write_bytes

# Token labels stop being readable past this many positions; larger patterns go unlabelled.
MAX_LABELLED = 64


def save_pattern(
    pattern: Tensor, path: str | Path, title: str, labels: Sequence[str] | None = None
) -> None:
    """One head's attention pattern (T, T), query rows x key columns, as a PNG."""
    from matplotlib.figure import Figure

    T = pattern.shape[-1]
    size = min(12.0, 3.0 + 0.16 * T)
    fig = Figure(figsize=(size + 1.2, size))
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
    _save(fig, path)


def save_score_grid(scores: dict[str, Tensor], path: str | Path, title: str = "") -> None:
    """Side-by-side (n_layer, n_head) grids, one per score name, as a PNG."""
    from matplotlib.figure import Figure

    n_layer, n_head = next(iter(scores.values())).shape
    panel_w = min(8.0, 1.5 + 0.45 * n_head)
    fig = Figure(figsize=(panel_w * len(scores) + 0.5, min(10.0, 1.8 + 0.4 * n_layer)))
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
    _save(fig, path)


def _save(fig, path: str | Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    atomic_write_bytes(path, buffer.getvalue())
