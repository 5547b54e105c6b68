"""Text and token arguments (gptlab.cli.tokeninput): encoded and checked against the model
before any work, refusals naming the flag in one line; --text and --text-file, and the
deprecated --text FILE still read as a file with its warning."""

from __future__ import annotations

import argparse

import pytest

from gptlab.cli.tokeninput import (
    LEGACY_TEXT_FILE,
    add_text_options,
    encode_text,
    input_texts,
    legacy_notice,
    legacy_text_files,
    token_id,
    token_labels,
)
from gptlab.data.tokenizer import CharTokenizer
from gptlab.errors import UsageError

TOKENIZER = CharTokenizer.from_text("ab c\n")  # ids: \n 0, ' ' 1, a 2, b 3, c 4


def refused(call, *fragments: str) -> None:
    with pytest.raises(UsageError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message and all(f in message for f in fragments), message


def test_encode_text_gives_a_batch_of_one_or_names_the_flag():
    ids = encode_text(TOKENIZER, "ab c", block_size=8, flag="--text")
    assert ids.tolist() == [[2, 3, 1, 4]]
    refused(lambda: encode_text(TOKENIZER, "", 8, "--text"), "--text is empty")
    refused(lambda: encode_text(TOKENIZER, "abcab", 4, "--prompt"), "--prompt is 5 tokens",
            "of 4")
    refused(lambda: encode_text(TOKENIZER, "a", 8, "--text", min_len=2), "--text gives 1")


def test_token_id_takes_an_id_or_one_tokens_text():
    assert token_id(TOKENIZER, "id:4", 5, "--target") == 4
    assert token_id(TOKENIZER, "b", 5, "--target") == 3
    refused(lambda: token_id(TOKENIZER, "id:5", 5, "--target"), "--target id:5 is outside",
            "0..4")
    refused(lambda: token_id(TOKENIZER, "id:x", 5, "--target"), "--target 'id:x'", "id:N")
    refused(lambda: token_id(TOKENIZER, "ab", 5, "--target"), "'ab' is 2 tokens, not one")


def test_token_labels_show_spaces_and_escapes_on_one_line():
    assert token_labels(TOKENIZER, [2, 1, 0]) == ["a", "\u2423", "\\n"]
    assert token_labels(TOKENIZER, [9]) == ["<9>"]  # one it cannot decode
    assert token_labels(None, [7, 8]) == ["7", "8"]


def parse(*argv: str, many: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_text_options(parser.add_mutually_exclusive_group(), many=many)
    return parser.parse_args(argv)


def test_text_and_text_file_are_read_labelled(tmp_path):
    (tmp_path / "in.txt").write_text("from a file", encoding="utf-8")
    assert input_texts(parse("--text", r"a\tb")) == [("the --text", "a\tb")]
    assert input_texts(parse("--text-file", str(tmp_path / "in.txt"))) == [
        (str(tmp_path / "in.txt"), "from a file")]
    assert input_texts(parse("--text", "x", "y", many=True)) == [("the --text", "x"),
                                                               ("the --text", "y")]
    assert input_texts(parse()) == []
    refused(lambda: input_texts(parse("--text-file", str(tmp_path))), "is a directory")
    with pytest.raises(SystemExit):  # one or the other
        parse("--text", "x", "--text-file", "y")


def test_a_text_naming_a_file_is_read_as_one_only_where_it_once_was(tmp_path, capsys):
    path = tmp_path / "old.txt"
    path.write_text("legacy", encoding="utf-8")
    args = parse("--text", str(path))
    assert input_texts(args) == [("the --text", str(path))]  # the text itself, by default
    assert input_texts(args, legacy_files=True) == [(str(path), "legacy")]
    assert legacy_text_files(args) == [str(path)]
    assert legacy_text_files(parse("--text", "x" * 5000)) == []  # too long to be a path
    legacy_notice(args, "gptlab eval")
    assert capsys.readouterr().err == (
        f"gptlab eval: warning: {LEGACY_TEXT_FILE.format(path=path)}\n")
    legacy_notice(parse("--text", "hello"), "gptlab eval")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", [["lens"], ["heads", "--out", "{tmp}/h"],
                                     ["attribute", "--target", "e"]])
def test_a_token_count_is_written_with_thousands_separators(command, tmp_path, gptlab,
                                                            one_line):
    """Counts of tokens read as the rest of gptlab's numbers: 1,500, not 1500."""
    text = tmp_path / "long.txt"
    text.write_text("a" * 1500)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in command]
    err = one_line(gptlab(argv[0], "shakespeare", "--text-file", text, *argv[1:]))
    assert "is 1,500 tokens, longer than the model's context of 128" in err


def test_counts_in_the_librarys_messages_have_separators():
    import numpy as np
    import torch

    from gptlab.data.batches import get_batch
    from gptlab.errors import UsageError
    from gptlab.model.config import GPTConfig
    from gptlab.model.params import accounting

    with pytest.raises(UsageError, match="^1,500 tokens are too few for one block of 2,048$"):
        get_batch(np.zeros(1500, dtype=np.uint16), 1, 2048, torch.Generator())
    note = accounting(GPTConfig.from_preset("llama2-7b")).to_dict()["memory"]["kv_cache_note"]
    assert note.endswith("full context = 4,096 tokens")
