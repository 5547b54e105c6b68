"""Atomic writes: the final mode of every file, and directories that cannot be made."""

from __future__ import annotations

import os
import stat

import pytest
import torch
from safetensors.torch import save_file

from gptlab import GPT, GPTConfig
from gptlab.errors import UsageError
from gptlab.files import atomic
from gptlab.files.atomic import atomic_path, atomic_write_text, check_dir, ensure_dir
from gptlab.model_dir import save_model


@pytest.fixture
def umask_027():
    before = os.umask(0o027)
    yield 0o640
    os.umask(before)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_writer_that_replaces_the_temp_file_still_gets_the_umask_mode(tmp_path, umask_027):
    """safetensors' save_file replaces the file it is given with a new 0600 one."""
    with atomic_path(tmp_path / "w.safetensors") as tmp:
        save_file({"w": torch.zeros(2)}, str(tmp))
    atomic_write_text(tmp_path / "a.txt", "x")
    assert mode(tmp_path / "w.safetensors") == mode(tmp_path / "a.txt") == umask_027


def test_the_umask_is_read_without_being_changed(umask_027, monkeypatch):
    """Setting the umask to read it would race with other threads creating files."""
    def no_umask(mask):
        raise AssertionError("os.umask called")

    monkeypatch.setattr(os, "umask", no_umask)
    assert atomic._umask() == 0o027


def test_every_file_of_a_saved_model_has_the_same_mode(tmp_path):
    save_model(GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4)),
               tmp_path)
    expected = 0o666 & ~_umask()
    assert {p.name: mode(p) for p in tmp_path.iterdir()} == {
        "config.json": expected, "model.safetensors": expected}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_directories_that_cannot_be_made(tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    for bad, message in ((a_file, "exists and is not a directory"),
                         (a_file / "sub" / "deeper", f"{a_file} is a file")):
        with pytest.raises(UsageError, match=message):
            check_dir(bad)
    with pytest.raises(UsageError, match="exists and is not a directory"):
        ensure_dir(a_file)
    with pytest.raises(UsageError, match=f"cannot create directory {a_file}/sub"):
        ensure_dir(a_file / "sub")
    with pytest.raises(UsageError, match="is not a directory|cannot create"):
        atomic_write_text(a_file / "sub" / "x.txt", "y")
    assert a_file.read_text() == "x" and sorted(tmp_path.iterdir()) == [a_file]
    check_dir(tmp_path / "new" / "dirs")  # creatable: nothing is made yet
    assert not (tmp_path / "new").exists()
    assert ensure_dir(tmp_path / "new" / "dirs").is_dir()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_parent(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    with pytest.raises(UsageError, match="permission denied|Permission denied"):
        check_dir(locked / "out")
    with pytest.raises(UsageError, match="Permission denied"):
        atomic_write_text(locked / "x.txt", "y")


def test_a_full_disk_is_a_failure_not_bad_input(tmp_path, monkeypatch):
    import errno
    import tempfile

    from gptlab.errors import DiskFull

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    with pytest.raises(DiskFull, match=f"no space left in {tmp_path} to write x.txt") as info:
        atomic_write_text(tmp_path / "x.txt", "y")
    assert info.value.exit_code == 1


@pytest.mark.parametrize("failure", [
    OSError(28, "No space left on device"),  # a plain write
    OSError(27, "File too large"),  # a file-size limit (RLIMIT_FSIZE)
    RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"),
])
def test_a_writer_that_runs_out_of_room_keeps_the_previous_file(tmp_path, failure):
    from gptlab.errors import DiskFull

    atomic_write_text(tmp_path / "state.pt", "the previous checkpoint")
    with pytest.raises(DiskFull) as info, atomic_path(tmp_path / "state.pt") as tmp:
        tmp.write_text("half of a new one")
        raise failure
    message = str(info.value)
    assert message.startswith(f"no space left in {tmp_path} to write state.pt: ")
    assert "free there, and it needs about 23 bytes" in message and "\n" not in message
    assert (tmp_path / "state.pt").read_text() == "the previous checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pt"]  # the temp file went


def test_a_writer_error_on_a_roomy_disk_passes_through(tmp_path):
    with pytest.raises(RuntimeError, match="unexpected pos"), \
            atomic_path(tmp_path / "x.pt") as tmp:
        tmp.write_text("x")
        raise RuntimeError("unexpected pos 704 vs 598")
    assert list(tmp_path.iterdir()) == []


def test_a_full_log_append_is_a_disk_full(tmp_path, monkeypatch):
    import builtins

    from gptlab.errors import DiskFull

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(builtins, "open", full)
    with pytest.raises(DiskFull, match=f"no space left in {tmp_path} to write m.jsonl"):
        atomic.append_text(tmp_path / "m.jsonl", "{}\n")


def test_the_temp_file_of_a_killed_writer_goes_with_the_next_write(tmp_path):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)  # exited: its temp file is litter
    litter = tmp_path / f".state.pt.{dead_pid}.abc123.tmp"
    live = tmp_path / f".state.pt.{os.getppid()}.def456.tmp"  # a running writer's: kept
    other = tmp_path / f".model.safetensors.{dead_pid}.ghi789.tmp"  # another file's: kept
    for p in (litter, live, other):
        p.write_text("partial")
    atomic_write_text(tmp_path / "state.pt", "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, other.name, "state.pt"])


def test_a_folder_left_with_only_a_killed_writes_temp_file_is_empty(tmp_path):
    """A writer killed while marking a new folder leaves only its temp file: the folder is
    still an empty one (gptlab.files.kinds), not "files gptlab did not write"."""
    from gptlab.files import kinds

    (tmp_path / ".gptlab.json.4242.k2j3h4.tmp").write_text('{"kind": "ru')
    assert kinds.recognise(tmp_path).empty
    kinds.claim(tmp_path, kinds.RUN)  # no refusal
    (tmp_path / "notes.tmp").write_text("mine")  # a user's .tmp file is not litter
    assert kinds.recognise(tmp_path).entries == ("notes.tmp",)
    assert not atomic.is_temp_name(".x.tmp") and atomic.is_temp_name(".state.pt.12.ab.tmp")
