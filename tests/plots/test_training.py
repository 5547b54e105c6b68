"""A run's figures (gptlab.plots.training): the loss curves and several runs compared
render inline as PNG and SVG with their axes and lines; a run's loss.png is the
loss_curves figure of its metrics."""

from __future__ import annotations

import json

import pytest

from gptlab.plots import training

RECORDS = [{"kind": "train", "step": s, "loss": 4.0 - 0.1 * s, "lr": 1e-3} for s in range(1, 9)]
RECORDS += [{"kind": "eval", "step": s, "train_loss": 4.0 - 0.1 * s, "val_loss": 4.1 - 0.1 * s}
            for s in (0, 4, 8)] + [{"kind": "whole_val", "step": 8, "loss": 3.2}]

FIGURES = {
    "loss_curves": lambda: training.loss_curves(RECORDS, title="a run"),
    "compare_runs": lambda: training.compare_runs([("a", RECORDS), ("b", RECORDS[:5])]),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_each_figure_renders_inline_as_png_and_svg(name, renders):
    renders(FIGURES[name]())


def test_the_axes_and_lines_are_labelled(labels):
    [(title, x, y, lines)] = labels(FIGURES["loss_curves"]())
    assert (title, x, lines) == ("a run", "step", ["train (batch)", "train", "val"])
    assert "loss" in y
    [(title, x, _, lines)] = labels(FIGURES["compare_runs"]())
    assert title.startswith("validation loss") and x == "step"
    assert [line for line in lines if not line.startswith("_")] == [
        "a: val", "a: whole val 3.2000"]  # b's records stop before its first evaluation


def test_a_runs_loss_png_is_the_loss_curves_figure_of_its_metrics(trained_run):
    records = [json.loads(line) for line in
               (trained_run / "metrics.jsonl").read_text().splitlines()]
    config = json.loads((trained_run / "config.json").read_text())
    title = (f"{trained_run.name}: {config['n_layer']} layers, {config['n_head']} heads, "
             f"n_embd {config['n_embd']}, block {config['block_size']}")
    drawn = training.loss_curves(records, title=title).to_bytes("png")
    assert (trained_run / "loss.png").read_bytes() == drawn
