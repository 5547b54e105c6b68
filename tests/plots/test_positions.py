"""The position figures (gptlab.plots.positions): the chapter's tables and scores render
inline as PNG and SVG and draw the chapter's own numbers (gptlab.model.positional); past the
training length, the trained length is marked and a bucket without a loss left out."""

from __future__ import annotations

import pytest
import torch

from gptlab.plots import positions

BUCKETS = {"buckets": [{"first": 0, "last": 7, "loss": 2.0},
                       {"first": 8, "last": 15, "loss": None},
                       {"first": 16, "last": 31, "loss": 2.5}]}
FIGURES = {
    "sinusoidal_table": lambda: positions.sinusoidal_table(32, 16),
    "sinusoidal_similarity": lambda: positions.sinusoidal_similarity(32, 16),
    "rope_scores": lambda: positions.rope_scores(8, 10000.0, 16, seed=1),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_each_figure_renders_inline_as_png_and_svg(name, renders):
    renders(FIGURES[name]())


def test_the_position_figures_draw_the_chapters_numbers():
    from gptlab.model.positional import rope_scores, sinusoidal_similarity

    sim = sinusoidal_similarity(32, 16)["similarity"]
    assert torch.allclose(sim.diagonal(), torch.full((32,), 8.0, dtype=torch.float64))
    scores = rope_scores(8, 10000.0, 16, seed=1)["scores"]
    for offset in range(16):  # constant along each diagonal: the offset alone decides
        diagonal = scores.diagonal(offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-5)


def test_past_the_training_length_the_trained_length_is_marked(labels):
    figure = positions.loss_by_position({"alibi": BUCKETS}, trained=16, title="by position")
    [(title, _, y, lines)] = labels(figure)
    assert title == "by position" and y == "loss (nats / token)"
    alibi = figure.matplotlib.axes[0].get_lines()[0]
    assert list(alibi.get_xdata()) == [3.5, 23.5]  # a bucket without a loss left out
    assert "trained length 16" in [t.get_text() for t in figure.matplotlib.axes[0].texts]
    panels = labels(positions.loss_by_length(
        {"sliding": {"rope": [(16, 2.0), (64, 3.5)], "alibi": [(16, 2.1), (64, 2.2)]},
         "whole": {"rope": [(16, 2.0), (64, 4.0)]}}, trained=16))
    assert [(p[0], p[1]) for p in panels] == [("sliding", "evaluation length (tokens)"),
                                              ("whole", "evaluation length (tokens)")]
    assert [line for line in panels[0][3] if not line.startswith("_")] == ["rope", "alibi"]
