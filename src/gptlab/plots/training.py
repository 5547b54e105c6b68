"""Loss curves: one run's (its loss.png, redrawn at every evaluation once a step has
trained) and several runs overlaid (`gptlab runs --plot`). Both read metrics.jsonl's
records as they are logged: "train" (a step's batch loss), "eval" (estimated train and val
losses) and "whole_val" (the whole validation split)."""

from __future__ import annotations

from collections.abc import Sequence

from gptlab.plots import Figure, new_figure

YLABEL = "loss (nats / token)"


def _of(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r.get("kind") == kind]


def loss_curves(records: list[dict], title: str = "") -> Figure:
    """Train loss per logged step (thin) and the evaluated train/val losses (markers)."""
    train, evals = _of(records, "train"), _of(records, "eval")
    fig = new_figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    if train:
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], lw=0.8, alpha=0.5,
                color="tab:blue", label="train (batch)")
    if evals:
        es = [r["step"] for r in evals]
        ax.plot(es, [r["train_loss"] for r in evals], "o-", color="tab:blue", label="train")
        ax.plot(es, [r["val_loss"] for r in evals], "o-", color="tab:orange", label="val")
    ax.set_xlabel("step")
    ax.set_ylabel(YLABEL)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if train or evals:
        ax.legend()
    return Figure(fig, dpi=100)


def compare_runs(runs: Sequence[tuple[str, list[dict]]], title: str = "") -> Figure:
    """Several runs' curves on one axis, one colour each: val loss at each evaluation
    (markers), the batch train loss (thin, faint) and the whole-val loss (a star).
    runs: (name, metrics records) pairs."""
    fig = new_figure(figsize=(8, 4.8))
    ax = fig.add_subplot()
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for (name, records), color in zip(runs, colors, strict=True):
        train, evals, whole = (_of(records, k) for k in ("train", "eval", "whole_val"))
        if train:
            ax.plot([r["step"] for r in train], [r["loss"] for r in train], lw=0.6,
                    alpha=0.3, color=color)
        if evals:
            ax.plot([r["step"] for r in evals], [r["val_loss"] for r in evals], "o-",
                    ms=3, color=color, label=f"{name}: val")
        if whole:
            ax.plot([whole[-1]["step"]], [whole[-1]["loss"]], "*", ms=11, color=color,
                    label=f"{name}: whole val {whole[-1]['loss']:.4f}")
    ax.set_xlabel("step")
    ax.set_ylabel(YLABEL)
    ax.set_title(title or "validation loss (thin: the batch train loss)")
    ax.grid(alpha=0.3)
    if runs:
        ax.legend(fontsize=8)
    return Figure(fig, dpi=100)
