"""The repeated-random-segments task (gptlab.data.synthetic): episodes of a segment of
distinct random symbols written out several times, the same text for the same seed; an
earlier copy predicts the next symbol, the previous symbol does not; prepared once into a
data directory, char-level; bad lengths refused."""

from __future__ import annotations

import re

import pytest

from gptlab.data.prepared import load_data
from gptlab.data.synthetic import SYMBOLS, ensure_repeated_segments, repeated_segments_text
from gptlab.errors import UsageError


def test_the_task_repeats_segments_of_distinct_symbols(tmp_path):
    text = repeated_segments_text(5000, seed=3)
    assert len(text) == 5000 and set(text) <= set(SYMBOLS)
    assert text == repeated_segments_text(5000, seed=3) != repeated_segments_text(5000, seed=4)
    # an earlier copy predicts most symbols (find the previous symbol in the last 24 and
    # copy what followed it: an induction head's rule); the previous symbol alone does not
    induction = sum(text[text.rindex(text[i - 1], i - 25, i - 1) + 1] == text[i]
                    for i in range(25, len(text)) if text[i - 1] in text[i - 25:i - 1])
    assert induction / (len(text) - 25) > 0.6
    successors: dict[str, dict[str, int]] = {}
    for a, b in zip(text, text[1:], strict=False):
        successors.setdefault(a, {}).setdefault(b, 0)
        successors[a][b] += 1
    assert sum(max(s.values()) for s in successors.values()) / (len(text) - 1) < 0.2
    meta, reused = ensure_repeated_segments(tmp_path / "d", 5000, seed=3)
    assert not reused and ensure_repeated_segments(tmp_path / "d", 5000, seed=3)[1]
    data = load_data(tmp_path / "d")
    assert data.vocab_size == len(SYMBOLS) and meta["train_tokens"] + meta["val_tokens"] == 5000
    with pytest.raises(UsageError, match="segment lengths"):
        repeated_segments_text(10, segment=(1, 3))


def test_every_episode_is_one_segment_of_distinct_symbols_repeated():
    # fixed sizes, so the text cuts into its episodes: 4 distinct symbols, three times
    text = repeated_segments_text(12 * 50, seed=1, segment=(4, 4), repeats=(3, 3))
    episodes = re.findall(".{12}", text)
    assert "".join(episodes) == text and len(episodes) == 50
    for episode in episodes:
        segment = episode[:4]
        assert len(set(segment)) == 4 and episode == segment * 3
    assert len(set(episodes)) > 45  # each episode draws afresh


def test_lengths_stay_within_the_bounds_and_the_text_is_cut_to_size():
    text = repeated_segments_text(2000, seed=5, symbols="abcdefgh", segment=(2, 3),
                                  repeats=(1, 1))
    assert len(text) == 2000 and set(text) == set("abcdefgh")
    assert repeated_segments_text(0) == ""
    assert len(repeated_segments_text(7, seed=2)) == 7


@pytest.mark.parametrize("kw, message", [
    ({"segment": (5, 3)}, "segment lengths must be within 2..64"),
    ({"segment": (2, 65)}, "segment lengths must be within 2..64"),
    ({"symbols": "abc", "segment": (2, 4)}, "within 2..3"),
    ({"repeats": (0, 2)}, "repeats must be 1 or more"),
    ({"repeats": (3, 2)}, "repeats must be 1 or more"),
])
def test_bad_lengths_are_refused_in_one_line(kw, message):
    with pytest.raises(UsageError, match=re.escape(message)) as error:
        repeated_segments_text(100, **kw)
    assert "\n" not in str(error.value)


def test_a_folder_holding_another_text_is_not_overwritten(tmp_path):
    meta, _ = ensure_repeated_segments(tmp_path / "d", 3000, seed=1)
    assert meta["val_tokens"] == 300  # a tenth for validation
    with pytest.raises(UsageError, match=r"holds other data \('repeated-segments:3000:1'\)"):
        ensure_repeated_segments(tmp_path / "d", 3000, seed=2)
    assert load_data(tmp_path / "d").split("val").size == 300  # left as it was
