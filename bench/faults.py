"""Real faults, counted: gptlab killed with SIGKILL at random moments, then run again.

Every scenario runs gptlab as a program (a fresh process, this checkout's src/ first, one
torch thread), kills it with SIGKILL (no handler runs, no `finally`, as a power cut or the
OOM killer) at a moment drawn from a seeded RNG, looks at what the folder holds, and runs
the command again:

  train       `gptlab train` of tiny-gpt2 checkpointing every 3 steps, killed several times
              per run and resumed with --resume each time (or started again where no
              checkpoint was committed); the final weights and optimizer state are compared
              with an uninterrupted run's, bit for bit, and so is its log of losses.
  prepare     `gptlab prepare --force` replacing a data folder (old text -> new text): after a
              kill the folder is the old data, the new data, or marked incomplete (no
              meta.json, refused by `train` in one line), never files of both under a meta.
  convert     `convert --to-hf --force` replacing an export of another model, and
              `--to-gguf --force` replacing a .gguf file: old or new, never a mix.
  experiment  `gptlab experiment scale --quick`, killed and run again: it resumes and reuses
              its runs, whose final weights equal an uninterrupted experiment's.
  lab         `gptlab lab` with a live training started as the page starts it (POST
              /api/live/start), the server killed mid-training and started again: the live
              run is consistent, loadable, and `train --resume` finishes it bit-exact.

Every second kill is aimed inside a checkpoint write (random moments rarely land in one):
those runs set GPTLAB_FAULT_SLOW_WRITE (a test-only pause between writing a temp file and
renaming it over its target, read by gptlab.files.atomic alone), and the kill comes once the
temp file is seen; a kill counts as "inside a write" when the killed process's temp file is
still there afterwards.

    python -m bench.faults [--trials 1] [--kills 3] [--seed 0] [--only train,lab]
                           [--out bench/results]

Writes OUT/faults.json: per scenario the kills, the kills inside a write, the successful
restarts, the finals compared and how many were bit-exact (or old/new), and any problem seen.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gptlab
from bench.common import table, write_result

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "tests" / "assets" / "tinyshakespeare" / "input.txt"
SLOW_WRITE_ENV = "GPTLAB_FAULT_SLOW_WRITE"  # gptlab.files.atomic's (test-only)
SLOW_WRITE_S = 0.3
SCENARIOS = ("train", "prepare", "convert", "experiment", "lab")
# The training every train trial repeats: tiny-gpt2, a checkpoint every 3 steps.
TRAIN_STEPS = 45
TRAIN_ARGS = ["--preset", "tiny-gpt2", "--max-iters", str(TRAIN_STEPS), "--batch-size", "4",
              "--checkpoint-interval", "3", "--eval-interval", "15", "--eval-iters", "2",
              "--dtype", "float32", "--device", "cpu", "--no-whole-val", "--no-progress"]
LIVE_REQUEST = {"task": "induction", "steps": 60, "every": 20, "seed": 1337}


def child_env(**extra: str) -> dict[str, str]:
    """The environment of every gptlab process: this checkout first, one thread (tiny
    models; a busy 2-core machine), no timing probe (--dtype auto means float32)."""
    src = str(Path(gptlab.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
            "OMP_NUM_THREADS": "1", "GPTLAB_AUTO_DTYPE": "float32", **extra}


@dataclass
class Tally:
    """What one scenario counted."""

    kills: int = 0
    kills_inside_write: int = 0
    restarts: int = 0  # commands run after a kill
    restarts_ok: int = 0  # ... that went on (exit 0, or running when killed again)
    finals: int = 0  # final states compared with the uninterrupted run's
    finals_exact: int = 0  # ... equal bit for bit
    states_after_kill: dict[str, int] = field(default_factory=dict)
    killed_writing: dict[str, int] = field(default_factory=dict)  # by the file being written
    said: dict[str, str] = field(default_factory=dict)  # what the next command said, by case
    problems: list[str] = field(default_factory=list)

    def saw(self, state: str) -> None:
        self.states_after_kill[state] = self.states_after_kill.get(state, 0) + 1

    def killed(self, pid: int, watch: list[Path]) -> None:
        """Count a kill of process pid, and the files it was writing (its temp files left
        in the watched folders: .NAME.PID.RANDOM.tmp, gptlab.files.atomic's)."""
        self.kills += 1
        names = {p.name.split(f".{pid}.")[0][1:] for d in watch
                 for p in d.rglob(f".*.{pid}.*.tmp")}
        if names:
            self.kills_inside_write += 1
        for name in names:
            self.killed_writing[name] = self.killed_writing.get(name, 0) + 1


class Harness:
    """Starts gptlab programs and kills them as the seeded RNG says."""

    def __init__(self, work: Path, rng: random.Random, log: Callable[[str], None]) -> None:
        self.work, self.rng, self.log = work, rng, log
        self.n = 0

    def start(self, argv: list[str], slow: bool = False) -> subprocess.Popen:
        self.n += 1
        out = open(self.work / f"p{self.n}.log", "w+")  # noqa: SIM115 (closed in finish)
        env = child_env(**({SLOW_WRITE_ENV: str(SLOW_WRITE_S)} if slow else {}))
        proc = subprocess.Popen([sys.executable, "-m", "gptlab", *map(str, argv)],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
        proc.log = out  # type: ignore[attr-defined]
        return proc

    def run(self, argv: list[str], timeout: float = 300) -> tuple[int, str]:
        proc = self.start(argv)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return proc.returncode, self.finish(proc)

    @staticmethod
    def finish(proc: subprocess.Popen) -> str:
        proc.log.seek(0)  # type: ignore[attr-defined]
        text = proc.log.read()  # type: ignore[attr-defined]
        proc.log.close()  # type: ignore[attr-defined]
        return text

    def run_and_kill(self, argv: list[str], window: tuple[float, float], watch: list[Path],
                     tally: Tally, aim_at_write: bool, reached: Callable[[], bool] | None = None,
                     writing: str = "*") -> tuple[bool, int | None, str]:
        """Run argv and SIGKILL it: at a random moment in window (seconds after the start:
        from the first, to the time a whole run took), or when reached() (the run's own
        account of how far it got) turns true, a few random milliseconds later; or,
        aim_at_write, inside a write under one of the `watch` folders (the first, second or
        third write seen of the file named `writing`, at random). (killed, exit code if it
        ended first, its output)."""
        proc = self.start(argv, slow=aim_at_write)
        # A random kill comes within the first 80% of window's end (a whole run's time), so
        # that a run a little faster than the one timed is still killed.
        deadline = time.monotonic() + (window[1] * 3 + 30 if aim_at_write else
                                       self.rng.uniform(window[0], 0.8 * window[1]))
        skip = self.rng.randint(0, 2) if aim_at_write else 0  # writes to let pass first
        seen: set[str] = set()
        while proc.poll() is None and time.monotonic() < deadline:
            if aim_at_write:
                temps = {p.name for d in watch
                         for p in d.rglob(f".{writing}.{proc.pid}.*.tmp")}
                if temps - seen and len(seen | temps) > skip:
                    time.sleep(self.rng.uniform(0, SLOW_WRITE_S * 0.8))
                    break
                seen |= temps
            elif reached is not None and reached():
                time.sleep(self.rng.uniform(0, 0.05))
                break
            time.sleep(0.005)
        if proc.poll() is not None:
            return False, proc.returncode, self.finish(proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        tally.killed(proc.pid, watch)
        return True, None, self.finish(proc)

    def restarted(self, tally: Tally, killed: bool, code: int | None, output: str,
                  what: str) -> None:
        """Count a command run after a kill: it went on if killed again or exit 0."""
        tally.restarts += 1
        if killed or code == 0:
            tally.restarts_ok += 1
        else:
            tally.problems.append(f"{what}: exit {code}: {last_line(output)}")


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def tensors_equal(a: dict, b: dict) -> bool:
    import torch

    def flat(x, prefix=""):
        if isinstance(x, dict):
            for k, v in x.items():
                yield from flat(v, f"{prefix}{k}.")
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                yield from flat(v, f"{prefix}{i}.")
        else:
            yield prefix, x

    fa, fb = dict(flat(a)), dict(flat(b))
    if fa.keys() != fb.keys():
        return False
    for k, x in fa.items():
        y = fb[k]
        if isinstance(x, torch.Tensor):
            if not (isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape
                    and torch.equal(x, y)):
                return False
        elif x != y and not (x != x and y != y):  # NaN equals NaN here
            return False
    return True


def weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path))


def train_losses(run_dir: Path) -> list[tuple]:
    """Every logged loss, as logged (times and speeds left out)."""
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        out.append((r.get("kind"), r.get("step"), r.get("loss"), r.get("lr"),
                    r.get("train_loss"), r.get("val_loss")))
    return out


def run_differences(run: Path, reference: Path) -> list[str]:
    """What differs, bit for bit, between two finished runs: the weights file, each part
    of state.pt (weights, optimizer state, RNG states, step, best loss), the logged losses."""
    from gptlab.training import rundir

    a, b = rundir.load_checkpoint(run), rundir.load_checkpoint(reference)
    differ = [k for k in ("step", "model", "optimizer", "best_val", "batch_rng", "torch_rng")
              if not tensors_equal({k: a.get(k)}, {k: b.get(k)})]
    if not tensors_equal(weights(run / "model.safetensors"),
                         weights(reference / "model.safetensors")):
        differ.append("model.safetensors")
    if train_losses(run) != train_losses(reference):
        differ.append("metrics.jsonl")
    return differ


def run_state(run_dir: Path, interval: int) -> str:
    """What a killed run's folder holds: 'checkpoint' (state.pt readable, of a checkpoint
    step, its weights file of that step or the one before), 'no checkpoint', or a problem."""
    from gptlab.errors import UsageError
    from gptlab.training import rundir

    if not (run_dir / "state.pt").is_file():
        return "no checkpoint"
    try:
        state = rundir.load_checkpoint(run_dir)
    except UsageError as exc:
        return f"PROBLEM: {exc}"
    step = state["step"]
    wstep = (rundir.weights_step(run_dir / "model.safetensors")
             if (run_dir / "model.safetensors").is_file() else None)
    if step % interval and step != TRAIN_STEPS:
        return f"PROBLEM: state.pt at step {step}, not a checkpoint step"
    if wstep is not None and wstep > step:
        return f"PROBLEM: weights of step {wstep} ahead of state.pt's {step}"
    return "checkpoint"


# --- scenarios ------------------------------------------------------------------------------


def scenario_train(h: Harness, trials: int, kills: int) -> Tally:
    tally = Tally()
    data = h.work / "data"
    code, out = h.run(["prepare", "--input", TEXT, "--out", data])
    assert code == 0, out
    reference = h.work / "train-reference"
    t0 = time.monotonic()
    code, out = h.run(["train", "--data", data, "--out", reference, *TRAIN_ARGS])
    assert code == 0, out
    wall = time.monotonic() - t0
    for trial in range(trials):
        run = h.work / f"train-{trial}"
        for k in range(kills + 1):
            resume = (run / "state.pt").is_file()
            argv = (["train", "--data", data, "--out", run] +
                    (["--resume", "--no-progress"] if resume else TRAIN_ARGS))
            if k == kills:  # the last one runs to the end
                code, out = h.run(argv)
                killed = False
            else:  # a random kill: at a random step still to come, by this process's log
                target = h.rng.randint(_checkpoint_step(run) + 1, TRAIN_STEPS - 1)
                since = time.time()
                killed, code, out = h.run_and_kill(
                    argv, (0.5, wall * 3), [run], tally, aim_at_write=k % 2 == 1,
                    reached=lambda r=run, t=since, s=target: _logged_step(r, t) >= s,
                    writing="state.pt")  # aimed: inside the commit point's write
            if k > 0:
                h.restarted(tally, killed, code, out, f"train trial {trial}")
                if not resume and not killed:
                    tally.said.setdefault("train after a kill before the first checkpoint",
                                          "started afresh: " + last_line(out))
            if not killed:
                break
            state = run_state(run, 3)
            tally.saw(state)
            if state.startswith("PROBLEM"):
                tally.problems.append(f"train trial {trial}: {state}")
        tally.finals += 1
        differ = run_differences(run, reference)
        tally.finals_exact += not differ
        if differ:
            tally.problems.append(f"train trial {trial}: {', '.join(differ)} differ from the "
                                  f"uninterrupted run's")
    return tally


def _checkpoint_step(run: Path) -> int:
    from gptlab.training import rundir

    return rundir.load_checkpoint(run, mmap=True)["step"] if (run / "state.pt").is_file() else 0


def _logged_step(run: Path, since: float) -> int:
    """The last step metrics.jsonl logged (its last whole line), or 0; 0 too while the log
    is older than `since` (a resumed run rewrites it first)."""
    try:
        if (run / "metrics.jsonl").stat().st_mtime < since:
            return 0
        lines = (run / "metrics.jsonl").read_bytes().splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line).get("step", 0))
        except (ValueError, AttributeError):
            continue
    return 0


def _snapshot(folder: Path, names: tuple[str, ...]) -> dict[str, bytes | None]:
    return {n: (folder / n).read_bytes() if (folder / n).is_file() else None for n in names}


def classify(folder: Path, old: dict, new: dict, commit: str) -> str:
    """'old', 'new', 'absent' or 'incomplete' (its commit file missing: known unfinished),
    else 'MIX'."""
    names = tuple(old)
    now = _snapshot(folder, names)
    if not folder.exists() or all(v is None for v in now.values()):
        return "absent"
    if now == old:
        return "old"
    if now == new:
        return "new"
    if now[commit] is None:
        return "incomplete"
    def which(n: str) -> str:
        return "old" if now[n] == old[n] else "new" if now[n] == new[n] else "other"

    return "MIX " + ", ".join(f"{n}={which(n)}" for n in names)


def _replace_folder(h: Harness, tally: Tally, trials: int, kills: int, name: str,
                    make_old: list, make_new: list, names: tuple[str, ...], commit: str,
                    next_check: Callable[[Path], str]) -> None:
    """A folder replaced (old -> new) by a command killed `kills` times, then run to the
    end: after each kill old, new or marked incomplete; at the end new."""
    for where, argv in (("old", make_old), ("new", make_new)):
        t0 = time.monotonic()
        code, out = h.run([*argv, "--out", h.work / f"{name}-{where}"])
        assert code == 0, out
        wall = time.monotonic() - t0  # the new one's: the window of the random kills
    old = _snapshot(h.work / f"{name}-old", names)
    new = _snapshot(h.work / f"{name}-new", names)
    for trial in range(trials):
        out_dir = h.work / f"{name}-{trial}"
        shutil.copytree(h.work / f"{name}-old", out_dir)  # the old state, as make_old wrote it
        done = tries = 0  # kills made, kills tried
        after_kill = False
        while True:
            argv = [*make_new, "--out", out_dir, "--force"]
            last = done == kills or tries == 3 * kills
            if last:
                code, out = h.run(argv)
                killed = False
            else:
                tries += 1
                started = time.monotonic()
                killed, code, out = h.run_and_kill(argv, (0.3, wall), [out_dir], tally,
                                                   aim_at_write=done % 2 == 1)
                if not killed:  # it ended first: the timed run was slower (a cold start)
                    wall = min(wall, time.monotonic() - started)
            if after_kill:
                h.restarted(tally, killed, code, out, f"{name} trial {trial}")
            elif not killed and code != 0:
                tally.problems.append(f"{name} trial {trial}: exit {code}: {last_line(out)}")
            after_kill = killed
            if killed:
                done += 1
                state = classify(out_dir, old, new, commit)
                tally.saw(state)
                if state.startswith("MIX"):
                    tally.problems.append(f"{name} trial {trial}: {state}")
                elif state == "incomplete":
                    tally.said.setdefault(f"{name} found incomplete", next_check(out_dir))
                continue
            if last or code != 0:
                break
            # it ended before its kill (a short command): the old state back, and again
            shutil.rmtree(out_dir)
            shutil.copytree(h.work / f"{name}-old", out_dir)
        tally.finals += 1
        tally.finals_exact += classify(out_dir, old, new, commit) == "new"


def scenario_prepare(h: Harness, trials: int, kills: int) -> Tally:
    tally = Tally()
    small = h.work / "old-text.txt"
    small.write_text(TEXT.read_text(encoding="utf-8")[:200_000], encoding="utf-8")

    def refused_by_train(data: Path) -> str:
        from gptlab.data.prepared import load_data
        from gptlab.errors import UsageError

        try:
            load_data(data)  # what `gptlab train --data` does first
        except UsageError as exc:
            return f"train --data says: {exc}"
        tally.problems.append(f"{data}: incomplete data was accepted")
        return "accepted"

    _replace_folder(h, tally, trials, kills, "prepare", ["prepare", "--input", small],
                    ["prepare", "--input", TEXT],
                    ("train.bin", "val.bin", "tokenizer.json", "meta.json"), "meta.json",
                    refused_by_train)
    return tally


def _two_runs(h: Harness) -> tuple[Path, Path]:
    """Two small runs of different shapes: the old and the new model an export holds."""
    data = h.work / "data"
    if not data.is_dir():
        code, out = h.run(["prepare", "--input", TEXT, "--out", data])
        assert code == 0, out
    from gptlab.model.config import GPTConfig
    from gptlab.training.config import TrainConfig
    from gptlab.training.run import train

    settings = TrainConfig(max_iters=6, batch_size=4, warmup_iters=1, eval_interval=6,
                           eval_iters=1, dtype="float32", device="cpu", whole_val=False)
    runs = []
    for name, layers in (("model-a", 2), ("model-b", 1)):  # in this process: no start-up
        run = h.work / name
        with open(os.devnull, "w") as quiet, contextlib.redirect_stderr(quiet):
            train(GPTConfig.from_preset("tiny-gpt2", n_layer=layers), settings, data, run,
                  progress=False)
        runs.append(run)
    return runs[0], runs[1]


def scenario_convert(h: Harness, trials: int, kills: int) -> Tally:
    tally = Tally()
    a, b = _two_runs(h)

    def hf_found(out: Path) -> str:
        from gptlab.files import kinds

        found = kinds.recognise(out)
        return f"kind {found.kind}, holding {found.listing()}: convert --force writes it again"

    _replace_folder(h, tally, trials, kills, "to-hf", ["convert", "--to-hf", a],
                    ["convert", "--to-hf", b],
                    ("config.json", "model.safetensors", "tokenizer.json",
                     "tokenizer_config.json"), "config.json", hf_found)
    olds = {}  # one file: old or new, nothing else
    for run in (a, b):
        code, out = h.run(["convert", "--to-gguf", run, "--out", h.work / f"{run.name}.gguf"])
        assert code == 0, out
        olds[run] = (h.work / f"{run.name}.gguf").read_bytes()
    for trial in range(trials):
        gguf = h.work / f"gguf-{trial}"
        gguf.mkdir()
        target = gguf / "model.gguf"
        shutil.copyfile(h.work / f"{a.name}.gguf", target)
        for k in range(kills + 1):
            argv = ["convert", "--to-gguf", b, "--out", target, "--force"]
            if k == kills:
                code, out = h.run(argv)
                killed = False
            else:
                killed, code, out = h.run_and_kill(argv, (0.3, 4.0), [gguf], tally,
                                                        aim_at_write=k % 2 == 1)
            if k > 0:
                h.restarted(tally, killed, code, out, f"to-gguf trial {trial}")
            if not killed:
                break
            now = target.read_bytes()
            state = "old" if now == olds[a] else "new" if now == olds[b] else "MIX"
            tally.saw(f"gguf {state}")
            if state == "MIX":
                tally.problems.append(f"to-gguf trial {trial}: neither old nor new")
        tally.finals += 1
        tally.finals_exact += target.read_bytes() == olds[b]
        litter = [p.name for p in gguf.iterdir() if p.name != "model.gguf"]
        if litter:
            tally.problems.append(f"to-gguf trial {trial}: left {', '.join(litter)}")
    return tally


def scenario_experiment(h: Harness, trials: int, kills: int) -> Tally:
    tally = Tally()
    data = h.work / "data"
    if not data.is_dir():
        code, out = h.run(["prepare", "--input", TEXT, "--out", data])
        assert code == 0, out
    argv = ["experiment", "scale", "--quick", "--data", data, "--steps", "12"]
    reference = h.work / "experiment-reference"
    t0 = time.monotonic()
    code, out = h.run([*argv, "--out", reference])
    assert code == 0, out
    wall = time.monotonic() - t0
    for trial in range(trials):
        folder = h.work / f"experiment-{trial}"
        for k in range(kills + 1):
            if k == kills:
                code, out = h.run([*argv, "--out", folder])
                killed = False
            else:
                killed, code, out = h.run_and_kill([*argv, "--out", folder], (1.0, wall),
                                                   [folder], tally,
                                                   aim_at_write=k % 2 == 1)
            if k > 0:
                h.restarted(tally, killed, code, out, f"experiment trial {trial}")
            elif not killed and code != 0:
                tally.problems.append(f"experiment trial {trial}: exit {code}: "
                                      f"{last_line(out)}")
            if k > 0:
                for word in ("resuming", "reusing"):
                    said = [line for line in out.splitlines() if word in line]
                    if said:
                        tally.said.setdefault(f"experiment {word}", said[0])
            if not killed:
                break
            for run in sorted((folder / "runs").glob("*")) if (folder / "runs").is_dir() else []:
                state = run_state(run, 1)
                tally.saw(state)
                if state.startswith("PROBLEM"):
                    tally.problems.append(f"experiment trial {trial} {run.name}: {state}")
        tally.finals += 1
        ref_runs = sorted(p.name for p in (reference / "runs").iterdir())
        ours = sorted(p.name for p in (folder / "runs").iterdir()) \
            if (folder / "runs").is_dir() else []
        tally.finals_exact += ref_runs == ours and all(
            tensors_equal(weights(folder / "runs" / r / "model.safetensors"),
                          weights(reference / "runs" / r / "model.safetensors"))
            for r in ref_runs)
    return tally


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(url: str, body: dict | None = None, timeout: float = 10) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


class Lab:
    """`gptlab lab` as a program, on a free loopback port."""

    def __init__(self, h: Harness, runs: Path, slow: bool = False) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = h.start(["lab", "--runs", runs, "--port", self.port], slow=slow)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                _http(self.url + "/api/live/status", timeout=2)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the lab did not start: {Harness.finish(self.proc)}")

    def status(self) -> dict:
        return _http(self.url + "/api/live/status")

    def close(self, h: Harness) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        h.finish(self.proc)


def scenario_lab(h: Harness, trials: int, kills: int) -> Tally:
    """The lab killed mid-training `kills` times per trial (started again each time: a new
    start replaces the lab's own live run), then started once more: it must list the live
    run, which `gptlab sample` loads and `train --resume` finishes, bit-exact against an
    uninterrupted live run. The first kill of a trial is aimed inside a checkpoint write."""
    tally = Tally()
    steps = LIVE_REQUEST["steps"]
    reference = h.work / "lab-reference"
    lab = Lab(h, reference)
    try:
        _http(lab.url + "/api/live/start", LIVE_REQUEST)
        while lab.status()["running"]:
            time.sleep(0.1)
    finally:
        lab.close(h)
    ref_run = reference / "live-induction"
    for trial in range(trials):
        runs = h.work / f"lab-{trial}"
        run = runs / "live-induction"
        for k in range(kills):
            aim_at_write = k % 2 == 0 and k < kills - 1
            lab = Lab(h, runs, slow=aim_at_write)
            start = _http(lab.url + "/api/live/start", LIVE_REQUEST)
            if k > 0:
                h.restarted(tally, start.get("running", False), 1, json.dumps(start),
                            f"lab trial {trial}")
            target = h.rng.randint(1, steps - 1)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and lab.proc.poll() is None:
                if aim_at_write and list(run.glob(f".state.pt.{lab.proc.pid}.*.tmp")):
                    time.sleep(h.rng.uniform(0, SLOW_WRITE_S * 0.8))
                    break
                if not aim_at_write and lab.status()["step"] >= target:
                    break
                time.sleep(0.01)
            alive = lab.proc.poll() is None
            lab.close(h)
            if alive:
                tally.killed(lab.proc.pid, [runs])
            state = run_state(run, 250)  # the lab checkpoints every max(every, 250) steps
            tally.saw(state)
            if state.startswith("PROBLEM"):
                tally.problems.append(f"lab trial {trial}: {state}")
        _after_the_lab(h, tally, runs, run, ref_run, trial)
    return tally


def _after_the_lab(h: Harness, tally: Tally, runs: Path, run: Path, ref_run: Path,
                   trial: int) -> None:
    """The lab started again lists the killed live run; sample loads it; train --resume
    finishes it, compared with the uninterrupted one."""
    lab = Lab(h, runs)
    try:
        listed = json.dumps(_http(lab.url + "/api/runs"))
        running = lab.status()["running"]
    finally:
        lab.close(h)
    if running:
        tally.problems.append(f"lab trial {trial}: the restarted lab says a training runs")
    if (run / "model.safetensors").is_file() and "live-induction" not in listed:
        tally.problems.append(f"lab trial {trial}: the restarted lab lists no live run")
    if (run / "model.safetensors").is_file():  # what `gptlab sample` loads, in this process
        model, _ = gptlab.load(run)
        tally.said.setdefault("gptlab.load of the killed live run",
                              f"{type(model).__name__} of {model.num_parameters():,} parameters")
    data = runs / "live-data" / "induction"  # the lab's (gptlab.lab.live.tasks)
    code, out = h.run(["train", "--data", data, "--out", run, "--resume", "--no-progress"])
    h.restarted(tally, False, code, out, f"lab trial {trial}: train --resume")
    tally.finals += 1
    tally.finals_exact += code == 0 and tensors_equal(
        weights(run / "model.safetensors"), weights(ref_run / "model.safetensors"))


SCENARIO_FUNCTIONS = {"train": scenario_train, "prepare": scenario_prepare,
                      "convert": scenario_convert, "experiment": scenario_experiment,
                      "lab": scenario_lab}


def run(trials: int = 3, kills: int = 3, seed: int = 0, only: tuple[str, ...] = SCENARIOS,
        out_dir: Path | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every scenario in `only`, `trials` times with `kills` kills each; the tallies, also
    written to out_dir/faults.json when out_dir is given."""
    rng = random.Random(seed)
    results: dict[str, Any] = {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gptlab-faults-") as tmp:
        h = Harness(Path(tmp), rng, log)
        for name in only:
            t = time.monotonic()
            # train: twice the trials (the cheapest run, and the one resumed bit-exact)
            tally = SCENARIO_FUNCTIONS[name](h, trials * (2 if name == "train" else 1), kills)
            results[name] = {**tally.__dict__, "seconds": round(time.monotonic() - t, 1)}
            log(f"{name}: {tally.kills} kills ({tally.kills_inside_write} inside a write), "
                f"{tally.restarts_ok}/{tally.restarts} restarts went on, "
                f"{tally.finals_exact}/{tally.finals} finals exact"
                + (f"; PROBLEMS: {tally.problems}" if tally.problems else ""))
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [[n, r["kills"], r["kills_inside_write"], f"{r['restarts_ok']}/{r['restarts']}",
             f"{r['finals_exact']}/{r['finals']}", len(r["problems"])]
            for n, r in results.items()]
    log(table(["scenario", "kills", "in a write", "restarts ok", "finals exact", "problems"],
              rows))
    totals = {k: sum(r[k] for r in results.values())
              for k in ("kills", "kills_inside_write", "restarts", "restarts_ok", "finals",
                        "finals_exact")}
    data = {"trials": trials, "kills_per_trial": kills, "seed": seed,
            "seconds": round(time.monotonic() - t0, 1), "totals": totals,
            "problems": sum(len(r["problems"]) for r in results.values()),
            "scenarios": results}
    if out_dir is not None:
        write_result(out_dir, "faults", data)
    return data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.faults",
                                description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=1,
                   help="runs per scenario (default 1; train runs twice as many)")
    p.add_argument("--kills", type=int, default=3, help="kills per run (default 3)")
    p.add_argument("--seed", type=int, default=0, help="the kills' RNG seed (default 0)")
    p.add_argument("--only", default=",".join(SCENARIOS),
                   help=f"comma-separated scenarios (default all: {','.join(SCENARIOS)})")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    only = tuple(s for s in args.only.split(",") if s)
    unknown = set(only) - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenario {', '.join(sorted(unknown))}")
    data = run(args.trials, args.kills, args.seed, only, args.out)
    totals = data["totals"]
    return 1 if data["problems"] or totals["finals_exact"] != totals["finals"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
