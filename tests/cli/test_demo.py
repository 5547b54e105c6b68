"""`gptlab demo` (what `make demo` runs), tiny: prepare, train, sample, say where it is."""

from __future__ import annotations

import json
import shutil

import pytest

from gptlab.cli.main import main

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


@pytest.mark.slow
def test_demo_end_to_end_and_reuses_its_data(tmp_path, capsys):
    data, run = tmp_path / "demo-data", tmp_path / "demo"
    argv = ["demo", "--data", str(data), "--out", str(run), "--max-iters", "4", "--no-progress"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "prepared the embedded Shakespeare" in out
    meta = json.loads((data / "meta.json").read_text())
    assert meta["source"] == "shakespeare" and meta["tokenizer"] == "char"
    assert "trained 4 steps" in out and "A sample" in out
    sample = out.split("400 characters):\n\n", 1)[1].split("\n\nThe run lives in")[0]
    assert len(sample) >= 390  # 400 characters after the "\n" prompt
    assert f"gptlab sample {run}" in out and f"{run}/loss.png" in out
    for name in ("model.safetensors", "state.pt", "loss.png", "metrics.jsonl", "best/config.json"):
        assert (run / name).is_file(), name
    assert "step 4: train loss" in err

    # again: the corpus is reused, the run replaced
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert "reusing the prepared corpus" in out and "prepared the embedded" not in out
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps[0] == 0 and max(steps) == 4 and steps.count(0) == 1


def test_demo_refuses_foreign_data(tmp_path, capsys):
    from gptlab.data.prepared import prepare
    from gptlab.data.tokenizer import CharTokenizer

    prepare("some other text " * 100, tmp_path / "d", CharTokenizer.from_text("some other text"),
            source="mine")
    code = main(["demo", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "r"),
                 "--max-iters", "2", "--no-progress"])
    assert code == 2 and "holds other data ('mine')" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.fixture
def demo_targets(tmp_path, make_data, trained_run, random_hf_model):
    """A run gptlab train wrote, a prepared data directory and a Hugging Face export."""
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    data = make_data(tmp_path / "data", n_chars=3000)
    export = tmp_path / "export"
    random_hf_model("gpt2-tied-3heads").save_pretrained(export)
    return {"run": run, "data": data, "export": export}


def test_demo_never_replaces_a_folder_it_did_not_write(demo_targets, tmp_path, capsys, tree):
    """Issue 23, reproduction 2: `gptlab demo --out X` over a trained run, a data directory
    or a Hugging Face export exited 0 and replaced it. Each is refused before any work, and
    so is --data pointed at anything but data; --force replaces only a run."""
    messages = {"run": "already holds a training run (best/, model.safetensors, state.pt): it is "
                       "not marked as a demo's run",
                "data": "is a data directory", "export": "is a Hugging Face model directory"}
    for name, target in demo_targets.items():
        before = tree(target)
        for force in ([], ["--force"]):
            if name == "run" and force:
                continue  # replaced, as asked: below
            code = main(["demo", "--data", str(tmp_path / "demo-data"), "--out", str(target),
                         "--max-iters", "2", "--no-progress", *force])
            err = capsys.readouterr().err
            assert code == 2 and err.count("\n") == 1, err
            assert messages[name] in err, err
            assert tree(target) == before
            assert not (tmp_path / "demo-data").exists()  # checked before preparing
        if name != "data":
            code = main(["demo", "--data", str(target), "--out", str(tmp_path / "r"),
                         "--max-iters", "2", "--no-progress"])
            assert code == 2 and "give the data a folder of its own" in capsys.readouterr().err
            assert tree(target) == before and not (tmp_path / "r").exists()


def test_demo_replaces_its_own_run_and_another_only_with_force(demo_targets, tmp_path,
                                                               monkeypatch, capsys):
    from gptlab.cli import demo
    from gptlab.files import kinds
    from gptlab.training import run as training_run

    calls = []

    class Reached(Exception):
        pass

    def fake_train(*args, **kwargs):
        calls.append(kwargs)
        raise Reached

    monkeypatch.setattr(demo, "ensure_data", lambda path: None)
    monkeypatch.setattr(training_run, "train", fake_train)
    run = demo_targets["run"]
    with pytest.raises(Reached):
        main(["demo", "--out", str(run), "--data", str(tmp_path / "d"), "--force"])
    assert calls[-1]["overwrite"] and calls[-1]["callbacks"].owner == "demo"
    kinds.mark(run, "run", "demo")  # as an earlier demo leaves its run
    with pytest.raises(Reached):
        main(["demo", "--out", str(run), "--data", str(tmp_path / "d")])
    assert calls[-1]["overwrite"]
    with pytest.raises(Reached):  # a fresh folder: nothing to replace
        main(["demo", "--out", str(tmp_path / "new"), "--data", str(tmp_path / "d")])
    assert not calls[-1]["overwrite"]


@pytest.mark.slow
def test_a_demo_stopped_by_ctrl_c_says_where_and_how_to_finish_and_exits_130(tmp_path,
                                                                             signalled):
    import signal

    data, run = tmp_path / "demo-data", tmp_path / "demo"
    metrics = run / "metrics.jsonl"

    def training():
        return metrics.is_file() and '"kind": "train"' in metrics.read_text()

    code = ("import sys; from gptlab.cli.main import main; sys.exit(main(['demo', '--data', "
            f"{str(data)!r}, '--out', {str(run)!r}, '--no-progress']))")
    exit_code, out, err, seconds = signalled(code, training, signal.SIGINT)
    assert exit_code == 130, err
    assert seconds < 15 and "Traceback" not in err  # a bound for a loaded machine
    stopped = next(line for line in out.splitlines() if line.startswith("stopped at step"))
    step = int(stopped.split()[3])
    assert stopped.startswith(f"stopped at step {step} of 1000; checkpoint saved") and step >= 1
    assert "last evaluated at step 0: train loss" in out  # the step-0 estimate, said as such
    assert (f"Finish its 1000 steps: gptlab train --data {data} --out {run} --resume\n"
            in out)
    assert "trained" not in out and "A sample" not in out and "--max-iters" not in out
