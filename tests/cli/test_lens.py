"""`gptlab lens` on a small saved model: what it prints at each depth is the logit lens the
library computes, PNG and JSON only with --out, bad input in one line."""

from __future__ import annotations

import json

import pytest
import torch

from gptlab.interp.lens import logit_lens


def test_lens_prints_each_depth_and_writes_png_and_json(widened_char_model, tmp_path, gptlab,
                                                        one_thread, png_magic):
    directory, model, tokenizer = widened_char_model
    code, out, _ = gptlab("lens", directory, "--text", "the cat sat", "--out",
                          tmp_path / "lens")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "input: 11 tokens; each cell: the top next token and its probability"
    assert [line.split()[0] for line in lines[2:5]] == ["embed", "block", "block"]
    idx = torch.tensor([tokenizer.encode("the cat sat")])
    rows = logit_lens(model, idx)
    report = json.loads((tmp_path / "lens" / "lens.json").read_text())
    assert report["rows"] == ["embed", "block 0", "block 1"]
    # The last depth's top token at each position is the model's own argmax, in table and JSON.
    assert [r[0] for r in report["top_ids"][-1]] == rows[-1, 0].argmax(-1).tolist()
    last_cells = lines[4].split()[2:]
    expected = tokenizer.decode([int(rows[-1, 0, -1].argmax())]).replace(" ", "\u2423")
    assert last_cells[-2] == expected.replace("\n", "\\n")
    probs = torch.softmax(rows[:, 0, :-1], -1).gather(-1, idx[0, 1:, None].expand(3, -1, 1))
    torch.testing.assert_close(torch.tensor(report["next_token_probs"]), probs[..., 0])
    assert (tmp_path / "lens" / "lens.png").read_bytes().startswith(png_magic)
    assert "wrote" in out
    code, out, _ = gptlab("lens", directory, "--text", "a")
    assert code == 0 and "probability of the actual next token" not in out  # one token


@pytest.mark.parametrize("argv, message", [
    (["lens", "--text", ""], "--text is empty"),
    (["lens", "--text", "x" * 33], "longer than the model's context of 32"),
])
def test_bad_input_is_one_line(refused_on_widened_model, argv, message):
    refused_on_widened_model(*argv, message=message)
