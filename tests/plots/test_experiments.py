"""The experiments' panels of lines (gptlab.plots.experiments.line_panels): one axes per
panel with its labels and scales, a line per label, points without a finite y left out
(a diverged run's line stops where it did); renders inline as PNG and SVG."""

from __future__ import annotations

import math

from gptlab.plots.experiments import line_panels

PANELS = [
    {"title": "loss", "xlabel": "depth", "ylabel": "val loss", "log_y": True,
     "lines": {"pre": [(1, 2.0), (2, 1.5)], "post": [(1, 2.2), (2, math.nan), (3, None)]}},
    {"title": "grad", "xlabel": "d_k", "ylabel": "norm", "log_x": True,
     "lines": {"scaled": [(8, 1.0), (32, 1.1)]}},
]


def test_one_axes_per_panel_with_its_labels_and_scales(labels, renders):
    figure = line_panels(PANELS, title="norms")
    assert labels(figure) == [("loss", "depth", "val loss", ["pre", "post"]),
                              ("grad", "d_k", "norm", ["scaled"])]
    first, second = figure.matplotlib.axes
    assert (first.get_yscale(), first.get_xscale()) == ("log", "linear")
    assert (second.get_xscale(), second.get_yscale()) == ("log", "linear")
    assert figure.matplotlib._suptitle.get_text() == "norms"
    post = first.get_lines()[1]  # points without a finite value left out
    assert list(post.get_xdata()) == [1] and list(post.get_ydata()) == [2.2]
    renders(figure)
