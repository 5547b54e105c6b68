"""The chapter's position figures: the sinusoidal table, its dot products PE . PE^T, and
RoPE's scores of one query and one key moved along the sequence (constant along each
diagonal: they depend on the offset only). The numbers are gptlab.model.positional's, the
same the lab's view 4 draws."""

from __future__ import annotations

from typing import Any

from gptlab.model.positional import rope_scores as rope_score_grid
from gptlab.model.positional import sinusoidal_similarity as similarity
from gptlab.plots import Figure, legend_below, new_figure


def sinusoidal_table(positions: int = 64, d_model: int = 64) -> Figure:
    """PE[pos, i] as a heatmap: fast waves in the first dimensions, slow ones in the last."""
    table = similarity(positions, d_model)["table"]
    fig = new_figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    image = ax.imshow(table.numpy(), cmap="RdBu", vmin=-1, vmax=1, aspect="auto",
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="PE[pos, i]")
    ax.set_xlabel("dimension i (even: sin, odd: cos)")
    ax.set_ylabel("position")
    ax.set_title(f"sinusoidal positions, d_model {d_model}", fontsize=10)
    return Figure(fig)


def sinusoidal_similarity(positions: int = 64, d_model: int = 64) -> Figure:
    """PE[m] . PE[n] for every pair: the same along each diagonal (it depends on |m - n|)."""
    sim = similarity(positions, d_model)["similarity"]
    fig = new_figure(figsize=(5.6, 4.8))
    ax = fig.add_subplot()
    image = ax.imshow(sim.numpy(), cmap="viridis", interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="PE[m] . PE[n]")
    ax.set_xlabel("position n")
    ax.set_ylabel("position m")
    ax.set_title(f"PE . PE^T, d_model {d_model}", fontsize=10)
    return Figure(fig)


def rope_scores(head_dim: int = 16, base: float = 10000.0, positions: int = 32,
                seed: int = 0) -> Figure:
    """RoPE(q, m) . RoPE(k, n) for one seeded q and k at every pair of positions (left),
    and the scores along the first row and a later one against the offset n - m (right):
    the two curves lie on each other."""
    scores = rope_score_grid(head_dim, base, positions, seed)["scores"]
    fig = new_figure(figsize=(10, 4.3))
    ax = fig.add_subplot(1, 2, 1)
    top = float(scores.abs().max())
    image = ax.imshow(scores.numpy(), cmap="RdBu", vmin=-top, vmax=top,
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="score")
    ax.set_xlabel("key position n")
    ax.set_ylabel("query position m")
    ax.set_title(f"RoPE(q, m) . RoPE(k, n), head_dim {head_dim}, base {base:g}", fontsize=10)
    ax = fig.add_subplot(1, 2, 2)
    later = positions // 2
    ax.plot(range(positions), scores[0].numpy(), "o-", ms=3, label="query at m = 0")
    ax.plot(range(positions - later), scores[later, later:].numpy(), "x--", ms=5,
            label=f"query at m = {later}")
    ax.set_xlabel("offset n - m")
    ax.set_ylabel("score")
    ax.set_title("the same offset, the same score", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return Figure(fig)


# ----------------------------------------------- past the training length


def loss_by_position(series: dict[str, dict], trained: int, title: str = "") -> Figure:
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
    legend_below(ax, len(series))
    return Figure(fig, dpi=100)


def loss_by_length(panels: dict[str, dict[str, list[tuple[int, float]]]], trained: int,
                   title: str = "") -> Figure:
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
        legend_below(ax, len(lines))
    if title:
        fig.suptitle(title, fontsize=10)
    return Figure(fig, dpi=100)


def _mark_trained(ax: Any, trained: int) -> None:
    ax.axvline(trained, color="black", lw=0.8, ls="--")
    ax.annotate(f"trained length {trained}", (trained, 1.0), xycoords=("data", "axes fraction"),
                xytext=(3, -12), textcoords="offset points", fontsize=7)
