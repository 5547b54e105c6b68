"""Dyck-2 (gptlab.data.dyck): every word is balanced over two kinds of brackets within the
depth bound, the same text for the same seed; each closing bracket's match agrees with a
stack-based reference, the nearest-opening rules with a scan; prepared once into a data
directory, char-level; bad arguments refused in one line."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gptlab.data import dyck
from gptlab.data.prepared import load_data
from gptlab.errors import UsageError

PAIRS = {")": "(", "]": "["}


def balanced_within(word: str, max_depth: int) -> bool:
    """The reference: a stack of open brackets, each closing one popping its own kind."""
    stack: list[str] = []
    for symbol in word:
        if symbol in "([":
            stack.append(symbol)
            if len(stack) > max_depth:
                return False
        elif not stack or stack.pop() != PAIRS[symbol]:
            return False
    return not stack


def reference_matches(text: str) -> list[int]:
    """The reference by counting: a closing bracket's match is the nearest j before it
    (within its word) where text[j..c] holds as many openings as closings; -1 if there is
    none or it is of the other kind."""
    out = [-1] * len(text)
    for c, symbol in enumerate(text):
        if symbol not in PAIRS:
            continue
        height = 0
        for j in range(c, -1, -1):
            if text[j] == "\n":
                break
            height += 1 if text[j] in PAIRS else -1
            if height == 0:
                out[c] = j if text[j] == PAIRS[symbol] else -1
                break
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_chars=st.integers(0, 400),
       low=st.integers(2, 12), extra=st.integers(0, 20), max_depth=st.integers(1, 6))
def test_every_word_is_balanced_within_the_depth_bound(seed, n_chars, low, extra, max_depth):
    text = dyck.dyck_text(n_chars, seed, length=(low, low + extra), max_depth=max_depth)
    assert len(text) == n_chars and set(text) <= set(dyck.SYMBOLS)
    words = text.split("\n")
    for word in words[:-1]:  # the last one is cut where n_chars ends
        assert balanced_within(word, max_depth), word
        assert low - low % 2 <= len(word) <= low + extra
    assert max(dyck.depths(text), default=0) <= max_depth
    assert dyck.matching_openings(text) == reference_matches(text)
    top = dyck.innermost_open(text)
    for c, opening in enumerate(dyck.matching_openings(text)):
        if opening != dyck.NONE:
            assert top[c - 1] == opening  # the top of the stack is what closes next


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), length=st.integers(1, 20).map(lambda n: 2 * n),
       max_depth=st.integers(1, 8))
def test_a_word_has_exactly_its_length_and_every_closing_bracket_its_match(seed, length,
                                                                           max_depth):
    word = dyck.dyck_word(random.Random(seed), length, max_depth)
    assert len(word) == length and balanced_within(word, max_depth)
    match = dyck.matching_openings(word)
    closings = [c for c, s in enumerate(word) if s in ")]"]
    assert len(closings) == length // 2 and all(match[c] != dyck.NONE for c in closings)
    assert sorted(match[c] for c in closings) == [j for j, s in enumerate(word) if s in "(["]
    assert all(word[match[c]] == PAIRS[word[c]] for c in closings)
    assert match == reference_matches(word)


def test_matches_and_the_rules_on_a_hand_made_text():
    text = "([()])\n[(]"  # a cut word, and an ill-formed one after the newline
    #        0123456 789
    assert dyck.matching_openings(text) == [-1, -1, -1, 2, 1, 0, -1, -1, -1, -1]
    assert dyck.nearest_openings(text) == [0, 1, 2, 2, 2, 2, -1, 7, 8, 8]
    # ")" at 3: the "(" at 2; ")" at 5: the "(" at 2 too (already matched: the rule is wrong)
    assert dyck.nearest_same_kind(text) == [-1, -1, -1, 2, 1, 2, -1, -1, -1, 7]
    assert dyck.depths(text) == [1, 2, 3, 2, 1, 0, 0, 1, 2, 1]
    assert dyck.innermost_open(text) == [0, 1, 2, 1, 0, -1, -1, 7, 8, -1]
    assert dyck.matching_openings(")(") == [-1, -1]  # a closing bracket before any opening


def test_the_same_seed_gives_the_same_text():
    assert dyck.dyck_text(3000, seed=3) == dyck.dyck_text(3000, seed=3)
    assert dyck.dyck_text(3000, seed=3) != dyck.dyck_text(3000, seed=4)
    assert dyck.dyck_rows(3, 40, seed=1) == dyck.dyck_rows(3, 40, seed=1)
    text = dyck.dyck_text(20_000, seed=0)
    # both kinds, every depth up to the bound, and closings that do not follow their match
    assert set(text) == set(dyck.SYMBOLS)
    assert max(dyck.depths(text)) == dyck.MAX_DEPTH
    match = dyck.matching_openings(text)
    assert sum(m not in (dyck.NONE, c - 1) for c, m in enumerate(match)) > 1000


def test_rows_start_a_word_so_every_match_is_inside():
    rows = dyck.dyck_rows(5, 50, seed=2)
    assert len(rows) == 5 and {len(r) for r in rows} == {50} and len(set(rows)) == 5
    for row in rows:
        assert row[0] == "\n"
        match = dyck.matching_openings(row)
        assert all(match[c] != dyck.NONE for c, s in enumerate(row) if s in ")]")


def test_a_data_directory_char_level_reused_and_never_over_other_data(tmp_path):
    meta, reused = dyck.ensure_dyck(tmp_path / "d", 5000, seed=3)
    assert not reused and dyck.ensure_dyck(tmp_path / "d", 5000, seed=3)[1]
    data = load_data(tmp_path / "d")
    assert data.vocab_size == len(dyck.SYMBOLS) == 5
    assert meta["train_tokens"] + meta["val_tokens"] == 5000 and meta["val_tokens"] == 500
    with pytest.raises(UsageError, match=r"holds other data \('dyck-2:5000:3:depth-4'\)"):
        dyck.ensure_dyck(tmp_path / "d", 5000, seed=4)
    assert load_data(tmp_path / "d").fingerprint() == data.fingerprint()  # left as it was


@pytest.mark.parametrize("call, message", [
    (lambda: dyck.dyck_text(10, length=(1, 4)), "length must be a range"),
    (lambda: dyck.dyck_text(10, length=(6, 4)), "length must be a range"),
    (lambda: dyck.dyck_text(10, max_depth=0), "max_depth must be at least 1, got 0"),
    (lambda: dyck.dyck_text(-1), "n_chars must be 0 or more, got -1"),
    (lambda: dyck.dyck_word(random.Random(0), 7), "even length of 2 or more, got 7"),
    (lambda: dyck.dyck_rows(0, 10), "n_rows must be at least 1"),
    (lambda: dyck.dyck_rows(2, 1), "row_length at least 2"),
    (lambda: dyck.ensure_dyck("unused", 10, max_depth=0), "max_depth must be at least 1"),
])
def test_bad_arguments_are_refused_in_one_line(call, message):
    with pytest.raises(UsageError, match=re.escape(message)) as error:
        call()
    assert "\n" not in str(error.value)
