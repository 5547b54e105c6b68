"""A real full disk (gptlab.files.atomic's DiskFull): a 4 MB tmpfs mounted as the output of
train, prepare, convert --to-hf / --to-gguf and an experiment, filled with a ballast file.
Each command ends with one line naming the folder and the room it needs, exit 1, no
traceback; a run's previous checkpoint stays, and once the ballast goes the run resumes
and finishes equal, bit for bit, to one that never met a full disk.

Needs root (mounting a tmpfs takes CAP_SYS_ADMIN): skipped, saying why, elsewhere. Several
processes each: the slow tier."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from gptlab.training import rundir

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[2] / "src"
DISK_MB = 4
TRAIN = ["--preset", "tiny-gpt2", "--batch-size", "4", "--checkpoint-interval", "3",
         "--eval-interval", "6", "--eval-iters", "2", "--dtype", "float32", "--device", "cpu",
         "--no-whole-val", "--no-progress"]


@pytest.fixture
def disk(tmp_path):
    """A DISK_MB tmpfs mounted at tmp_path/disk for the test, unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", mount],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (no CAP_SYS_ADMIN?): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", mount], check=False)


def env() -> dict[str, str]:
    """This checkout's gptlab, one thread (a tiny model), no timing probe."""
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1",
            "GPTLAB_AUTO_DTYPE": "float32"}


def gptlab(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gptlab", *map(str, argv)],
                          capture_output=True, text=True, timeout=300, env=env())


def fill(disk: Path, leave: int = 0) -> Path:
    """A ballast file that leaves `leave` bytes free on disk."""
    st = os.statvfs(disk)
    ballast = disk / "ballast"
    ballast.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return ballast


def disk_full(result: subprocess.CompletedProcess, command: str, folder: Path) -> str:
    """result failed with exit 1 and, last, the one line of a full disk, naming folder (or
    a folder inside it)."""
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"gptlab {command}: error: no space left in {folder}"), line
    assert " free there, and it needs " in line, line
    return line


@pytest.fixture(scope="module")
def data(tmp_path_factory, tiny_shakespeare) -> Path:
    path = tmp_path_factory.mktemp("full-disk") / "data"
    assert gptlab("prepare", "--input", tiny_shakespeare, "--out", path).returncode == 0
    return path


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory) -> Path:
    """TRAIN's 12 steps, never interrupted."""
    run = tmp_path_factory.mktemp("full-disk") / "reference"
    done = gptlab("train", "--data", data, "--out", run, *TRAIN, "--max-iters", "12")
    assert done.returncode == 0, done.stderr
    return run


def train_stopped_at(data: Path, run: Path, step: int) -> None:
    """`gptlab train` of the reference's settings, stopped with a checkpoint at `step` as an
    interruption stops it (gptlab.training.callbacks.StopAfter)."""
    script = ("import sys; import gptlab.training.run as r; real = r.train; "
              "from gptlab.training.callbacks import StopAfter; "
              f"r.train = lambda *a, **k: real(*a, **{{**k, 'callbacks': StopAfter({step})}}); "
              "from gptlab.cli.main import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", script, "train", "--data", str(data), "--out",
                           str(run), *TRAIN, "--max-iters", "12"], capture_output=True,
                          text=True, env=env(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert rundir.load_checkpoint(run)["step"] == step


@pytest.mark.parametrize("room", [0, 200_000], ids=["full", "no-room-for-a-checkpoint"])
def test_train_stops_keeps_its_checkpoint_and_resumes_exactly(disk, data, reference, room):
    run = disk / "run"
    train_stopped_at(data, run, 6)
    before = (run / "state.pt").read_bytes()
    ballast = fill(disk, leave=room)  # 200 kB: room for the logs, not for state.pt (390 kB)
    disk_full(gptlab("train", "--data", data, "--out", run, "--resume", "--no-progress"),
              "train", run)
    assert (run / "state.pt").read_bytes() == before  # the previous checkpoint, whole
    assert not list(run.rglob(".*.tmp"))  # no temp file left taking room
    ballast.unlink()
    done = gptlab("train", "--data", data, "--out", run, "--resume", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert rundir.load_checkpoint(run)["step"] == 12
    ours = load_file(str(run / "model.safetensors"))
    theirs = load_file(str(reference / "model.safetensors"))
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_prepare_says_the_room_it_needs(disk, tiny_shakespeare):
    out = disk / "data"
    ballast = fill(disk, leave=1_000_000)  # train.bin takes 2 MB
    line = disk_full(gptlab("prepare", "--input", tiny_shakespeare, "--out", out), "prepare",
                     out)
    assert "to write train.bin" in line
    assert not list(out.rglob(".*.tmp")) and not (out / "meta.json").exists()
    ballast.unlink()
    assert gptlab("prepare", "--input", tiny_shakespeare, "--out", out).returncode == 0
    assert (out / "meta.json").is_file()


@pytest.mark.parametrize("direction", ["--to-hf", "--to-gguf"])
def test_convert_says_the_room_it_needs(disk, reference, direction):
    out = disk / ("export" if direction == "--to-hf" else "model.gguf")
    ballast = fill(disk, leave=50_000)  # the weights take 117 kB
    disk_full(gptlab("convert", direction, reference, "--out", out), "convert",
              out if direction == "--to-hf" else disk)
    assert not list(disk.rglob(".*.tmp"))
    ballast.unlink()
    done = gptlab("convert", direction, reference, "--out", out)
    assert done.returncode == 0, done.stderr


def test_an_experiment_says_the_room_it_needs_and_then_finishes(disk, data):
    out = disk / "scale"
    argv = ("experiment", "scale", "--quick", "--steps", "6", "--data", data, "--out", out)
    ballast = fill(disk, leave=150_000)
    disk_full(gptlab(*argv), "experiment", out)
    ballast.unlink()
    done = gptlab(*argv)
    assert done.returncode == 0, done.stderr
    assert (out / "results.json").is_file()
