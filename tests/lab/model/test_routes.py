"""The routes of the views that look into a run (gptlab.lab.model.routes): the paths the app
serves for them, each checking its body."""

from gptlab.lab.model.routes import router


def test_the_router_holds_the_model_views_paths(client, served):
    assert served(router, client) == {
        ("/api/heads", "post"), ("/api/head_scores", "post"), ("/api/ablate", "post"),
        ("/api/runs", "get"), ("/api/runs/encoding", "post"), ("/api/walk", "post"),
        ("/api/walk/layer", "post"),
        ("/api/all_heads", "post"), ("/api/learned_positions", "post")}
