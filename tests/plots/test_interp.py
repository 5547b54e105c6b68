"""The looking-inside figures (gptlab.plots.interp: `gptlab heads`, `lens`, `attribute`,
`patch`) render inline as PNG and SVG, titled as asked."""

from __future__ import annotations

import pytest
import torch

from gptlab.plots import interp

G = torch.Generator().manual_seed(0)
PATTERN = torch.softmax(torch.randn(6, 6, generator=G), -1)
SCORES = {name: torch.rand(2, 3, generator=G) for name in ("prev_token", "induction")}

FIGURES = {
    "attention_pattern": lambda: interp.attention_pattern(PATTERN, "L0H1", list("abcdef")),
    "head_scores": lambda: interp.head_scores(SCORES, title="scores"),
    "lens_grid": lambda: interp.lens_grid(torch.rand(3, 4, generator=G),
                                          [list("wxyz")] * 3, ["embed", "block 0", "block 1"],
                                          list("abcd"), title="lens"),
    "attribution_bars": lambda: interp.attribution_bars(["embed", "L0H0", "L0 mlp"],
                                                        [0.5, -1.0, 2.0], title="logit(a)"),
    "patch_grids": lambda: interp.patch_grids(
        {"resid": torch.rand(2, 4, generator=G) - 0.5, "head": torch.rand(2, 2, generator=G)},
        {"resid": list("abcd"), "head": ["H0", "H1"]}, title="patching"),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_each_figure_renders_inline_as_png_and_svg(name, renders):
    renders(FIGURES[name]())


def test_the_pattern_is_labelled_with_its_tokens(labels):
    figure = FIGURES["attention_pattern"]()
    ax = figure.matplotlib.axes[0]
    assert labels(figure)[0][0] == "L0H1"
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcdef")
    assert [t.get_text() for t in ax.get_yticklabels()] == list("abcdef")
