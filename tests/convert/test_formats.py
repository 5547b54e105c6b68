"""What the converters write, by name (gptlab.convert.formats): torch-free (the module
imports nothing), the hints name extras pyproject.toml defines, and the GGUF weight types
are the ones `gptlab convert --to-gguf` offers and gguf_export accepts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gptlab import GPT, GPTConfig
from gptlab.convert import formats
from gptlab.convert.gguf_export import write_gguf
from gptlab.errors import UsageError

PYPROJECT = (Path(__file__).parents[2] / "pyproject.toml").read_text()


def test_torch_free_it_imports_nothing():
    tree = ast.parse(Path(formats.__file__).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize("hint, package", [(formats.HF_HINT, "transformers"),
                                           (formats.GGUF_HINT, "gguf")])
def test_each_hint_installs_an_extra_that_holds_the_package(hint, package):
    extra = re.fullmatch(r"pip install 'gptlab\[(\w+)\]'", hint).group(1)
    extras = PYPROJECT.split("[project.optional-dependencies]")[1].split("\n[")[0]
    assert re.search(rf'^{extra} = \["{package}\b', extras, re.M)


def test_the_cli_offers_the_gguf_types_and_the_exporter_refuses_others(tmp_path):
    from gptlab.cli.main import build_parser

    convert = build_parser()._subparsers._group_actions[0].choices["convert"]
    offered = [a.choices for a in convert._actions if a.choices and "f16" in a.choices]
    assert [tuple(c) for c in offered] == [formats.GGUF_DTYPES]
    pytest.importorskip("gguf")  # the gguf extra: the exporter needs it before any check
    with pytest.raises(UsageError, match="'q4_0'; expected one of: f32, f16, q8_0"):
        write_gguf(GPT(GPTConfig.from_preset("tiny-gpt2")), None, tmp_path / "x.gguf",
                   dtype="q4_0")
    assert not (tmp_path / "x.gguf").exists()
