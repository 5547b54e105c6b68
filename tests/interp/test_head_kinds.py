"""The kinds of head gptlab.interp.heads scores and the ways it ablates one, by name
(gptlab.interp.head_kinds): torch-free (the module imports nothing), the names the scores
come under and the modes ablation takes, which `gptlab heads` offers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from gptlab import GPT, GPTConfig
from gptlab.errors import UsageError
from gptlab.interp import head_kinds
from gptlab.interp.heads import ablate_heads, chance_scores, detection_patterns


def test_torch_free_it_imports_nothing():
    tree = ast.parse(Path(head_kinds.__file__).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_the_scores_come_under_these_names():
    tokens = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
    assert tuple(detection_patterns(tokens)) == head_kinds.SCORE_NAMES
    assert tuple(chance_scores(tokens)) == head_kinds.SCORE_NAMES


def test_ablation_takes_these_modes_and_names_them_when_refusing():
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    idx = torch.zeros(1, 4, dtype=torch.long)
    for mode in head_kinds.ABLATION_MODES:
        with ablate_heads(model, [(0, 0)], mode, reference_idx=idx):
            pass
    with pytest.raises(UsageError, match="expected one of: " + ", ".join(
            head_kinds.ABLATION_MODES)), ablate_heads(model, [(0, 0)], "half"):
        pass


def test_gptlab_heads_offers_the_modes():
    from gptlab.cli.main import build_parser

    heads = build_parser()._subparsers._group_actions[0].choices["heads"]
    [ablate] = [a for a in heads._actions if a.dest == "ablate"]
    assert tuple(ablate.choices) == head_kinds.ABLATION_MODES
