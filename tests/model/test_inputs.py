"""What the model is handed besides its weights (gptlab.model.inputs): token ids checked
with one clear line, the GPT found inside its wrappers, and the attention mask of a chunk
(causal, after a cache, around padding) and its ALiBi form, against masks written out."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gptlab.errors import UsageError
from gptlab.model.inputs import attention_mask_for, bias_with_mask, check_token_ids, unwrap

CPU = torch.device("cpu")


def test_token_ids_are_a_2d_integer_tensor():
    check_token_ids(torch.zeros(2, 3, dtype=torch.long))
    check_token_ids(torch.zeros(1, 1, dtype=torch.int32))
    for idx, message in [([[1, 2]], "got list"), (torch.zeros(3, dtype=torch.long),
                                                   r"got shape \(3,\) \(a 1-D prompt"),
                         (torch.zeros(1, 2, 3, dtype=torch.long), r"got shape \(1, 2, 3\)"),
                         (torch.zeros(1, 3), "dtype torch.float32"),
                         (torch.zeros(1, 3, dtype=torch.bool), "dtype torch.bool"),
                         (torch.zeros(1, 3, dtype=torch.complex64), "complex64")]:
        with pytest.raises(UsageError, match=message) as error:
            check_token_ids(idx)
        assert str(error.value).startswith("idx must") and "\n" not in str(error.value)


def test_unwrap_finds_the_model_inside_any_nesting_of_wrappers():
    model = nn.Linear(2, 2)
    ddp, compiled = nn.Module(), nn.Module()
    ddp.module = model  # what DistributedDataParallel looks like
    compiled._orig_mod = ddp  # and torch.compile
    assert unwrap(compiled) is model and unwrap(ddp) is model and unwrap(model) is model


def test_without_a_mask_the_fused_kernel_builds_the_causal_one():
    assert attention_mask_for(4, 0, None, CPU) == (None, True)
    assert attention_mask_for(1, 5, None, CPU) == (None, False)  # one new token sees all
    allowed, causal = attention_mask_for(2, 3, None, CPU)  # two new after three cached
    assert not causal and allowed.tolist() == [[True, True, True, True, False],
                                               [True, True, True, True, True]]


def test_padding_is_masked_and_a_padding_query_sees_itself():
    pad = torch.tensor([[0, 1, 1], [1, 1, 1]])  # row 0 left-padded
    allowed, causal = attention_mask_for(3, 0, pad, CPU)
    assert not causal and allowed.shape == (2, 1, 3, 3)
    assert allowed[0, 0].tolist() == [[True, False, False],  # padding: itself only
                                      [False, True, False], [False, True, True]]
    assert allowed[1, 0].tolist() == torch.tril(torch.ones(3, 3, dtype=torch.bool)).tolist()


def test_the_mask_folds_into_alibis_bias_as_minus_infinity():
    bias = torch.arange(2 * 3 * 3, dtype=torch.float32).reshape(2, 3, 3)
    folded = bias_with_mask(bias, None, True, 3, 0)
    minus = float("-inf")
    assert folded[1].tolist() == [[9.0, minus, minus], [12.0, 13.0, minus],
                                  [15.0, 16.0, 17.0]]
    assert bias_with_mask(bias, None, False, 1, 2) is bias  # nothing masked: the bias itself
    allowed = torch.tensor([[True, False, True]] * 3)
    assert torch.isinf(bias_with_mask(bias, allowed, False, 3, 0)[:, :, 1]).all()
