"""The routes of the views that look into a run (gptlab.lab.model_routes): the paths the app
serves for them, each checking its body; the runs folder they read is create_app's."""

from gptlab.lab.model_routes import router


def test_the_router_holds_the_model_views_paths(client, served):
    assert served(router, client) == {
        ("/api/heads", "post"), ("/api/head_scores", "post"), ("/api/ablate", "post"),
        ("/api/runs", "get"), ("/api/runs/encoding", "post"), ("/api/walk", "post"),
        ("/api/walk/layer", "post"),
        ("/api/all_heads", "post"), ("/api/learned_positions", "post")}


def test_the_runs_are_those_of_the_apps_folder(client, post):
    assert "tiny" in client.get("/api/runs").json()["runs"]
    assert "tiny" in post(client, "/api/runs/encoding", {"text": "a"})["runs"]
