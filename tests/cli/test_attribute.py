"""`gptlab attribute` on a small saved model: the parts it writes sum to the logit
(difference) it prints, and bad input is one line."""

from __future__ import annotations

import json

import pytest
import torch


def test_attribute_parts_sum_to_the_printed_logit(widened_char_model, tmp_path, gptlab,
                                                  one_thread, png_magic):
    directory, model, tokenizer = widened_char_model
    code, out, _ = gptlab("attribute", directory, "--text", "the cat", "--target", "s",
                          "--versus", "id:0", "--out", tmp_path / "attr")
    assert code == 0
    idx = torch.tensor([tokenizer.encode("the cat")])
    with torch.no_grad():
        logits, _ = model(idx)
    s = tokenizer.encode("s")[0]
    expected = float(logits[0, -1, s] - logits[0, -1, 0])
    first = out.splitlines()[0]
    assert first.startswith("logit(s) - logit(\\n) after 'the cat' (position 6): ")
    assert float(first.rsplit(" ", 1)[1]) == pytest.approx(expected, abs=1e-4)
    report = json.loads((tmp_path / "attr" / "attribution.json").read_text())
    assert sum(report["parts"].values()) == pytest.approx(expected, abs=1e-5)
    assert list(report["parts"])[:3] == ["embed", "pos_embed", "L0H0"]
    assert (tmp_path / "attr" / "attribution.png").read_bytes().startswith(png_magic)


@pytest.mark.parametrize("argv, message", [
    (["attribute", "--text", "the", "--target", "id:30"],
     "--target id:30 is outside the vocabulary (0..29)"),
    (["attribute", "--text", "the", "--target", "id:-1"], "outside the vocabulary"),
    (["attribute", "--text", "the", "--target", "ab"], "is 2 tokens, not one"),
    (["attribute", "--text", "the", "--target", "Q"], "not in the vocabulary: 'Q'"),
    (["attribute", "--text", "the", "--target", "a", "--versus", "a"], "the same token"),
    (["attribute", "--text", "the", "--target", "a", "--position", "3"],
     "--position 3 is out of range for 3 tokens"),
])
def test_bad_input_is_one_line(refused_on_widened_model, argv, message):
    refused_on_widened_model(*argv, message=message)


def test_the_text_is_shown_as_typed(widened_char_model, tmp_path, gptlab):
    """A newline in --text (typed as \\n, or as a real newline) is shown as \\n once: it was
    'ab\\\\ncd', escaped twice."""
    directory, *_ = widened_char_model
    (tmp_path / "t.txt").write_text("ab\ncd")
    for argv in (["--text", "ab\ncd"], ["--text", "ab\\ncd"],
                 ["--text-file", tmp_path / "t.txt"]):
        code, out, err = gptlab("attribute", directory, *argv, "--target", "a")
        assert code == 0, err
        assert out.startswith("logit(a) after 'ab\\ncd' (position 4): "), out
