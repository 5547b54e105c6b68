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
    assert lines[0] == ("input: 11 tokens (the last 10 shown: --last N for more); each cell: "
                        "the top next token and its probability")
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


def test_the_next_token_table_is_aligned_with_the_top_token_table(widened_char_model, gptlab,
                                                                  tmp_path, one_thread):
    """Column t of both tables is position t: the top next token after t, then the
    probability of the token that does come after t (it was printed one position to the
    left, under the wrong token). The last position has no next token: '-'."""
    directory, model, tokenizer = widened_char_model
    text = "the cat sat on the mat"
    code, out, _ = gptlab("lens", directory, "--text", text, "--last", 6, "--out",
                          tmp_path / "lens")
    assert code == 0
    lines = out.splitlines()
    grid, table = lines[1:5], lines[7:11]
    assert lines[6].startswith("probability of the actual next token")
    report = json.loads((tmp_path / "lens" / "lens.json").read_text())
    T = len(text)
    cell = 12  # each column is 12 characters wide, then a space
    for i, t in enumerate(range(T - 6, T)):
        column = slice(9 + i * (cell + 1), 9 + (i + 1) * (cell + 1) - 1)
        assert grid[0][column].strip() == text[t].replace(" ", "\u2423")
        expected = "" if t == T - 1 else "->" + text[t + 1].replace(" ", "\u2423")
        assert table[0][column].strip() == expected
        for depth in range(3):
            value = table[1 + depth][column].strip()
            if t == T - 1:
                assert value == "-"
            else:
                assert float(value) == pytest.approx(report["next_token_probs"][depth][t],
                                                     abs=5e-4)


def test_an_out_that_cannot_be_written_is_said_before_any_work(widened_char_model, gptlab):
    """/proc/x passed the check (root may write anywhere, says os.access), so the lens was
    computed and printed before the write failed."""
    directory, *_ = widened_char_model
    code, out, err = gptlab("lens", directory, "--text", "the cat", "--out", "/proc/gptlab-x")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "cannot create directory /proc/gptlab-x" in err


def test_lens_says_when_it_shows_only_the_last_columns(widened_char_model, gptlab, one_thread):
    directory, _, _ = widened_char_model
    code, out, _ = gptlab("lens", directory, "--text", "the cat sat on it")  # 17 tokens
    assert code == 0
    assert out.splitlines()[0] == ("input: 17 tokens (the last 10 shown: --last N for more); "
                                   "each cell: the top next token and its probability")
    code, out, _ = gptlab("lens", directory, "--text", "the cat sat on it", "--last", "17")
    assert out.splitlines()[0] == ("input: 17 tokens; each cell: the top next token and its "
                                   "probability")
