"""`gptlab runs`: the table, --json, --sort, and --plot's figure; refusals in one line."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from gptlab.training.callbacks import StopAfter
from gptlab.training.run import train


@pytest.fixture(scope="module")
def folder(tmp_path_factory, trained_run, data_dir, tiny_model, tiny_train,
           one_thread_module):
    root = tmp_path_factory.mktemp("runs")
    shutil.copytree(trained_run, root / "done")
    train(tiny_model(), tiny_train(), data_dir, root / "stopped", progress=False,
          callbacks=StopAfter(4))
    shutil.copytree(root / "stopped", root / "live")
    return root


def test_the_table_shows_every_status_with_the_running_pid(folder, gptlab, lock_held):
    with lock_held(folder / "live") as proc:
        code, out, err = gptlab("runs", folder, "--sort", "steps", "--reverse")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["run", "model", "params", "steps", "status", "best", "val",
                                "whole", "val", "tok/s", "changed"]
    assert [line.split()[0] for line in lines[1:]] == ["done", "live", "stopped"]
    assert "8/8  finished" in lines[1] and f"4/12  running (PID {proc.pid})" in lines[2]
    assert "4/12  interrupted" in lines[3] and "2L 2H d32 ctx16" in lines[3]


def test_json_rows(folder, gptlab):
    code, out, _ = gptlab("runs", folder, "--json", "--sort", "best-val")
    rows = json.loads(out)
    assert code == 0 and {r["name"] for r in rows} == {"done", "live", "stopped"}
    done = next(r for r in rows if r["name"] == "done")
    assert (done["status"], done["step"], done["max_iters"], done["pid"]) == \
        ("finished", 8, 8, None)
    assert done["whole_val"] > 0 and done["tokens_per_s"] > 0 and "changed_iso" in done
    assert [r["best_val"] for r in rows] == sorted(r["best_val"] for r in rows)


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plot_overlays_the_runs_in_one_figure(folder, gptlab, tmp_path, suffix, png_magic):
    out = tmp_path / f"compare.{suffix}"
    code, stdout, err = gptlab("runs", folder, "--plot", "done", "stopped",
                               folder / "live", "--out", out)
    assert code == 0 and stdout == f"wrote {out}: done, stopped, {folder / 'live'}\n", err
    data = out.read_bytes()
    if suffix == "png":
        assert data.startswith(png_magic)
    else:
        assert ET.fromstring(data).tag == "{http://www.w3.org/2000/svg}svg"
        for name in ("done", "stopped", str(folder / "live")):  # text as paths, named
            assert f"<!-- {name}: val -->".encode() in data


def test_refusals_are_one_line(folder, gptlab, one_line, tmp_path):
    assert "no training runs under" in gptlab("runs", tmp_path)[1]
    assert "is not a folder" in one_line(gptlab("runs", tmp_path / "none"))
    assert "no run 'nope'" in one_line(gptlab("runs", folder, "--plot", "nope",
                                              "--out", tmp_path / "a.png"))
    assert ".png or .svg" in one_line(gptlab("runs", folder, "--plot", "done",
                                             "--out", tmp_path / "a.pdf"))
    assert "give one" in one_line(gptlab("runs", folder, "--plot", "done", "--json",
                                         "--out", tmp_path / "a.png"))
    (tmp_path / "a.png").write_bytes(b"mine")
    for force in ([], ["--force"]):  # a file gptlab did not draw, never replaced
        assert "is not a figure gptlab wrote" in one_line(gptlab(
            "runs", folder, "--plot", "done", "--out", tmp_path / "a.png", *force))
    assert (tmp_path / "a.png").read_bytes() == b"mine"
    assert gptlab("runs", folder, "--plot", "done", "--out", tmp_path / "b.png")[0] == 0
    assert "already exists: --force replaces it" in one_line(gptlab(
        "runs", folder, "--plot", "done", "--out", tmp_path / "b.png"))
    assert gptlab("runs", folder, "--plot", "done", "--out", tmp_path / "b.png",
                  "--force")[0] == 0
    assert "is inside" in one_line(gptlab("runs", folder, "--plot", "done", "--out",
                                          folder / "done" / "loss.png", "--force"))
    assert "invalid choice" in one_line(gptlab("runs", folder, "--sort", "colour"))
