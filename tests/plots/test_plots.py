"""Every figure renders through IPython's display formatter, as Jupyter shows it: a PNG that
decodes and an SVG that parses, drawn here (no script, nothing fetched); it saves as either
with one call; and the CLI's files are the same drawings."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pytest
import torch
from IPython.core.formatters import DisplayFormatter
from PIL import Image

from gptlab.errors import UsageError
from gptlab.plots import interp, positions, training

RECORDS = [{"kind": "train", "step": s, "loss": 4.0 - 0.1 * s, "lr": 1e-3} for s in range(1, 9)]
RECORDS += [{"kind": "eval", "step": s, "train_loss": 4.0 - 0.1 * s, "val_loss": 4.1 - 0.1 * s}
            for s in (0, 4, 8)] + [{"kind": "whole_val", "step": 8, "loss": 3.2}]
G = torch.Generator().manual_seed(0)
PATTERN = torch.softmax(torch.randn(6, 6, generator=G), -1)
SCORES = {name: torch.rand(2, 3, generator=G) for name in ("prev_token", "induction")}

FIGURES = {
    "loss_curves": lambda: training.loss_curves(RECORDS, title="a run"),
    "compare_runs": lambda: training.compare_runs([("a", RECORDS), ("b", RECORDS[:5])]),
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
    "sinusoidal_table": lambda: positions.sinusoidal_table(32, 16),
    "sinusoidal_similarity": lambda: positions.sinusoidal_similarity(32, 16),
    "rope_scores": lambda: positions.rope_scores(8, 10000.0, 16, seed=1),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_each_figure_renders_inline_as_png_and_svg(name, png_magic):
    bundle, _ = DisplayFormatter().format(FIGURES[name]())
    assert {"image/png", "image/svg+xml"} <= set(bundle)
    png, svg = bundle["image/png"], bundle["image/svg+xml"]
    assert png.startswith(png_magic)
    image = Image.open(io.BytesIO(png))
    image.load()  # decodes every pixel: a cut or corrupt PNG raises
    assert image.size[0] > 200 and image.size[1] > 200
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "<script" not in svg and 'href="http' not in svg  # offline: nothing to fetch


def test_save_writes_the_format_of_the_suffix_and_svg_is_reproducible(tmp_path, png_magic):
    fig = FIGURES["rope_scores"]()
    assert fig.save(tmp_path / "a.png").read_bytes().startswith(png_magic)
    assert fig.save(tmp_path / "a.SVG").read_bytes() == fig.to_bytes("svg")
    assert FIGURES["rope_scores"]().to_bytes("svg") == fig.to_bytes("svg")
    with pytest.raises(UsageError, match=r"\.png or \.svg"):
        fig.save(tmp_path / "a.pdf")
    assert not (tmp_path / "a.pdf").exists()


def test_a_runs_loss_png_is_the_loss_curves_figure_of_its_metrics(trained_run):
    records = [json.loads(line) for line in
               (trained_run / "metrics.jsonl").read_text().splitlines()]
    config = json.loads((trained_run / "config.json").read_text())
    title = (f"{trained_run.name}: {config['n_layer']} layers, {config['n_head']} heads, "
             f"n_embd {config['n_embd']}, block {config['block_size']}")
    drawn = training.loss_curves(records, title=title).to_bytes("png")
    assert (trained_run / "loss.png").read_bytes() == drawn


def test_the_position_figures_draw_the_chapters_numbers():
    from gptlab.model.positional import rope_scores, sinusoidal_similarity

    sim = sinusoidal_similarity(32, 16)["similarity"]
    assert torch.allclose(sim.diagonal(), torch.full((32,), 8.0, dtype=torch.float64))
    scores = rope_scores(8, 10000.0, 16, seed=1)["scores"]
    for offset in range(16):  # constant along each diagonal: the offset alone decides
        diagonal = scores.diagonal(offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-5)
