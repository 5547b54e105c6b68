"""The one version of gptlab (gptlab.version): a PEP 440 literal that pyproject.toml reads
without importing the package, written nowhere else, and the package's own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from packaging.version import Version

import gptlab
from gptlab import version

ROOT = Path(__file__).parents[1]


def test_pyproject_reads_the_one_version():
    assert gptlab.__version__ == version.__version__ == "0.1.0"
    assert str(Version(version.__version__)) == version.__version__  # PEP 440, normalised
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]', pyproject, re.M)
    assert 'version = {attr = "gptlab.version.__version__"}' in pyproject
    assert not re.search(r'^version = "', pyproject, re.M)  # written once, in gptlab/version.py


def test_the_version_is_a_literal_setuptools_reads_without_importing():
    tree = ast.parse(Path(version.__file__).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    [assign] = [n for n in tree.body if isinstance(n, ast.Assign)]
    assert ast.literal_eval(assign.value) == version.__version__
