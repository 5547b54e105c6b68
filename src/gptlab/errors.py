"""Errors a user can cause. The CLI prints them as one line and exits non-zero."""


class GptlabError(Exception):
    """A failure the user should read as one line, not as a traceback (exit code 1)."""

    exit_code = 1


class UsageError(GptlabError, ValueError):
    """Bad usage or bad input: an invalid config, a missing file, a malformed value (exit 2).

    A ValueError too, so library callers can catch it as the bad argument it is."""

    exit_code = 2


class ConfigError(UsageError):
    """An invalid GPTConfig (a ValueError, as every UsageError). The message names the
    offending field."""
