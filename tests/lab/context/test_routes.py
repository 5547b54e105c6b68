"""The routes of the longer-than-trained view (gptlab.lab.context.routes): the paths the
app serves for it, each checking its body."""

from gptlab.lab.context.routes import router


def test_the_router_holds_the_context_views_paths(client, served):
    assert served(router, client) == {
        ("/api/context", "post"), ("/api/context/experiments", "get"),
        ("/api/context/experiment", "post")}
