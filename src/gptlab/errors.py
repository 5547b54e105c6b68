"""Errors a user can cause. The CLI prints them as one line and exits non-zero."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class GptlabError(Exception):
    """A failure the user should read as one line, not as a traceback (exit code 1)."""

    exit_code = 1


class UsageError(GptlabError, ValueError):
    """Bad usage or bad input: an invalid config, a missing file, a malformed value (exit 2).

    A ValueError too, so library callers can catch it as the bad argument it is."""

    exit_code = 2


class Setting(str):
    """A setting's name (learning_rate) standing in a SettingError's message."""


class SettingError(UsageError):
    """Bad input that names settings: its message is text and Settings, so a caller with
    words of its own for the settings (the CLI's flags) can say those instead.

    str(exc) spells each setting as the library does:
    SettingError(Setting("learning_rate"), " must be > 0, got -1") reads
    "learning_rate must be > 0, got -1", and exc.said_with({"learning_rate":
    "--learning-rate"}) "--learning-rate must be > 0, got -1"."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts
        super().__init__("".join(parts))

    @property
    def settings(self) -> tuple[str, ...]:
        return tuple(p for p in self.parts if isinstance(p, Setting))

    def said_with(self, words: Mapping[str, str]) -> str:
        """The message with each setting said as `words` has it ({name: word}); a setting
        `words` lacks keeps its own name."""
        return "".join(words.get(p, p) if isinstance(p, Setting) else p for p in self.parts)


def listed(names: Iterable[str], sep: str = ", ") -> tuple[str, ...]:
    """Parts of a SettingError: the settings `names`, sep between them."""
    parts: list[str] = []
    for name in names:
        parts += [sep, Setting(name)] if parts else [Setting(name)]
    return tuple(parts)


class ConfigError(SettingError):
    """An invalid GPTConfig (a ValueError, as every UsageError). The message names the
    offending field (a Setting, where a command may have a flag for it)."""


class DiskFull(GptlabError):
    """No room on the device for a write (a full disk, a quota, a file-size limit): the
    message names the folder and the space the file needs (exit code 1). What was there
    before the write is left as it was (gptlab.files.atomic)."""
