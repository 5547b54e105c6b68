"""The loss curve as a PNG, drawn from metrics.jsonl records (matplotlib, no display)."""

from __future__ import annotations

from pathlib import Path

from gptlab.io import atomic_path


def plot_losses(records: list[dict], path: str | Path, title: str = "") -> None:
    """Train loss per logged step (thin) and the evaluated train/val losses (markers)."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed; a no-op if already Agg
    from matplotlib.figure import Figure  # not pyplot: no global figure state

    steps = [r["step"] for r in records if r.get("kind") == "train"]
    losses = [r["loss"] for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    fig = Figure(figsize=(7, 4.2), dpi=100)
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
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
