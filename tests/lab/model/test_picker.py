"""The runs a view's run picker offers (gptlab.lab.model.picker): those of the app's runs
folder, and those whose tokenizer encodes a text (the offer itself: tests/lab/test_runs.py)."""


def test_the_runs_are_those_of_the_apps_folder(client, post, runs_root):
    listed = client.get("/api/runs").json()
    assert listed["root"] == str(runs_root.resolve()) and "tiny" in listed["runs"]
    assert "tiny" in post(client, "/api/runs/encoding", {"text": "a"})["runs"]
