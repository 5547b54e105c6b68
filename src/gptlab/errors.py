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


class DiskFull(GptlabError):
    """No room on the device for a write (a full disk, a quota, a file-size limit): the
    message names the folder and the space the file needs (exit code 1). What was there
    before the write is left as it was (gptlab.files.atomic)."""
