"""`gptlab patch` on a small saved model: restoring the one token that differs restores the
whole gap, and bad input is one line."""

from __future__ import annotations

import json

import pytest


def test_patch_restores_all_of_the_gap_where_it_should(widened_char_model, tmp_path, gptlab,
                                                       one_thread, png_magic):
    directory, *_ = widened_char_model
    # The texts differ only in the last token: its stream at block 0 carries everything.
    code, out, _ = gptlab("patch", directory, "--clean", "the cat", "--corrupt",
                          "the car", "--target", "s", "--versus", "e", "--out",
                          tmp_path / "patch")
    assert code == 0
    report = json.loads((tmp_path / "patch" / "patch.json").read_text())
    resid = report["restored"]["resid"]
    assert resid[0][6] == pytest.approx(1.0, abs=1e-6)
    assert all(v == pytest.approx(0.0, abs=1e-6) for v in resid[0][:6])  # nothing differs
    assert len(report["restored"]["head"]) == 2 and len(report["restored"]["head"][0]) == 2
    assert "residual stream (block input): share of the gap restored" in out
    assert (tmp_path / "patch" / "patch.png").read_bytes().startswith(png_magic)


@pytest.mark.parametrize("argv, message", [
    (["patch", "--clean", "the cat", "--corrupt", "the cats"],
     "--clean is 7 tokens and --corrupt 8: they must be the same length"),
    (["patch", "--clean", "the cat", "--corrupt", "the cat", "--metric", "logit"],
     "give the same metric"),
    (["patch", "--clean", "ab", "--corrupt", "ab", "--target", "c", "--versus", "c"],
     "target and versus are the same token"),
    (["patch", "--clean", "ab", "--corrupt", "cd", "--metric", "prob", "--versus", "a"],
     "--versus is for --metric logit-diff"),
])
def test_bad_input_is_one_line(refused_on_widened_model, argv, message):
    refused_on_widened_model(*argv, message=message)
