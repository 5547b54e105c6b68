"""Files in and out: atomic writes (a temp file beside the target, fsync, then rename: a
reader sees the old file or the new one, never half of one, even if the process dies
mid-write), copies and JSON, with one vocabulary for what goes wrong.

A full disk (or quota, or file-size limit) is told here, in one place, for every writer: the
temp file goes, the previous file stays, and a DiskFull names the folder and the space the
file needs. A temp file whose writer was killed (SIGKILL, power loss) is removed by the next
write of the same file.

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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gptlab.errors import DiskFull, GptlabError, UsageError

# Test-only: seconds to sleep between writing a temp file and renaming it over its target,
# so that a fault test (bench/faults.py, tests/bench/test_faults.py) can kill a writer
# inside a checkpoint write for sure. Read here alone; never set it for real work.
SLOW_WRITE_ENV = "GPTLAB_FAULT_SLOW_WRITE"
# errnos of a device with no room for the write: a full disk, a full quota, a file-size limit
FULL_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# Some writers do not pass the errno on (torch.save: "unexpected pos ..."; numpy's tofile:
# "N requested and M written"): a failed write that leaves less than this free counts too.
NEARLY_FULL_BYTES = 1 << 20


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
    """Yield a temporary path to write; on success it replaces `path` atomically. On a full
    disk: a DiskFull naming path's folder, the temp file removed, `path` as it was."""
    path = Path(path)
    ensure_dir(path.parent)
    _remove_dead_temps(path)
    free = _free_bytes(path.parent)  # before: a writer may hold its failed file open
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path) + f"{os.getpid()}.",
                                   suffix=TEMP_SUFFIX, dir=path.parent)
    except OSError as exc:
        if _disk_full(exc, path.parent):
            raise _disk_full_error(path, 0, free) from None
        raise _error(exc, f"cannot write in {path.parent}") from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # After the writer, not before: it may have replaced the file with a 0600 one.
        os.chmod(tmp_path, 0o666 & ~_umask())
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        _slow_write_for_fault_tests()
        os.replace(tmp_path, path)
        _fsync_dir(path.parent)
    except Exception as exc:
        full = _disk_full(exc, path.parent)  # told before the temp file frees its space
        written = _size(tmp_path)
        tmp_path.unlink(missing_ok=True)
        if full:
            raise _disk_full_error(path, written, free) from None
        raise
    finally:
        tmp_path.unlink(missing_ok=True)


def append_text(path: str | Path, text: str) -> None:
    """Append text to a log file (not atomic: a reader of a log skips a torn last line);
    a DiskFull, as atomic_path's, when there is no room for it."""
    path = Path(path)
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        if _disk_full(exc, path.parent):
            raise _disk_full_error(path, len(text.encode("utf-8")),
                                   _free_bytes(path.parent)) from None
        raise


# --- temp files, full disks and the fault tests ---------------------------------------------

TEMP_SUFFIX = ".tmp"


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of atomic_path's temp files (.NAME.PID.RANDOM.tmp): a
    write in progress, or the litter of a writer that was killed; never a user's file."""
    parts = name.split(".")
    return (name.startswith(".") and name.endswith(TEMP_SUFFIX) and len(parts) >= 5
            and parts[-3].isdigit())


def _temp_prefix(path: Path) -> str:
    """Temp files of `path` are named .NAME.PID.RANDOM.tmp: the PID of their writer tells
    one that died (killed mid-write) from one still being written."""
    return f".{path.name}."


def _remove_dead_temps(path: Path) -> None:
    """Remove the temp files of `path` whose writer is no longer running on this machine
    (a writer still alive, this process included, keeps its own)."""
    prefix = _temp_prefix(path)
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            name = entry.name
            if not (name.startswith(prefix) and name.endswith(TEMP_SUFFIX)):
                continue
            pid = name[len(prefix):].split(".", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, someone else's
        return True
    return True


def _disk_full(exc: BaseException, folder: Path) -> bool:
    """Whether exc, raised writing into folder, means there was no room for the write."""
    if isinstance(exc, OSError) and exc.errno in FULL_DISK_ERRNOS:
        return True
    text = str(exc)
    if any(os.strerror(e) in text or f"os error {e})" in text for e in FULL_DISK_ERRNOS):
        return True  # safetensors: "I/O error: No space left on device (os error 28)"
    return isinstance(exc, (OSError, RuntimeError)) and _free_bytes(folder) < NEARLY_FULL_BYTES


def _disk_full_error(path: Path, written: int, free: int) -> DiskFull:
    """One line: the folder, the room there was, and what the file needs: about the size of
    the file it replaces (a checkpoint's next one), else more than what fit."""
    previous = _size(path)
    need = (f"about {_mb(previous)}" if previous > written else
            f"more than {_mb(written)}" if written else "more")
    return DiskFull(f"no space left in {path.parent} to write {path.name}: {_mb(free)} free "
                    f"there, and it needs {need}; free some space, then run the command again")


def _mb(n: int) -> str:
    if n >= 100_000:
        return f"{n / 1e6:.1f} MB"
    return f"{n / 1e3:.0f} kB" if n >= 1000 else f"{n} bytes"


def _free_bytes(folder: Path) -> int:
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return NEARLY_FULL_BYTES
    return st.f_bavail * st.f_frsize


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _slow_write_for_fault_tests() -> None:
    seconds = os.environ.get(SLOW_WRITE_ENV)
    if seconds:
        with contextlib.suppress(ValueError):
            time.sleep(float(seconds))


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
