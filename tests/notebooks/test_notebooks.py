"""The notebooks as files (nbmake runs them in the slow tier: notebooks/conftest.py): stored
without outputs, the same cells in quick and full mode, the library's public API only, a
claim checked in each, and each listed in the docs (docs/notebooks.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# What a notebook may import from gptlab: the package and the library's subpackages, never
# the CLI, the lab or the repository's tests, tools and benchmarks.
PUBLIC = ("gptlab.model", "gptlab.interp", "gptlab.plots", "gptlab.inference", "gptlab.data",
          "gptlab.training.runs", "gptlab.training.config", "gptlab.errors")
PRIVATE_TOP = {"tests", "tools", "bench"}


def test_the_six_chapters_are_there():
    assert [p.stem for p in NOTEBOOKS] == [
        "01-attention-by-hand", "02-multi-head-attention", "03-positions",
        "04-block-and-counting", "05-train-and-sample", "06-look-inside"]


def code_of(nb) -> str:
    """The code cells as Python: IPython's ! and % lines dropped."""
    lines = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            lines += [line for line in cell.source.splitlines()
                      if not line.lstrip().startswith(("!", "%"))]
    return "\n".join(lines)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs_in_one_mode_on_the_public_api(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, path.name
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    source = code_of(nb)
    assert 'os.environ.get("GPTLAB_NOTEBOOK_QUICK") == "1"' in source
    tree = ast.parse(source)
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module)
            assert not any(a.name.startswith("_") for a in node.names), path.name
    for module in modules:
        assert module.split(".")[0] not in PRIVATE_TOP, (path.name, module)
        if module.startswith("gptlab"):
            assert module == "gptlab" or module.startswith(PUBLIC), (path.name, module)
    assert any(isinstance(node, ast.Assert) for node in ast.walk(tree)), path.name


def test_the_docs_list_each_notebook():
    page = (ROOT / "docs/notebooks.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert f"notebooks/{path.name}" in page, path.name
