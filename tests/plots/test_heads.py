"""The figures of `gptlab experiment heads` and `phase` (gptlab.plots.heads): pruning curves
(a colour per order, a style per model, each head alone sorted, the threshold shaded) and
the phase change's four panels (one-layer runs dashed, each crossing marked); both render
inline as PNG and SVG."""

from __future__ import annotations

from gptlab.plots.heads import phase_curves, pruning_curves


def test_pruning_curves(labels, renders):
    figure = pruning_curves(
        {"score": {"small": [(0.0, 2.0), (0.5, 2.4)], "large": [(0.0, 1.8), (0.5, 2.0)]},
         "random": {"small": [(0.0, 2.0), (0.5, 3.0)]}},
        {"small": [0.05, -0.01, 0.2], "large": [0.0, 0.01]}, threshold=0.02, title="pruning")
    (left_title, left_x, _, left), (_, _, right_y, right) = labels(figure)
    assert left_title == "heads pruned in three orders" and left_x == "heads pruned (%)"
    assert left == ["score, small", "score, large", "random, small"]
    styles = [line.get_linestyle() for line in figure.matplotlib.axes[0].get_lines()]
    assert styles[0] != styles[1] and styles[0] == styles[2]  # a style per model
    assert list(figure.matplotlib.axes[0].get_lines()[0].get_xdata()) == [0.0, 50.0]  # in %
    assert right == ["small", "large"] and "loss change" in right_y
    assert list(figure.matplotlib.axes[1].get_lines()[0].get_ydata()) == [-1.0, 5.0, 20.0]
    assert "within 2%" in [t.get_text() for t in figure.matplotlib.axes[1].get_legend().texts]
    renders(figure)


def test_phase_curves(labels):
    run = {"loss": [(0, 4.0), (50, 2.0)], "induction": [(0, 0.1), (50, 0.6)],
           "previous_token": [(0, 0.2), (50, 0.3)], "icl": [(0, 0.0), (50, -0.4)]}
    figure = phase_curves({"L2-s1": {**run, "crossing": 50, "layers": 2},
                           "L1-s1": {**run, "crossing": None, "layers": 1}}, threshold=0.25)
    panels = labels(figure)
    assert len(panels) == 4 and all(x == "step" for _, x, _, _ in panels)
    assert panels[1][1:3] == ("step", "best head's induction score")
    assert [line for line in panels[1][3] if not line.startswith("_")] == [
        "L2-s1", "L1-s1", "5x chance"]
    two, crossing, one, threshold = figure.matplotlib.axes[1].get_lines()
    assert (two.get_linestyle(), one.get_linestyle()) == ("-", "--")  # one layer dashed
    assert list(crossing.get_xdata()) == [50, 50] and list(threshold.get_ydata()) == [0.25] * 2
