"""The decoding weight formats, by name (gptlab.inference.formats): torch-free (the module
imports nothing); each format has its kernels and its `gptlab sample --weights` choice,
"auto" besides, and anything else is refused naming the choices."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gptlab import GPT, GPTConfig
from gptlab.errors import UsageError
from gptlab.inference import formats, quantize


def test_torch_free_it_imports_nothing():
    tree = ast.parse(Path(formats.__file__).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_every_format_has_kernels_and_auto_is_the_one_extra_choice():
    assert set(quantize.KERNELS) == set(formats.FORMATS)
    assert formats.WEIGHT_CHOICES == (*formats.FORMATS, "auto")
    assert formats.FORMATS[0] == "fp32"  # the reference every other format is checked against


def test_the_cli_offers_every_choice():
    from gptlab.cli.main import build_parser

    sample = build_parser()._subparsers._group_actions[0].choices["sample"]
    [weights] = [a for a in sample._actions if a.dest == "weights"]
    assert tuple(weights.choices) == formats.WEIGHT_CHOICES


def test_another_format_is_refused_naming_the_choices():
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    with pytest.raises(UsageError, match="weights must be one of fp32, fp16, bf16, int8, auto"):
        quantize.quantize(model, "int4")
