"""The CLI's argument types (gptlab.cli.argtypes): escapes in prompt and stop strings."""

from gptlab.cli.argtypes import unescape


def test_argtypes_unescape_rule():
    assert unescape(r"a\nb\tc\rd\\e") == "a\nb\tc\rd\\e"
    assert unescape(r"\x41 \u00e9 \q é") == r"\x41 \u00e9 \q é"  # kept as typed
    assert unescape(r"\\n") == "\\n"  # an escaped backslash, then a plain n
