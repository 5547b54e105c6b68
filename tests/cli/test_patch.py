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


def test_the_issues_close_metrics_are_too_close_and_a_wide_gap_is_not():
    from gptlab.cli.patch import too_close

    warning = too_close(9.4957, 9.6608, "logit-diff")  # its shares ran from -1.5 to +1.8
    assert warning.startswith("clean and corrupted differ by 0.1651, 1.7% of the metric's "
                              "size (9.6608): each share restored divides by that difference")
    assert too_close(3.0, -2.0, "logit-diff") is None
    assert too_close(0.05, 0.01, "prob").startswith("clean and corrupted differ by 0.0400, "
                                                    "4.0% of the metric's size (a probability)")
    assert too_close(0.9, 0.1, "prob") is None


def test_patch_warns_on_stderr_where_the_gap_is_too_close(widened_char_model, gptlab,
                                                          one_thread):
    """Every target letter on the same texts: the warning comes exactly where too_close
    says, and the tables still print."""
    from gptlab.cli.patch import too_close

    directory, *_ = widened_char_model
    seen = set()
    for target in "abcdefghijklmnopqrstuvwxyz":
        code, out, err = gptlab("patch", directory, "--clean", "the cat", "--corrupt",
                                "the car", "--metric", "logit", "--target", target,
                                "--sweep", "resid")
        if code != 0:
            continue  # the same metric clean and corrupted: refused, tested above
        clean, corrupt = (float(v) for v in out.splitlines()[1].replace(",", "").split()[1::2])
        warned = err.startswith("gptlab patch: warning: clean and corrupted differ by ")
        assert warned == (too_close(clean, corrupt, "logit") is not None), (target, err)
        assert "share of the gap restored" in out
        seen.add(warned)
    assert seen == {True, False}
