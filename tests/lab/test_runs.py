"""The lab's runs folder (gptlab.lab.runs): what is listed, paths kept inside the folder,
broken runs as 400s, and loaded models cached until their files change."""

from __future__ import annotations

import os
from pathlib import Path

from fastapi.testclient import TestClient

from gptlab.lab.server import create_app


def test_runs_listed_and_kept_inside_the_folder(client, runs_root, bad):
    listing = client.get("/api/runs").json()
    # the shipped model first; the symlink out and the non-run are not listed
    assert listing["runs"] == ["shakespeare", "tiny"]
    for name, fragment in [
        ("../outside/secret", "without '..'"),
        ("tiny/../../x", "without '..'"),
        ("/etc", "without '..' or a leading '/'"),
        (str(runs_root / "tiny"), "leading '/'"),
        ("escape", "points outside the runs folder"),
        ("notarun", "no run named"),
        ("missing", "no run named"),
        ("", "run must not be empty"),
        ("a\\..\\b", "not a valid run name"),
    ]:
        bad(client, "/api/heads", {"run": name, "prompt": "the"}, fragment)
    bad(client, "/api/heads", {"run": 3, "prompt": "the"}, "run must be a string")


def test_a_weights_file_symlinked_out_is_refused(tmp_path, bad, copy_tiny_run):
    root = tmp_path / "runs"
    copy_tiny_run(tmp_path / "elsewhere")
    run = root / "sneaky"
    run.mkdir(parents=True)
    for f in ("config.json", "tokenizer.json"):
        (run / f).write_bytes((tmp_path / "elsewhere" / f).read_bytes())
    (run / "model.safetensors").symlink_to(tmp_path / "elsewhere" / "model.safetensors")
    c = TestClient(create_app(root))
    bad(c, "/api/heads", {"run": "sneaky", "prompt": "the"}, "points outside the runs folder")


def test_a_broken_run_is_a_400(tmp_path, bad, copy_tiny_run):
    root = tmp_path / "runs"
    copy_tiny_run(root / "broken")
    (root / "broken/model.safetensors").write_bytes(b"not a safetensors file")
    c = TestClient(create_app(root))
    bad(c, "/api/heads", {"run": "broken", "prompt": "the"}, "not a readable safetensors")


def test_models_are_cached_until_their_files_change(client, runs_root):
    runs = client.app.state.runs
    first = runs.load("tiny")
    assert runs.load("tiny") is first
    weights = runs_root / "tiny/model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert runs.load("tiny") is not first


def test_runs_folder_path_is_relative_to_cwd(tmp_path):
    runs = TestClient(create_app(tmp_path / "none")).get("/api/runs").json()["runs"]
    assert runs == ["shakespeare"]  # only the shipped model
    assert Path(create_app(tmp_path).state.runs.root) == tmp_path.resolve()


def test_runs_encoding_names_the_runs_whose_tokenizer_encodes_the_text(
        tmp_path, copy_tiny_run, save_char_model, post, bad):
    # regression: after a training in view 9, views 3, 8 and 10 opened on live-induction,
    # whose vocabulary has no space, so their default text failed; the pickers now default
    # to a run this route names
    root = tmp_path / "runs"
    copy_tiny_run(root / "tiny")
    save_char_model(root / "a-no-space", "abcdefghijklmnopqrstuvwxyz", n_layer=1, n_head=1,
                    n_embd=8, block_size=16)
    (root / "unreadable").mkdir()
    copy_tiny_run(root / "unreadable" / "run")
    (root / "unreadable/run/tokenizer.json").write_text("{not json")
    c = TestClient(create_app(root))
    assert c.get("/api/runs").json()["runs"] == ["shakespeare", "a-no-space", "tiny",
                                                 "unreadable/run"]  # the shipped model first
    assert post(c, "/api/runs/encoding", {"text": "the cat sat on the m"}) == {
        "text": "the cat sat on the m", "runs": ["shakespeare", "tiny"], "offer": None}
    assert post(c, "/api/runs/encoding", {"text": "cat"})["runs"] == ["shakespeare", "a-no-space",
                                                                      "tiny"]
    assert post(c, "/api/runs/encoding", {"text": "\u00e9"})["runs"] == []
    bad(c, "/api/runs/encoding", {"text": ""}, "text must not be empty")
    # issue 39: a text from the address that a run cannot encode gets an offer it can
    offer = post(c, "/api/runs/encoding", {"text": "The Cat, sat!", "run": "a-no-space"})["offer"]
    assert offer == "heatsat"
    assert post(c, "/api/runs/encoding", {"text": offer})["runs"][:2] == ["shakespeare",
                                                                        "a-no-space"]
    unknown = {"text": "\u00e9", "run": "a-no-space"}  # nothing of it left: the vocabulary's start
    assert post(c, "/api/runs/encoding", unknown)["offer"] == "abcdefgh"
    bad(c, "/api/runs/encoding", {"text": "cat", "run": "nothere"}, "nothere")


def test_a_run_named_as_a_shipped_model_is_opened_as_dot_slash_name(tmp_path, copy_tiny_run):
    # regression: a run folder named shakespeare hid the shipped model in the lab, while
    # every command loads the shipped model by that name (gptlab.loading.resolve)
    from gptlab import pretrained

    root = tmp_path / "runs"
    copy_tiny_run(root / "shakespeare")
    app = create_app(root)
    runs = app.state.runs
    assert TestClient(app).get("/api/runs").json()["runs"] == ["shakespeare", "./shakespeare"]
    assert runs.resolve("shakespeare") == pretrained.folder("shakespeare")
    assert runs.resolve("./shakespeare") == (root / "shakespeare").resolve()
    assert runs.load("./shakespeare").model.config.to_dict() != (
        runs.load("shakespeare").model.config.to_dict())
