"""Shared by the figures' tests: what every figure must do inline, as Jupyter shows it."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest
from IPython.core.formatters import DisplayFormatter
from PIL import Image


@pytest.fixture(scope="session")
def renders(png_magic):
    """renders(figure): it renders through IPython's display formatter as a PNG that decodes
    (larger than 200 x 200) and an SVG that parses, drawn here: no script, nothing fetched."""
    def check(figure) -> None:
        bundle, _ = DisplayFormatter().format(figure)
        assert {"image/png", "image/svg+xml"} <= set(bundle)
        png, svg = bundle["image/png"], bundle["image/svg+xml"]
        assert png.startswith(png_magic)
        image = Image.open(io.BytesIO(png))
        image.load()  # decodes every pixel: a cut or corrupt PNG raises
        assert image.size[0] > 200 and image.size[1] > 200
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert "<script" not in svg and 'href="http' not in svg  # offline: nothing to fetch

    return check


@pytest.fixture(scope="session")
def labels():
    """labels(figure) -> [(title, xlabel, ylabel, [line labels])] of each of its axes."""
    def of(figure) -> list[tuple[str, str, str, list[str]]]:
        return [(ax.get_title(), ax.get_xlabel(), ax.get_ylabel(),
                 [line.get_label() for line in ax.get_lines()])
                for ax in figure.matplotlib.axes]

    return of
