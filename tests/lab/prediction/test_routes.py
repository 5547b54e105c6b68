"""The routes of the next-token and logit-lens views (gptlab.lab.prediction.routes): the paths the
app serves for them, each checking its body, and a greedy next token answered."""

from gptlab.lab.prediction.routes import router


def test_the_router_holds_the_prediction_views_paths(client, served):
    assert served(router, client) == {("/api/next_token", "post"),
                                      ("/api/next_token/append", "post"), ("/api/lens", "post")}


def test_a_greedy_next_token_is_appended(client, post, tiny_text):
    text = tiny_text[:8]
    appended = post(client, "/api/next_token/append", {"run": "tiny", "text": text})
    assert appended["text"].startswith(text) and len(appended["text"]) == len(text) + 1
