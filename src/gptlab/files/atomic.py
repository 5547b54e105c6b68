"""Files in and out: atomic writes (a temp file beside the target, fsync, then rename: a
reader sees the old file or the new one, never half of one, even if the process dies
mid-write), copies and JSON, with one vocabulary for what goes wrong.

Every file written here ends with the usual mode for a new file (0666 less the umask),
whatever the writer did to the temp file: mkstemp makes it 0600, and some writers
(safetensors' save_file) replace it with a new 0600 file of their own."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gptlab.errors import GptlabError, UsageError


def ensure_dir(path: str | Path) -> Path:
    """Create directory `path` (and its parents) unless it exists; a UsageError, naming the
    path and the reason, when it cannot be: under a file, unwritable, an invalid name."""
    path = Path(path)
    if path.is_dir():
        return path
    if path.exists():
        raise UsageError(f"{path} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise _error(exc, f"cannot create directory {path}") from None
    return path


def check_dir(path: str | Path) -> None:
    """A UsageError now, before any work, if directory `path` could not be created or
    written: it is a file, it lies under a file, or its nearest existing parent is not
    writable (tried: a temporary directory made and removed there). Leaves nothing behind
    (ensure_dir creates the directory, when there is something to write)."""
    path = Path(path)
    if path.is_dir():
        target = path
    elif path.exists():
        raise UsageError(f"{path} exists and is not a directory")
    else:
        target = next((p for p in path.absolute().parents if p.exists()), Path("/"))
        if not target.is_dir():
            raise UsageError(f"cannot create directory {path}: {target} is a file")
    if not os.access(target, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write in {target}: permission denied")
    # os.access answers yes for root, and for /proc or a read-only mount: try it for real
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".gptlab-check-", dir=target))
    except OSError as exc:
        where = f"create directory {path}" if target != path else f"write in {path}"
        raise _error(exc, f"cannot {where}") from None


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces `path` atomically."""
    path = Path(path)
    ensure_dir(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _error(exc, f"cannot write in {path.parent}") from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # After the writer, not before: it may have replaced the file with a 0600 one.
        os.chmod(tmp_path, 0o666 & ~_umask())
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
        _fsync_dir(path.parent)
    finally:
        tmp_path.unlink(missing_ok=True)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


# OSErrors that say the path given was a bad one (exit 2); any other (a full disk, an I/O
# error) is a failure of the machine (exit 1).
BAD_PATH_ERRNOS = frozenset({
    errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.EACCES, errno.EPERM,
    errno.ENAMETOOLONG, errno.ELOOP, errno.EROFS, errno.EINVAL,
})


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


def read_json(path: str | Path, what: str = "JSON file") -> Any:
    """The JSON in `path`; one UsageError, naming the path and `what` it should hold, when
    it is missing, unreadable or not JSON."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{what} not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({what}): not UTF-8 ({exc.reason})") \
            from None
    except (OSError, ValueError) as exc:
        raise _error(exc, f"cannot read {path}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({what}): {exc}") from None


def read_json_object(path: str | Path, what: str = "JSON file") -> dict[str, Any]:
    obj = read_json(path, what)
    if not isinstance(obj, dict):
        raise UsageError(f"{path} must hold a JSON object ({what}), not {type(obj).__name__}")
    return obj


def copy_file(src: str | Path, dst: str | Path) -> None:
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


def is_bad_path(exc: BaseException) -> bool:
    """Whether exc (an OSError, or ValueError for a NUL in a name) blames the path."""
    return not isinstance(exc, OSError) or exc.errno in BAD_PATH_ERRNOS


def _error(exc: Exception, what: str) -> GptlabError:
    reason = getattr(exc, "strerror", None) or str(exc)
    return (UsageError if is_bad_path(exc) else GptlabError)(f"{what}: {reason}")


def _umask() -> int:
    """The process's umask, read without changing it where the system allows (Linux:
    /proc/self/status). os.umask can only be read by setting it, which would race with
    other threads creating files (the lab trains in one); so that way is used only once, at
    import, where /proc is missing."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return _UMASK_AT_IMPORT


def _set_and_restore_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK_AT_IMPORT = _set_and_restore_umask()


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
