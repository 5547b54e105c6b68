"""A figure (gptlab.plots.Figure) saves as PNG or SVG with one call, by the suffix, and the
SVG is the same bytes every time; any other suffix is refused and nothing written. Each
module's figures: tests/plots/test_<module>.py."""

from __future__ import annotations

import pytest

from gptlab.errors import UsageError
from gptlab.plots import positions


def test_save_writes_the_format_of_the_suffix_and_svg_is_reproducible(tmp_path, png_magic):
    fig = positions.rope_scores(8, 10000.0, 16, seed=1)
    assert fig.save(tmp_path / "a.png").read_bytes().startswith(png_magic)
    assert fig.save(tmp_path / "a.SVG").read_bytes() == fig.to_bytes("svg")
    assert positions.rope_scores(8, 10000.0, 16, seed=1).to_bytes("svg") == fig.to_bytes("svg")
    with pytest.raises(UsageError, match=r"\.png or \.svg"):
        fig.save(tmp_path / "a.pdf")
    assert not (tmp_path / "a.pdf").exists()
